//! The REST server: TLS with ALPN, HTTP/1.1 and HTTP/2, limits, shutdown.

use std::{
    convert::Infallible, future::Future, net::SocketAddr, path::PathBuf, sync::Arc,
    sync::atomic::Ordering, time::Duration,
};

use certs::{TlsArgs, TlsListener};
use grpc_server::{CallStats, connection::PrefaceDeadline};
use hyper::{
    server::conn::{http1, http2},
    service::service_fn,
};
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
};
use prometheus_client::registry::Registry;
use tokio::sync::oneshot;
use tracing::{debug, info, warn};

use crate::{
    api::{self, AppState},
    guard,
    metrics::{self, RestMetrics},
};

pub const DEFAULT_ADDR: &str = "127.0.0.1:8443";

// ANCHOR: limits
/// An HTTP/1.1 client gets this long to send a request's headers, counted
/// from the end of the TLS handshake or of the previous response. Without it,
/// a client that opens a connection and trickles bytes (slowloris), or sends
/// nothing at all, holds a connection slot for as long as it likes.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// An HTTP/2 client gets this long after the handshake to send its preface:
/// the gRPC server's bound, for the same reason (hyper waits forever).
pub const PREFACE_TIMEOUT: Duration = grpc_server::server::PREFACE_TIMEOUT;

/// The most an HTTP/1.1 request head (request line and headers) may take:
/// past it hyper itself answers a bare 431 and closes the connection. Set
/// well above guard::MAX_HEADER_BYTES so that ordinary oversized headers get
/// the problem-details 431 instead; hyper's default is about 400 KiB.
pub const MAX_HEAD_BYTES: usize = 128 * 1024;

/// Header fields an HTTP/1.1 request may have (hyper's default, stated).
pub const MAX_HEADERS: usize = 100;

/// The HTTP/2 counterpart of MAX_HEAD_BYTES (`SETTINGS_MAX_HEADER_LIST_SIZE`),
/// and for the same reason as on the gRPC port: hyper's 16 KiB made h2 end
/// the whole connection for a 64 KiB header. Every list under it is answered
/// (past MAX_HEADER_BYTES, with the guard's 431). curl cannot send one over
/// about 64 KiB, though: its nghttp2 refuses to encode such a block
/// (`max_send_header_block_length`) and calls that REFUSED_STREAM, so curl
/// retries, then gives up without a status; no request ever arrives here.
pub const MAX_HEADER_LIST_BYTES: u32 = grpc_server::server::MAX_HEADER_LIST_BYTES;

/// Streams a connection may make us reset for its protocol errors before it
/// gets GOAWAY: hyper's default, stated, and the gRPC port's bound.
pub const MAX_LOCAL_ERROR_RESETS: usize = grpc_server::server::MAX_LOCAL_ERROR_RESETS;

/// Concurrent requests on one HTTP/2 connection; the same bound, for the same
/// reason, as the gRPC server's.
pub const MAX_CONCURRENT_STREAMS: u32 = 256;

/// How long shutdown waits for requests in flight before closing regardless.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
// ANCHOR_END: limits

/// The Greeter over REST (HTTPS, HTTP/1.1 and HTTP/2).
#[derive(clap::Parser, Clone, Debug)]
#[command(name = "rest-server", version)]
pub struct Args {
    /// Address to listen on
    #[arg(long, env = "REST_ADDR", default_value = DEFAULT_ADDR)]
    pub addr: SocketAddr,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Require a client certificate signed by the CA (mutual TLS)
    #[arg(long, env = "REST_MTLS")]
    pub mtls: bool,
}

/// `rest-server`'s command line: the server's settings, and where to say that
/// it is ready (the stack, which builds an [`Args`] itself, says so itself).
#[derive(clap::Parser, Clone, Debug)]
#[command(name = "rest-server", version)]
pub struct Cli {
    #[command(flatten)]
    pub server: Args,
    /// Once listening, write the address to this file (atomically), for a
    /// script or harness that waits for it
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
    /// Serve Prometheus metrics (`GET /metrics`, plain HTTP) on this address;
    /// off by default
    #[arg(long, env = "REST_METRICS_ADDR", value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
}

pub struct BoundServer {
    listener: TlsListener,
    addr: SocketAddr,
    state: AppState,
    listening: Option<oneshot::Sender<SocketAddr>>,
    metrics: Option<RestMetrics>,
}

impl BoundServer {
    pub async fn bind(args: &Args) -> anyhow::Result<Self> {
        // ALPN: offer HTTP/2 first; clients that only speak HTTP/1.1 pick that.
        let tls = certs::server_config(&args.tls, args.mtls, &[b"h2", b"http/1.1"])?;
        let listener = TlsListener::bind(args.addr, tls).await?;
        let addr = listener.local_addr()?;
        Ok(BoundServer {
            listener,
            addr,
            state: AppState::default(),
            listening: None,
            metrics: None,
        })
    }

    /// Sends the address to `listening` once `serve` has logged that it
    /// listens: the moment a ready file may be written.
    pub fn notify_when_listening(mut self, listening: oneshot::Sender<SocketAddr>) -> Self {
        self.listening = Some(listening);
        self
    }

    /// Counts every request into `registry`'s `http_*` families.
    pub fn with_metrics(mut self, registry: &mut Registry) -> Self {
        self.metrics = Some(RestMetrics::register(registry));
        self
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stats(&self) -> Arc<CallStats> {
        self.state.stats.clone()
    }

    // ANCHOR: serve
    /// Serves until `shutdown` resolves; then stops accepting, fails health
    /// checks, and gives requests in flight up to DRAIN_TIMEOUT to finish.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send) -> anyhow::Result<()> {
        let mut app = api::router(self.state.clone());
        if self.metrics.is_some() {
            app = app.layer(axum::middleware::from_fn(metrics::tag_route));
        }
        // The TLS handshake has already chosen the protocol (ALPN), so each
        // connection goes straight to its own builder. hyper-util's `auto`
        // builder would first read the connection to guess, with no time
        // limit: a client that says nothing after TLS would wait there forever.
        let mut h1 = http1::Builder::new();
        h1.timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .max_header_size(MAX_HEAD_BYTES)
            .max_headers(MAX_HEADERS);
        let mut h2 = http2::Builder::new(TokioExecutor::new());
        h2.timer(TokioTimer::new())
            .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
            .max_header_list_size(MAX_HEADER_LIST_BYTES)
            .max_local_error_reset_streams(MAX_LOCAL_ERROR_RESETS)
            .keep_alive_interval(Duration::from_secs(30));

        let mut incoming = self.listener.incoming();
        let graceful = GracefulShutdown::new();
        info!(addr = %self.addr, "REST server listening (HTTPS: HTTP/1.1 and HTTP/2)");
        if let Some(listening) = self.listening {
            let _ = listening.send(self.addr);
        }
        tokio::pin!(shutdown);
        loop {
            let tls = tokio::select! {
                Some(tls) = incoming.recv() => tls,
                _ = &mut shutdown => break,
            };
            let peer = tls.get_ref().0.peer_addr().ok();
            let app = app.clone();
            let metrics = self.metrics.clone();
            let service = service_fn(move |request| counted(metrics.clone(), app.clone(), request));
            // No ALPN at all means HTTP/1.1: HTTP/2 over TLS is only ever
            // chosen by ALPN (RFC 9113, section 3.2).
            if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                let io = TokioIo::new(PrefaceDeadline::new(tls, peer, PREFACE_TIMEOUT));
                let connection = graceful.watch(h2.serve_connection(io, service));
                tokio::spawn(async move { log_end("h2", peer, connection.await) });
            } else {
                let connection = graceful.watch(h1.serve_connection(TokioIo::new(tls), service));
                tokio::spawn(async move { log_end("http/1.1", peer, connection.await) });
            }
        }

        drop(incoming); // stops the accept loop
        self.state.draining.store(true, Ordering::Relaxed);
        info!("REST server draining: no new connections, waiting for requests in flight");
        if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
            .await
            .is_err()
        {
            warn!("drain timed out after {DRAIN_TIMEOUT:?}; closing the remaining connections");
        }
        info!("REST server stopped");
        Ok(())
    }
    // ANCHOR_END: serve
}

/// The guard and the router, counted from the request's arrival (so the
/// guard's refusals count too) when metrics are on.
async fn counted(
    metrics: Option<RestMetrics>,
    app: axum::Router,
    request: http::Request<hyper::body::Incoming>,
) -> Result<http::Response<guard::Lingering>, Infallible> {
    let Some(metrics) = metrics else {
        return guard::serve(app, request).await;
    };
    let counting = metrics.start(request.method());
    let response = guard::serve(app, request).await?;
    counting.finish(&response);
    Ok(response)
}

/// Logs how a connection ended, when it did not end well. A client that let
/// a time limit pass is worth an info line: that is a refusal the operator
/// may be asked about. The preface limit logs itself (`PrefaceDeadline`).
fn log_end(protocol: &str, peer: Option<SocketAddr>, ended: Result<(), hyper::Error>) {
    let peer = peer.map_or("unknown".into(), |p| p.to_string());
    match ended {
        Ok(()) => {}
        Err(e) if e.is_timeout() && protocol == "http/1.1" => info!(
            %peer,
            "closing a connection: request headers not complete within {HEADER_READ_TIMEOUT:?}"
        ),
        Err(e) => debug!(%peer, protocol, "connection ended with an error: {e}"),
    }
}
