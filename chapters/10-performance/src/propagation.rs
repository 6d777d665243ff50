//! Deadline propagation: a frontend that serves `greeter.v1.Greeter` itself and
//! answers by calling the real greeter (the backend), passing on what is left of
//! its own caller's deadline minus a safety margin.
//!
//! Why a margin: the frontend still has to receive the backend's answer and send
//! its own, and the backend's clock starts a little later than ours. Giving the
//! backend the whole remainder would let it answer just as our caller stops
//! listening; giving it the remainder minus a margin means the backend gives up
//! first and the frontend still has time to say so.
//!
//! Why fail fast: if what is left is no more than the margin, the backend cannot
//! possibly answer in time, so calling it would only add load.

use std::{future::Future, sync::Arc, time::Duration};

use certs::TlsListener;
use proto::greeter::v1::{
    HelloReply, HelloRequest,
    greeter_client::GreeterClient,
    greeter_server::{Greeter, GreeterServer},
};
use tokio::time::Instant;
use tokio_stream::{StreamExt, wrappers::ReceiverStream};
use tonic::{Code, Request, Response, Status, transport::Channel};
use tracing::info;

use grpc_server::{
    lifetime::{CallStats, grpc_timeout},
    spec_codes::SpecCodesLayer,
    trace::{TraceContext, TraceLayer},
};

/// The frontend's default safety margin, in milliseconds.
pub const DEFAULT_MARGIN_MS: u64 = 50;

// ANCHOR: budget
/// The deadline to give the backend, from the time our caller left us
/// (`remaining`, read from its `grpc-timeout`) and the margin we keep for
/// ourselves. No caller deadline means none to pass on; a remainder no larger
/// than the margin means the call cannot succeed, so it fails at once.
pub fn backend_budget(
    remaining: Option<Duration>,
    margin: Duration,
) -> Result<Option<Duration>, Status> {
    match remaining {
        None => Ok(None),
        Some(left) if left <= margin => Err(Status::deadline_exceeded(format!(
            "only {} ms of the caller's deadline left, not more than the {} ms margin; \
             the backend was not called",
            left.as_millis(),
            margin.as_millis()
        ))),
        Some(left) => Ok(Some(left - margin)),
    }
}
// ANCHOR_END: budget

/// The frontend service: greeter.v1.Greeter, answered by the backend.
#[derive(Clone)]
pub struct Frontend {
    backend: GreeterClient<Channel>,
    margin: Duration,
    /// The frontend's own counters; its guard logs when a call ends early.
    pub stats: Arc<CallStats>,
}

impl Frontend {
    pub fn new(backend: Channel, margin: Duration) -> Frontend {
        Frontend {
            backend: GreeterClient::new(backend),
            margin,
            stats: Arc::default(),
        }
    }
}

// ANCHOR: say_hello
#[tonic::async_trait]
impl Greeter for Frontend {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let remaining = grpc_timeout(request.metadata());
        let budget = backend_budget(remaining, self.margin).inspect_err(|status| {
            info!(
                call = "frontend SayHello",
                "failing fast: {}",
                status.message()
            );
        })?;

        // Held across the backend call: if our caller cancels (or its deadline
        // passes before the backend's shorter one), tonic drops this future and
        // the backend call with it, which sends the backend an RST_STREAM; the
        // guard logs it. Normally the backend's deadline runs out first, and
        // the backend's DEADLINE_EXCEEDED comes back to be passed on.
        let call = self.stats.start("frontend SayHello", remaining);
        // With --trace, the backend's span continues this call's trace.
        let trace = request.extensions().get::<TraceContext>().copied();
        let mut outgoing = Request::new(request.into_inner());
        if let Some(budget) = budget {
            outgoing.set_timeout(budget);
        }
        if let Some(trace) = trace {
            trace.inject(outgoing.metadata_mut());
        }
        info!(
            call = "frontend SayHello",
            caller_deadline_ms = remaining.map(|d| d.as_millis() as u64),
            backend_deadline_ms = budget.map(|d| d.as_millis() as u64),
            "calling the backend"
        );
        let started = Instant::now();
        let reply = self.backend.clone().say_hello(outgoing).await;
        // Either way this call is answered now, so it did not end early.
        call.finish();
        reply.map_err(|status| {
            let status = backend_status(status, budget, started.elapsed());
            info!(
                call = "frontend SayHello",
                code = ?status.code(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "the backend call failed; passing its status on"
            );
            status
        })
    }
}
// ANCHOR_END: say_hello

/// The tonic client's own timer for the backend call reports itself as
/// CANCELLED "Timeout expired" (the backend, when its answer comes first,
/// says DEADLINE_EXCEEDED); once the budget we gave the backend has passed,
/// that CANCELLED is DEADLINE_EXCEEDED too (the same rule as
/// `grpc_client::Failure::from_status`).
fn backend_status(status: Status, budget: Option<Duration>, elapsed: Duration) -> Status {
    match budget {
        Some(budget) if status.code() == Code::Cancelled && elapsed >= budget => {
            Status::deadline_exceeded(format!(
                "the backend did not answer within the {} ms passed on to it",
                budget.as_millis()
            ))
        }
        _ => status,
    }
}

/// Serves one Greeter implementation (the frontend, or a test's backend) on a
/// TLS listener until `shutdown` resolves; with `trace`, a span per call.
pub async fn serve<G: Greeter>(
    listener: TlsListener,
    greeter: G,
    trace: bool,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let incoming = ReceiverStream::new(listener.incoming()).map(Ok::<_, std::io::Error>);
    tonic::transport::Server::builder()
        .layer(TraceLayer(trace))
        // An expired deadline is DEADLINE_EXCEEDED, as chapter 4's server says it.
        .layer(SpecCodesLayer)
        .add_service(GreeterServer::new(greeter))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await?;
    Ok(())
}

/// The default address of the frontend.
pub const DEFAULT_ADDR: &str = "127.0.0.1:50061";

/// A frontend greeter that calls the real greeter, passing on its caller's
/// remaining deadline minus a margin.
#[derive(clap::Parser, Clone, Debug)]
#[command(name = "frontend", version)]
pub struct Args {
    /// Address to listen on
    #[arg(long, env = "FRONTEND_ADDR", default_value = DEFAULT_ADDR)]
    pub addr: std::net::SocketAddr,
    /// The greeter to call
    #[arg(
        long,
        env = "FRONTEND_BACKEND",
        default_value = "https://localhost:50051"
    )]
    pub backend: String,
    /// Time kept back from the caller's remaining deadline, in milliseconds
    #[arg(long, default_value_t = DEFAULT_MARGIN_MS)]
    pub margin_ms: u64,
    /// CA certificate to trust for the backend's certificate [default: certs/ca.pem]
    #[arg(long, env = "GRPC_CA", value_name = "PATH")]
    pub ca: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub tls: certs::TlsArgs,
    /// Once listening, write the address to this file (atomically), for a
    /// script or harness that waits for it
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<std::path::PathBuf>,
    /// Open a span per call, continuing the caller's trace (`traceparent`)
    /// and passing it on to the backend; off by default
    #[arg(long)]
    pub trace: bool,
}

/// Runs the frontend until `shutdown` resolves.
pub async fn run(args: &Args, shutdown: impl Future<Output = ()> + Send) -> anyhow::Result<()> {
    let target = grpc_client::Target {
        url: args.backend.clone(),
        ca: args.ca.clone().unwrap_or_else(program::default_ca),
        identity: None,
    };
    // One channel to the backend for all calls, connected on first use.
    let backend = grpc_client::endpoint(&target)?.connect_lazy();
    let tls = certs::server_config(&args.tls, false, &[b"h2"])?;
    let listener = TlsListener::bind(args.addr, tls).await?;
    info!(
        addr = %listener.local_addr()?,
        backend = %args.backend,
        margin_ms = args.margin_ms,
        "frontend server listening (TLS)"
    );
    if let Some(path) = &args.ready_file {
        program::ready_file::publish(path, &format!("{}\n", listener.local_addr()?))?;
    }
    let frontend = Frontend::new(backend, Duration::from_millis(args.margin_ms));
    serve(listener, frontend, args.trace, shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_on_the_remainder_minus_the_margin() {
        let margin = Duration::from_millis(50);
        assert_eq!(
            backend_budget(Some(Duration::from_millis(500)), margin).unwrap(),
            Some(Duration::from_millis(450))
        );
        assert_eq!(backend_budget(None, margin).unwrap(), None);
    }

    #[test]
    fn fails_fast_when_only_the_margin_is_left() {
        for left in [0, 10, 50] {
            let err = backend_budget(Some(Duration::from_millis(left)), Duration::from_millis(50))
                .unwrap_err();
            assert_eq!(err.code(), Code::DeadlineExceeded);
        }
    }
}
