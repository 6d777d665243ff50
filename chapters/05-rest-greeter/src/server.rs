//! The REST server: TLS with ALPN, HTTP/1.1 and HTTP/2, limits, shutdown.

use std::{future::Future, net::SocketAddr, sync::Arc, sync::atomic::Ordering, time::Duration};

use certs::{TlsArgs, TlsListener};
use grpc_server::CallStats;
use hyper::service::service_fn;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto, graceful::GracefulShutdown},
};
use tracing::{debug, info, warn};

use crate::{
    api::{self, AppState},
    guard,
};

pub const DEFAULT_ADDR: &str = "127.0.0.1:8443";

// ANCHOR: limits
/// An HTTP/1.1 client gets this long to send a request's headers. Without it, a
/// client that opens a connection and trickles bytes (slowloris) holds a
/// connection slot for as long as it likes.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

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

pub struct BoundServer {
    listener: TlsListener,
    addr: SocketAddr,
    state: AppState,
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
        })
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
        let app = api::router(self.state.clone());
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
            .keep_alive_interval(Duration::from_secs(30));

        let mut incoming = self.listener.incoming();
        let graceful = GracefulShutdown::new();
        info!(addr = %self.addr, "REST server listening (HTTPS: HTTP/1.1 and HTTP/2)");
        tokio::pin!(shutdown);
        loop {
            let tls = tokio::select! {
                Some(tls) = incoming.recv() => tls,
                _ = &mut shutdown => break,
            };
            let alpn = tls
                .get_ref()
                .1
                .alpn_protocol()
                .map(|p| String::from_utf8_lossy(p).into_owned());
            let app = app.clone();
            let service = service_fn(move |request| guard::serve(app.clone(), request));
            let connection = builder
                .serve_connection(TokioIo::new(tls), service)
                .into_owned();
            let connection = graceful.watch(connection);
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    debug!(
                        alpn = alpn.as_deref().unwrap_or("none"),
                        "connection ended with an error: {e}"
                    );
                }
            });
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
