//! The gRPC server: TLS, optional mTLS, health, reflection, limits, shutdown.

use std::{
    convert::Infallible, future::Future, net::SocketAddr, path::PathBuf, sync::Arc, time::Duration,
};

use certs::{TlsArgs, TlsListener};
use prometheus_client::registry::Registry;
use proto::greeter::v1::greeter_server::GreeterServer;
use tokio::sync::oneshot;
use tokio_stream::{StreamExt, wrappers::ReceiverStream};
use tonic::{
    body::Body,
    codegen::{Service, http},
    server::NamedService,
    service::Routes,
    transport::Server,
};
use tonic_health::{ServingStatus, pb::health_server::HealthServer, server::HealthService};
use tracing::{info, warn};

use crate::{
    connection::with_preface_deadline,
    greeter::Greeter,
    lifetime::CallStats,
    metrics::{GrpcMetrics, MetricsLayer, known_methods},
    refuse::RefuseLayer,
    spec_codes::SpecCodesLayer,
    trace::TraceLayer,
};

pub const DEFAULT_ADDR: &str = "127.0.0.1:50051";

// ANCHOR: limits
/// HTTP/2 streams (calls) one connection may have open at once. tonic's default
/// is no limit at all, so a single client could open thousands of calls and
/// queue them all on us; 256 is far more than any exercise here needs.
pub const MAX_CONCURRENT_STREAMS: u32 = 256;

/// The HTTP/2 receive window of each stream: bytes a client may send on a call
/// before the handler reads them. It is hyper's default, written down because
/// `with_independent_streams` sizes the connection's window from it.
pub const STREAM_WINDOW_BYTES: u32 = 1024 * 1024;

/// The largest message the Greeter decodes or encodes. gRPC's customary default
/// is 4 MiB; a greeting is a few dozen bytes, so anything near this size is a
/// mistake or an attack and is refused before it is buffered.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// An idle connection is pinged this often, and dropped if a ping goes
/// unanswered for KEEPALIVE_TIMEOUT: a vanished client (laptop lid closed,
/// cable pulled) does not keep its connection state here forever.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long shutdown waits for calls in flight before closing regardless: the
/// same bound as the REST server's.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A client gets this long after its TLS handshake to send the HTTP/2
/// preface. A real client sends it at once, in the same flight as its first
/// request; hyper on its own would wait forever (see `connection`).
pub const PREFACE_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest request metadata (all headers, as HTTP/2 counts them) a call
/// may carry; larger, and that call alone gets RESOURCE_EXHAUSTED. gRPC's C
/// core refuses above 16 KiB too, and real metadata is a few hundred bytes.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;

/// The header list HTTP/2 itself accepts (`SETTINGS_MAX_HEADER_LIST_SIZE`),
/// kept well above MAX_METADATA_BYTES so that a large header reaches the
/// check above and gets a clear status. Past this, h2 refuses the stream
/// itself, with a bare 431. Far past it (a header block in more than 10
/// CONTINUATION frames, about 190 KiB, or over 512 KiB decoded) h2 ends the
/// whole connection: its defence against header floods. With hyper's own
/// 16 KiB, 64 KiB of metadata was already "far past" and cost every call on
/// the connection.
pub const MAX_HEADER_LIST_BYTES: u32 = 128 * 1024;

/// Streams one connection may make us reset for its protocol errors before
/// we end the connection (GOAWAY, ENHANCE_YOUR_CALM). hyper's default, 1024,
/// stated here because tonic passes "no limit" unless it is given one.
pub const MAX_LOCAL_ERROR_RESETS: usize = 1024;
// ANCHOR_END: limits

/// The Greeter over gRPC, on TLS.
#[derive(clap::Parser, Clone, Debug)]
#[command(name = "grpc-server", version)]
pub struct Args {
    /// Address to listen on
    #[arg(long, env = "GRPC_ADDR", default_value = DEFAULT_ADDR)]
    pub addr: SocketAddr,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Require a client certificate signed by the CA (mutual TLS)
    #[arg(long, env = "GRPC_MTLS")]
    pub mtls: bool,
    /// Serve at most N calls at once per connection and refuse the rest with
    /// RESOURCE_EXHAUSTED at once (chapter 7); off by default
    #[arg(long, env = "GRPC_CONCURRENCY_LIMIT", value_name = "N")]
    pub concurrency_limit: Option<usize>,
}

/// `grpc-server`'s command line: the server's settings, and where to say that
/// it is ready. The ready file is the program's business, not the server's:
/// programs that build an [`Args`] of their own (the stack, chapter 11's
/// ingest server) say when *they* are ready.
#[derive(clap::Parser, Clone, Debug)]
#[command(name = "grpc-server", version)]
pub struct Cli {
    #[command(flatten)]
    pub server: Args,
    /// Once listening, write the address to this file (atomically), for a
    /// script or harness that waits for it
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
    /// Serve Prometheus metrics (`GET /metrics`, plain HTTP) on this address;
    /// off by default
    #[arg(long, env = "GRPC_METRICS_ADDR", value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Log a span per call that continues the caller's trace (`traceparent`),
    /// with the deadline the call arrived with; off by default
    #[arg(long, env = "GRPC_TRACE")]
    pub trace: bool,
}

/// A server that has loaded its certificates and bound its port but not yet
/// started serving: `local_addr` is known (useful with port 0), and every setup
/// error has already been reported.
pub struct BoundServer {
    listener: TlsListener,
    addr: SocketAddr,
    greeter: Greeter,
    mtls: bool,
    concurrency_limit: Option<usize>,
    /// Services that later chapters serve beside the Greeter (see `add_service`).
    extra: Routes,
    extra_names: Vec<&'static str>,
    drain_timeout: Duration,
    /// Streams per connection, when no stream may starve another of window.
    independent_streams: Option<u32>,
    listening: Option<oneshot::Sender<SocketAddr>>,
    metrics: Option<GrpcMetrics>,
    trace: bool,
}

impl BoundServer {
    pub async fn bind(args: &Args) -> anyhow::Result<Self> {
        // gRPC needs HTTP/2; offering only "h2" in ALPN makes that explicit.
        let tls = certs::server_config(&args.tls, args.mtls, &[b"h2"])?;
        let listener = TlsListener::bind(args.addr, tls).await?;
        let addr = listener.local_addr()?;
        Ok(BoundServer {
            listener,
            addr,
            greeter: Greeter::default(),
            mtls: args.mtls,
            concurrency_limit: args.concurrency_limit,
            extra: Routes::default(),
            extra_names: Vec::new(),
            drain_timeout: DRAIN_TIMEOUT,
            independent_streams: None,
            listening: None,
            metrics: None,
            trace: false,
        })
    }

    /// Replaces [`DRAIN_TIMEOUT`]: how long shutdown waits for calls in flight.
    pub fn with_drain_timeout(mut self, limit: Duration) -> Self {
        self.drain_timeout = limit;
        self
    }

    // ANCHOR: independent_streams
    /// At most `streams` calls per connection, and a connection window that
    /// holds all of their stream windows at once. By default one stream's
    /// unread bytes can fill the whole connection window (hyper gives both
    /// the same size), and then no other stream on that connection can send.
    /// That is harmless while every handler reads, but a handler that holds
    /// back on purpose (chapter 11's reserve-before-receive) would stop its
    /// neighbours, and if they hold what it waits for, nothing moves again.
    pub fn with_independent_streams(mut self, streams: u32) -> Self {
        self.independent_streams = Some(streams);
        self
    }
    // ANCHOR_END: independent_streams

    /// Counts every call into `registry`'s `grpc_server_*` families.
    pub fn with_metrics(mut self, registry: &mut Registry) -> Self {
        // The served methods are known only in `serve`, once every service is added.
        self.metrics = Some(GrpcMetrics::register(registry, Default::default()));
        self
    }

    /// Opens a span per call ([`crate::trace`]).
    pub fn with_tracing(mut self) -> Self {
        self.trace = true;
        self
    }

    /// Sends the address to `listening` once `serve` has set everything up
    /// and logged that it listens: the moment a ready file may be written.
    pub fn notify_when_listening(mut self, listening: oneshot::Sender<SocketAddr>) -> Self {
        self.listening = Some(listening);
        self
    }

    // ANCHOR: add_service
    /// Serves another gRPC service on the same port, beside the Greeter, with the
    /// same TLS, limits and shutdown; health and reflection report it too. This
    /// is how a later chapter adds its service (chapter 8's `Streamer`) without
    /// this crate knowing about it.
    pub fn add_service<S>(mut self, service: S) -> Self
    where
        S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        self.extra_names.push(S::NAME);
        self.extra = self.extra.add_service(service);
        self
    }
    // ANCHOR_END: add_service

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The Greeter's counters, for tests and for the stack's shutdown report.
    pub fn stats(&self) -> Arc<CallStats> {
        self.greeter.stats.clone()
    }

    // ANCHOR: serve
    /// Serves until `shutdown` resolves, then stops accepting, reports
    /// NOT_SERVING to health checks and waits for calls in flight to finish.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send) -> anyhow::Result<()> {
        let (health, health_service) = tonic_health::server::health_reporter();
        health.set_serving::<GreeterServer<Greeter>>().await;
        for name in &self.extra_names {
            health
                .set_service_status(name, ServingStatus::Serving)
                .await;
        }

        // Reflection, in both of the versions clients ask for: v1, and the
        // v1alpha that grpcio's reflection client, older grpcurl and several
        // GUI tools still use.
        let reflection_v1 = reflection(&self.extra_names).build_v1()?;
        let reflection_v1alpha = reflection(&self.extra_names).build_v1alpha()?;

        let metrics = match self.metrics {
            Some(metrics) => Some(metrics.with_known(served_methods(&self.extra_names)?)),
            None => None,
        };
        let greeter = GreeterServer::new(self.greeter)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);

        let incoming = with_preface_deadline(
            ReceiverStream::new(self.listener.incoming()),
            PREFACE_TIMEOUT,
        )
        .map(Ok::<_, std::io::Error>);
        let extra_names = self.extra_names.clone();
        let (draining, drain_started) = tokio::sync::oneshot::channel();
        let shutdown = async move {
            shutdown.await;
            // "" is the whole server's entry; checkers that name no service read it.
            health
                .set_service_status("", ServingStatus::NotServing)
                .await;
            health.set_not_serving::<GreeterServer<Greeter>>().await;
            for name in &extra_names {
                health
                    .set_service_status(name, ServingStatus::NotServing)
                    .await;
            }
            info!("gRPC server draining: no new calls, waiting for calls in flight");
            let _ = draining.send(());
        };
        // tonic waits for every connection to finish, and a stream that never
        // ends (a health Watch, a stuck client) would hold shutdown forever.
        let drain_timeout = self.drain_timeout;
        let drain_limit = async move {
            match drain_started.await {
                Ok(()) => tokio::time::sleep(drain_timeout).await,
                Err(_) => std::future::pending().await,
            }
        };

        info!(addr = %self.addr, mtls = self.mtls, "gRPC server listening (TLS)");
        let mut builder = Server::builder()
            .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
            .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
            .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
            .http2_max_header_list_size(MAX_HEADER_LIST_BYTES)
            .http2_max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESETS));
        if let Some(streams) = self.independent_streams {
            builder = builder
                .max_concurrent_streams(streams)
                .initial_stream_window_size(STREAM_WINDOW_BYTES)
                .initial_connection_window_size(streams * STREAM_WINDOW_BYTES);
        }
        // ANCHOR: load_shed
        if let Some(limit) = self.concurrency_limit {
            // Without load_shed, a call over the limit would wait in line for a
            // slot; with it, tonic answers RESOURCE_EXHAUSTED at once. A call
            // holds its slot until its response headers go out: a whole unary
            // call, but only the start of a stream.
            info!(
                limit,
                "per-connection concurrency limit on; excess calls are shed"
            );
            builder = builder
                .concurrency_limit_per_connection(limit)
                .load_shed(true);
        }
        // ANCHOR_END: load_shed
        // Set up and listening: whoever waits for this server may go on.
        if let Some(listening) = self.listening {
            let _ = listening.send(self.addr);
        }
        let serve = builder
            .layer(MetricsLayer(metrics))
            .layer(TraceLayer(self.trace))
            // Inside the two above, so they count and log the codes it answers.
            .layer(SpecCodesLayer)
            .layer(RefuseLayer)
            .add_routes(self.extra)
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(greeter)
            .serve_with_incoming_shutdown(incoming, shutdown);
        tokio::select! {
            result = serve => result?,
            _ = drain_limit => {
                warn!("drain timed out after {drain_timeout:?}; closing the remaining connections");
            }
        }
        info!("gRPC server stopped");
        Ok(())
    }
    // ANCHOR_END: serve
}

/// Every method this server serves, as a request path.
fn served_methods(
    extra_names: &[&'static str],
) -> anyhow::Result<std::collections::HashMap<String, &'static str>> {
    let mut names = vec![
        <GreeterServer<Greeter> as NamedService>::NAME,
        <HealthServer<HealthService> as NamedService>::NAME,
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    ];
    names.extend_from_slice(extra_names);
    known_methods(
        &[
            proto::FILE_DESCRIPTOR_SET,
            tonic_health::pb::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
        ],
        &names,
    )
}

/// Reflection describes every service in the descriptor sets it is given;
/// naming the ones served here keeps `ingest.v1.Ingest` (same .proto bundle,
/// different server) out of the list.
fn reflection(extra_names: &[&'static str]) -> tonic_reflection::server::Builder<'static> {
    let builder = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .with_service_name(<GreeterServer<Greeter> as NamedService>::NAME)
        .with_service_name(<HealthServer<HealthService> as NamedService>::NAME);
    extra_names
        .iter()
        .fold(builder, |r, name| r.with_service_name(*name))
}
