//! The one channel a process uses for all its calls.

use std::{
    fs,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::Context;
use tonic::{
    Request,
    transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity},
};

use crate::{
    cli::{Args, Connect, Seconds},
    report::Failure,
};

/// How long each step of connecting may take: the TCP connect, and then the
/// TLS handshake. Without the first, a call to an address that drops packets
/// waits for the operating system's TCP timeout, which is minutes; without
/// the second, a server that accepts and never answers holds the call forever.
/// A call's deadline covers neither (chapter 10, step 4).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where to connect and with which credentials.
#[derive(Debug, Clone)]
pub struct Target {
    pub url: String,
    pub ca: PathBuf,
    /// Client certificate and key, for a server that demands mTLS.
    pub identity: Option<(PathBuf, PathBuf)>,
}

impl Target {
    pub fn from_args(args: &Args) -> Target {
        Target {
            url: args.target.clone(),
            ca: args.ca.clone().unwrap_or_else(program::default_ca),
            identity: args.cert.clone().zip(args.key.clone()),
        }
    }
}

// ANCHOR: endpoint
/// The endpoint: the address, TLS that trusts only our CA, and the connect
/// timeouts. Building it reads the certificate files but opens no connection.
pub fn endpoint(target: &Target) -> anyhow::Result<Endpoint> {
    // tonic's `connect_timeout` bounds the TCP connect only; the TLS handshake
    // after it has its own timeout, which is off unless set here.
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read(&target.ca)?))
        .timeout(CONNECT_TIMEOUT);
    if let Some((cert, key)) = &target.identity {
        tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
    }
    let endpoint = Endpoint::from_shared(target.url.clone())
        .with_context(|| format!("`{}` is not a URL", target.url))?
        .tls_config(tls)
        .context("TLS configuration")?
        .connect_timeout(CONNECT_TIMEOUT);
    Ok(endpoint)
}

/// The channel. Lazy: nothing happens until the first call, which then pays
/// for TCP, TLS and HTTP/2 setup, and a failure to connect is that call's
/// UNAVAILABLE. Eager: connect now, and report a failure before any call.
pub async fn channel(endpoint: &Endpoint, connect: Connect) -> Result<Channel, Failure> {
    match connect {
        Connect::Lazy => Ok(endpoint.connect_lazy()),
        Connect::Eager => {
            let started = Instant::now();
            let channel = endpoint.connect().await.map_err(|e| Failure::connect(&e))?;
            eprintln!(
                "connected to {} in {:.1} ms",
                endpoint.uri(),
                started.elapsed().as_secs_f64() * 1e3
            );
            Ok(channel)
        }
    }
}
// ANCHOR_END: endpoint

// ANCHOR: with_deadline
/// Wraps a request message and, if there is a deadline, sets it: tonic sends
/// it as `grpc-timeout` and also ends the call itself when it runs out.
pub fn request<T>(message: T, deadline: Option<Seconds>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(deadline) = deadline {
        request.set_timeout(deadline.duration);
    }
    request
}
// ANCHOR_END: with_deadline

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    fs::read(path).with_context(|| {
        format!(
            "cannot read {}; `{}` creates the development PKI",
            path.display(),
            certs::pki::CREATE_COMMAND
        )
    })
}
