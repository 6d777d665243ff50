//! Chapter 9: the whole stack in one process.
//!
//! `cargo run` (or `cargo run -p stack`) creates the development PKI if it is
//! missing, starts the gRPC and REST greeters, prints how to call them, and on
//! Ctrl-C or SIGTERM drains both before exiting (a second one stops at once).
//! Each server is exactly the one from its own chapter; this crate only wires
//! them together. The gRPC port also serves chapter 8's `streaming.v1.Streamer`,
//! beside the Greeter.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::Context;
use certs::{ListenError, Pki, TlsArgs, pki::Outcome};
use clap::Parser;
use grpc_server::CallStats;
use program::{Exit, StopSignal, StopSignals};
use prometheus_client::registry::Registry;
use streaming::StreamStats;
use tokio::{
    sync::{oneshot, watch},
    task::JoinHandle,
};
use tracing::{error, info};

/// Starts the gRPC and REST greeters together, over TLS.
///
/// Creates the development PKI first if it is missing. Stop with Ctrl-C (or
/// SIGTERM); both servers finish the calls in flight before exiting.
#[derive(Parser, Clone, Debug)]
#[command(name = "stack", version)]
pub struct Args {
    /// Address for the gRPC server
    #[arg(long, env = "GRPC_ADDR", default_value = grpc_server::server::DEFAULT_ADDR)]
    pub grpc_addr: SocketAddr,
    /// Address for the REST server
    #[arg(long, env = "REST_ADDR", default_value = rest_server::server::DEFAULT_ADDR)]
    pub rest_addr: SocketAddr,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Require client certificates signed by the CA on both servers (mutual TLS)
    #[arg(long, env = "MTLS")]
    pub mtls: bool,
    /// Once both servers listen, write their addresses (gRPC, then REST, one
    /// per line) to this file, atomically, for a script or harness that waits
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
    /// Serve both servers' Prometheus metrics (`GET /metrics`, plain HTTP) on
    /// this address; off by default
    #[arg(long, env = "METRICS_ADDR", value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
}

/// `cargo run`'s entry point: parses the command line, serves until Ctrl-C or
/// SIGTERM, and returns once both servers have drained, or at once on a second
/// Ctrl-C or SIGTERM (with an [`Exit`](program::Exit) of that signal's status).
pub fn main() -> anyhow::Result<()> {
    program::init_tracing();
    let args = program::args::<Args>();
    let runtime = tokio::runtime::Runtime::new().context("cannot start the Tokio runtime")?;
    runtime.block_on(async {
        let mut stack = Stack::start(&args).await?;
        print_banner(&stack, &args);
        let listening = std::mem::take(&mut stack.listening);
        let signals = program::stop_signals();
        tokio::try_join!(
            stack.run_until(signals),
            program::ready_file::publish_when_listening(args.ready_file.as_deref(), listening),
        )?;
        Ok(())
    })
}

/// Both servers, bound and serving.
pub struct Stack {
    pub grpc_addr: SocketAddr,
    pub rest_addr: SocketAddr,
    /// Where `/metrics` is served, when it is.
    pub metrics_addr: Option<SocketAddr>,
    pub grpc_stats: Arc<CallStats>,
    pub rest_stats: Arc<CallStats>,
    /// Chapter 8's streams: open now, ended early, live producer tasks.
    pub stream_stats: Arc<StreamStats>,
    stop: watch::Sender<bool>,
    grpc: JoinHandle<anyhow::Result<()>>,
    rest: JoinHandle<anyhow::Result<()>>,
    /// Each server sends its address here once it listens (for `--ready-file`).
    listening: Vec<oneshot::Receiver<SocketAddr>>,
}

impl Stack {
    // ANCHOR: start
    /// Makes sure the certificates exist, binds both ports, starts serving.
    /// Every setup error (bad certificate, busy port) surfaces here, before
    /// anything is served.
    pub async fn start(args: &Args) -> anyhow::Result<Stack> {
        ensure_pki(&args.tls)?;
        let grpc = grpc_server::BoundServer::bind(&grpc_server::Args {
            addr: args.grpc_addr,
            tls: args.tls.clone(),
            mtls: args.mtls,
            concurrency_limit: None,
        })
        .await
        .map_err(|e| ListenError::name_setting(e, "--grpc-addr or GRPC_ADDR"))
        .context("gRPC server")?;
        let streamer = streaming::Streamer::new();
        let stream_stats = streamer.stats();
        let grpc = grpc.add_service(streamer.into_server());
        let rest = rest_server::BoundServer::bind(&rest_server::Args {
            addr: args.rest_addr,
            tls: args.tls.clone(),
            mtls: args.mtls,
        })
        .await
        .map_err(|e| ListenError::name_setting(e, "--rest-addr or REST_ADDR"))
        .context("REST server")?;

        // One registry, one /metrics, for both servers.
        let (grpc, rest, metrics_addr) = match args.metrics_addr {
            Some(addr) => {
                let mut registry = Registry::default();
                let grpc = grpc.with_metrics(&mut registry);
                let rest = rest.with_metrics(&mut registry);
                let addr = grpc_server::metrics::serve(addr, registry).await?;
                (grpc, rest, Some(addr))
            }
            None => (grpc, rest, None),
        };

        let (grpc_listening, grpc_ready) = oneshot::channel();
        let (rest_listening, rest_ready) = oneshot::channel();
        let grpc = grpc.notify_when_listening(grpc_listening);
        let rest = rest.notify_when_listening(rest_listening);

        let (stop, stopped) = watch::channel(false);
        let when_stopped = move || {
            let mut stopped = stopped.clone();
            async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            }
        };
        Ok(Stack {
            grpc_addr: grpc.local_addr(),
            rest_addr: rest.local_addr(),
            metrics_addr,
            grpc_stats: grpc.stats(),
            rest_stats: rest.stats(),
            stream_stats,
            grpc: tokio::spawn(grpc.serve(when_stopped())),
            rest: tokio::spawn(rest.serve(when_stopped())),
            stop,
            listening: vec![grpc_ready, rest_ready],
        })
    }
    // ANCHOR_END: start

    // ANCHOR: run_until
    /// Serves until the first of `signals` or until either server fails, then
    /// drains both. A second signal during the drain stops at once: the calls
    /// still in flight are counted and cut off, and the error returned makes
    /// the program exit with that signal's status (130 for Ctrl-C).
    pub async fn run_until(mut self, mut signals: StopSignals) -> anyhow::Result<()> {
        // A server that stops on its own (it should not) takes the stack down,
        // rather than leaving half a stack that looks alive.
        let early = tokio::select! {
            _ = next_signal(&mut signals) => None,
            r = &mut self.grpc => Some(("gRPC", r)),
            r = &mut self.rest => Some(("REST", r)),
        };
        info!("shutting down: draining both servers");
        let _ = self.stop.send(true);
        let failed = early.as_ref().map(|(name, _)| *name);
        let drained = async {
            match early {
                None => ((&mut self.grpc).await, (&mut self.rest).await),
                Some(("gRPC", r)) => (r, (&mut self.rest).await),
                Some((_, r)) => ((&mut self.grpc).await, r),
            }
        };
        let (grpc, rest) = tokio::select! {
            results = drained => results,
            signal = next_signal(&mut signals) => return Err(self.cut_off(signal).into()),
        };
        info!(
            grpc_completed = self.grpc_stats.completed(),
            grpc_ended_early = self.grpc_stats.ended_early(),
            rest_completed = self.rest_stats.completed(),
            rest_ended_early = self.rest_stats.ended_early(),
            streams_completed = self.stream_stats.calls.completed(),
            streams_ended_early = self.stream_stats.calls.ended_early(),
            "stopped"
        );
        for (name, result) in [("gRPC", grpc), ("REST", rest)] {
            match result {
                Ok(Ok(())) => {}
                Ok(Err(e)) => error!("{name} server failed: {e:#}"),
                Err(e) => error!("{name} server task failed: {e}"),
            }
        }
        match failed {
            Some(name) => anyhow::bail!("the {name} server stopped unexpectedly"),
            None => Ok(()),
        }
    }

    /// Stops without waiting for the drain: both servers' tasks end here, and
    /// the program ends as soon as this error reaches `main`, its connections
    /// with it. Each call cut off fails at its client (a reset, a closed
    /// connection); the report says how many there were.
    fn cut_off(&self, signal: StopSignal) -> Exit {
        let grpc = self.grpc_stats.in_flight();
        let rest = self.rest_stats.in_flight();
        let streams = self.stream_stats.calls.in_flight();
        self.grpc.abort();
        self.rest.abort();
        let calls = match grpc + rest + streams {
            1 => "1 call still in flight was".to_string(),
            n => format!("{n} calls still in flight were"),
        };
        Exit::report(
            signal.exit_status(),
            format!(
                "second {signal} while draining: stopped at once; {calls} cut off \
                 (gRPC {grpc}, REST {rest}, streams {streams})"
            ),
        )
    }
    // ANCHOR_END: run_until
}

/// The next Ctrl-C or SIGTERM; never, if no more can come.
async fn next_signal(signals: &mut StopSignals) -> StopSignal {
    match signals.recv().await {
        Some(signal) => signal,
        None => std::future::pending().await,
    }
}

/// Creates the PKI when the stack uses the default file names and none exist.
/// Explicit `--tls-cert`/`--tls-key` paths are the operator's business: if they
/// are missing, the servers' own error says so.
fn ensure_pki(tls: &TlsArgs) -> anyhow::Result<()> {
    if tls.tls_cert.is_some() || tls.tls_key.is_some() || tls.client_ca.is_some() {
        return Ok(());
    }
    let pki = Pki::new(&tls.certs_dir);
    if pki.generate(false)? == Outcome::Created {
        info!(dir = %pki.dir.display(), "created the development PKI");
    }
    Ok(())
}

fn print_banner(stack: &Stack, args: &Args) {
    let ca = display_path(&args.tls.client_ca_path());
    let (grpc, rest) = (host_port(stack.grpc_addr), host_port(stack.rest_addr));
    let client_cert = if args.mtls {
        let pki = Pki::new(&args.tls.certs_dir);
        format!(
            " --cert {} --key {}",
            display_path(&pki.client_cert()),
            display_path(&pki.client_key())
        )
    } else {
        String::new()
    };
    println!(
        "\
gRPC  https://{grpc}  greeter.v1.Greeter, streaming.v1.Streamer, grpc.health.v1.Health, reflection
REST  https://{rest}  POST /v1/greetings, GET /healthz
TLS   trust {ca}{mtls}{metrics}

Call them:
  curl --cacert {ca}{client_cert} -H 'content-type: application/json' \\
       -d '{{\"name\":\"Ada\",\"delay_ms\":800}}' https://{rest}/v1/greetings
  cargo run -p grpc-client -- --target https://{grpc} --ca {ca}{client_cert} hello --name Ada

Ctrl-C stops both servers after the calls in flight finish.",
        metrics = match stack.metrics_addr {
            Some(addr) => format!("\nMETRICS http://{addr}/metrics  grpc_server_*, http_request*"),
            None => String::new(),
        },
        mtls = if args.mtls {
            "  (mTLS: clients must present a certificate)"
        } else {
            ""
        },
    );
}

/// `localhost:port` for loopback addresses: the server certificate names
/// `localhost`, and that is the name a reader should type.
fn host_port(addr: SocketAddr) -> String {
    if addr.ip().is_loopback() {
        format!("localhost:{}", addr.port())
    } else {
        addr.to_string()
    }
}

/// A path relative to the current directory when it is inside it, so printed
/// commands can be pasted as they are.
fn display_path(path: &Path) -> String {
    let absolute = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let relative = std::env::current_dir()
        .ok()
        .and_then(|cwd| absolute.strip_prefix(cwd).ok().map(PathBuf::from));
    relative.unwrap_or(absolute).display().to_string()
}
