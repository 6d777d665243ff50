//! rustls configurations built from the development PKI.
//!
//! Every configuration names its crypto provider explicitly (`ring`), so the
//! workspace never depends on which provider happens to be compiled in.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::Context;
use rustls::{
    ClientConfig, RootCertStore, ServerConfig,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};

use crate::pki::{self, CREATE_COMMAND, Pki};

/// Where a server finds its certificate, its key and, with `--mtls`, the CA that
/// client certificates must chain to. Shared by every server's command line,
/// and part of the configuration an experiment hands the servers it starts.
#[derive(clap::Args, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TlsArgs {
    /// Folder holding the development PKI (created by `cargo run -p certs`)
    #[arg(long, env = "CERTS_DIR", default_value_os_t = program::certs_dir())]
    pub certs_dir: PathBuf,
    /// Server certificate chain, PEM [default: <certs-dir>/server.pem]
    #[arg(long, env = "TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// Server private key, PEM [default: <certs-dir>/server.key]
    #[arg(long, env = "TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// CA that client certificates must chain to with --mtls [default: <certs-dir>/ca.pem]
    #[arg(long, env = "TLS_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,
}

impl TlsArgs {
    /// The defaults for a PKI folder: what tests and the stack use.
    pub fn in_dir(dir: impl Into<PathBuf>) -> Self {
        TlsArgs {
            certs_dir: dir.into(),
            tls_cert: None,
            tls_key: None,
            client_ca: None,
        }
    }
    pub fn cert_path(&self) -> PathBuf {
        self.tls_cert
            .clone()
            .unwrap_or_else(|| Pki::new(&self.certs_dir).server_cert())
    }
    pub fn key_path(&self) -> PathBuf {
        self.tls_key
            .clone()
            .unwrap_or_else(|| Pki::new(&self.certs_dir).server_key())
    }
    pub fn client_ca_path(&self) -> PathBuf {
        self.client_ca
            .clone()
            .unwrap_or_else(|| Pki::new(&self.certs_dir).ca_cert())
    }
}

// ANCHOR: provider
/// The one crypto provider of the workspace.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
// ANCHOR_END: provider

// ANCHOR: server_config
/// A server configuration that presents `server.pem`, offers the given ALPN
/// protocols (in order of preference) and, when `mtls` is set, refuses any client
/// that does not present a certificate signed by the client CA.
pub fn server_config(args: &TlsArgs, mtls: bool, alpn: &[&[u8]]) -> anyhow::Result<ServerConfig> {
    let chain = read_certs(&args.cert_path(), "server certificate")?;
    let key = read_key(&args.key_path(), "server key")?;
    let builder =
        ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let builder = if mtls {
        let roots = Arc::new(root_store(&args.client_ca_path(), "client CA")?);
        let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider()).build()?;
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let mut config = builder.with_single_cert(chain, key).with_context(|| {
        format!(
            "{} does not match {}",
            args.key_path().display(),
            args.cert_path().display()
        )
    })?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}
// ANCHOR_END: server_config

// ANCHOR: client_config
/// A client configuration that trusts exactly one CA (not the system's roots)
/// and, if `identity` names a certificate and key, presents them for mTLS.
pub fn client_config(ca: &Path, identity: Option<(&Path, &Path)>) -> anyhow::Result<ClientConfig> {
    let roots = root_store(ca, "CA certificate")?;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    Ok(match identity {
        Some((cert, key)) => builder.with_client_auth_cert(
            read_certs(cert, "client certificate")?,
            read_key(key, "client key")?,
        )?,
        None => builder.with_no_client_auth(),
    })
}
// ANCHOR_END: client_config

fn root_store(path: &Path, what: &str) -> anyhow::Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(path, what)? {
        roots
            .add(cert)
            .with_context(|| format!("{what} {} is not a usable CA", path.display()))?;
    }
    Ok(roots)
}

/// Reads every certificate in a PEM file. A missing file is the common case on a
/// fresh checkout, so its message says which command creates it.
pub fn read_certs(path: &Path, what: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    check_exists(path, what)?;
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("cannot read {what} {}", path.display()))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "{what} {} holds no PEM certificate",
        path.display()
    );
    Ok(certs)
}

fn read_key(path: &Path, what: &str) -> anyhow::Result<PrivateKeyDer<'static>> {
    check_exists(path, what)?;
    PrivateKeyDer::from_pem_file(path)
        .with_context(|| format!("cannot read {what} {}", path.display()))
}

fn check_exists(path: &Path, what: &str) -> anyhow::Result<()> {
    if path.exists() {
        return Ok(());
    }
    let generated = [
        pki::CA_CERT,
        pki::SERVER_CERT,
        pki::SERVER_KEY,
        pki::CLIENT_CERT,
        pki::CLIENT_KEY,
    ];
    let is_ours = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| generated.contains(&n));
    if is_ours {
        let dir = path.parent().unwrap_or(Path::new("."));
        anyhow::bail!(
            "{what} {} does not exist; create the development PKI with `{CREATE_COMMAND} -- --dir {}`",
            path.display(),
            dir.display()
        )
    }
    anyhow::bail!("{what} {} does not exist", path.display())
}
