//! Fresh connections: a new TCP and TLS connection for every call, made from
//! one shared TLS configuration and driven with hyper, so that each handshake
//! can be seen, counted, and resumed or not.

use std::{
    net::SocketAddr,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::{Context, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::{ClientConfig, HandshakeKind, client::Resumption, pki_types::ServerName};
use tokio::net::TcpStream;
use tokio_rustls::{TlsConnector, client::TlsStream};

use super::{caller::hello_request, rest_body};

/// Counts how the TLS handshakes of an arm went.
#[derive(Debug, Default)]
pub struct Handshakes {
    pub full: AtomicU64,
    pub resumed: AtomicU64,
}

impl Handshakes {
    fn record(&self, kind: Option<HandshakeKind>) {
        match kind {
            Some(HandshakeKind::Resumed) => self.resumed.fetch_add(1, Ordering::Relaxed),
            _ => self.full.fetch_add(1, Ordering::Relaxed),
        };
    }
    pub fn counts(&self) -> (u64, u64) {
        (
            self.full.load(Ordering::Relaxed),
            self.resumed.load(Ordering::Relaxed),
        )
    }
}

/// Which HTTP a fresh connection speaks, and so what ALPN it offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Http {
    H2,
    H1,
}
// ANCHOR: fresh_tls
/// A TLS configuration for fresh connections. With `resume`, rustls keeps the
/// session tickets servers send in memory and offers one on the next connection
/// to the same name: a resumed handshake skips the certificate chain and its
/// signature. `Resumption::disabled()` makes every handshake a full one.
pub fn fresh_tls(ca: &Path, http: Http, resume: bool) -> anyhow::Result<TlsConnector> {
    let mut config: ClientConfig = certs::client_config(ca, None)?;
    config.resumption = if resume {
        Resumption::in_memory_sessions(256)
    } else {
        Resumption::disabled()
    };
    config.alpn_protocols = match http {
        Http::H2 => vec![b"h2".to_vec()],
        Http::H1 => vec![b"http/1.1".to_vec()],
    };
    Ok(TlsConnector::from(Arc::new(config)))
}
// ANCHOR_END: fresh_tls

/// TCP connect and TLS handshake, noting whether the handshake was resumed.
pub async fn connect_tls(
    addr: SocketAddr,
    tls: &TlsConnector,
    handshakes: &Handshakes,
) -> anyhow::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    tcp.set_nodelay(true)?;
    let stream = tls
        .connect(ServerName::try_from("localhost")?, tcp)
        .await
        .context("TLS handshake")?;
    handshakes.record(stream.get_ref().1.handshake_kind());
    Ok(stream)
}

/// One call on a connection of its own, which is closed afterwards.
pub(super) async fn fresh_call(
    grpc: bool,
    http: Http,
    addr: SocketAddr,
    tls: &TlsConnector,
    handshakes: &Handshakes,
) -> anyhow::Result<()> {
    let io = TokioIo::new(connect_tls(addr, tls, handshakes).await?);
    let authority = format!("localhost:{}", addr.port());
    let request = if grpc {
        // The bytes tonic sends: one gRPC frame holding the message.
        http::Request::post(format!("https://{authority}/greeter.v1.Greeter/SayHello"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Full::new(Bytes::from(proto::grpc_frame(&hello_request()))))?
    } else {
        let uri = match http {
            Http::H2 => format!("https://{authority}/v1/greetings"),
            Http::H1 => "/v1/greetings".to_string(),
        };
        http::Request::post(uri)
            .header("host", &authority)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(rest_body())))?
    };
    let response = match http {
        Http::H2 => {
            let (mut send, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
            tokio::spawn(connection);
            send.send_request(request).await?
        }
        Http::H1 => {
            let (mut send, connection) = hyper::client::conn::http1::handshake(io).await?;
            tokio::spawn(connection);
            send.send_request(request).await?
        }
    };
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await?;
    if !status.is_success() {
        bail!("server answered {status}");
    }
    if grpc {
        // grpc-status is in the trailers, or in the headers of a
        // trailers-only answer; anything but 0 is a failed call.
        let grpc_status = body
            .trailers()
            .and_then(|t| t.get("grpc-status"))
            .or_else(|| headers.get("grpc-status"))
            .and_then(|v| v.to_str().ok())
            .unwrap_or("missing")
            .to_string();
        if grpc_status != "0" {
            bail!("gRPC call failed: grpc-status {grpc_status}");
        }
    }
    Ok(())
}
