//! What a certificate says, in the terms chapter 3 uses.
//!
//! `openssl x509 -noout -text -in certs/server.pem` prints the same and more; this
//! exists so the exercise works on a machine without OpenSSL's command line.

use std::{fmt::Write, path::Path};

use x509_parser::{
    extensions::{GeneralName, ParsedExtension},
    prelude::*,
};

use crate::config::read_certs;

/// A short description of every certificate in a PEM file.
pub fn describe(path: &Path) -> anyhow::Result<String> {
    let mut out = String::new();
    for der in read_certs(path, "certificate")? {
        let (_, cert) = X509Certificate::from_der(&der).map_err(|e| {
            anyhow::anyhow!("{} is not a valid X.509 certificate: {e}", path.display())
        })?;
        writeln!(out, "{}", path.display())?;
        writeln!(out, "  subject:     {}", cert.subject())?;
        writeln!(out, "  issuer:      {}", cert.issuer())?;
        writeln!(
            out,
            "  valid:       {} .. {}",
            cert.validity().not_before,
            cert.validity().not_after
        )?;
        writeln!(out, "  key:         {}", key_algorithm(&cert))?;
        for ext in cert.extensions() {
            match ext.parsed_extension() {
                ParsedExtension::BasicConstraints(bc) => {
                    let path_len = bc
                        .path_len_constraint
                        .map_or("unlimited".into(), |n| n.to_string());
                    if bc.ca {
                        writeln!(out, "  CA:          yes, path length {path_len}")?;
                    } else {
                        writeln!(out, "  CA:          no")?;
                    }
                }
                ParsedExtension::KeyUsage(ku) => writeln!(out, "  key usage:   {ku}")?,
                ParsedExtension::ExtendedKeyUsage(eku) => {
                    let mut uses = Vec::new();
                    if eku.server_auth {
                        uses.push("serverAuth");
                    }
                    if eku.client_auth {
                        uses.push("clientAuth");
                    }
                    writeln!(out, "  ext. usage:  {}", uses.join(", "))?;
                }
                ParsedExtension::SubjectAlternativeName(san) => {
                    let names: Vec<String> = san
                        .general_names
                        .iter()
                        .map(|name| match name {
                            GeneralName::DNSName(dns) => format!("DNS:{dns}"),
                            GeneralName::IPAddress(ip) => format!("IP:{}", ip_string(ip)),
                            other => other.to_string(),
                        })
                        .collect();
                    writeln!(out, "  names (SAN): {}", names.join(", "))?;
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

fn key_algorithm(cert: &X509Certificate<'_>) -> &'static str {
    let oid = cert.public_key().algorithm.algorithm.to_id_string();
    match oid.as_str() {
        // An EC key's curve is in the algorithm's parameters.
        "1.2.840.10045.2.1" => match cert
            .public_key()
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| p.as_oid().ok())
        {
            Some(curve) if curve.to_id_string() == "1.2.840.10045.3.1.7" => "ECDSA, curve P-256",
            Some(curve) if curve.to_id_string() == "1.3.132.0.34" => "ECDSA, curve P-384",
            _ => "ECDSA, other curve",
        },
        "1.2.840.113549.1.1.1" => "RSA",
        "1.3.101.112" => "Ed25519",
        _ => "other",
    }
}

fn ip_string(bytes: &[u8]) -> String {
    match bytes.len() {
        4 => std::net::Ipv4Addr::from(<[u8; 4]>::try_from(bytes).unwrap_or_default()).to_string(),
        16 => std::net::Ipv6Addr::from(<[u8; 16]>::try_from(bytes).unwrap_or_default()).to_string(),
        _ => format!("{bytes:?}"),
    }
}
