//! `cargo run -p ingest -- serve`: the ingest server as its own process, so
//! its memory is its own and an experiment can start a fresh one for every
//! run. The command line ([`ServeArgs`]) becomes a checked [`ServeConfig`];
//! a reader's `serve` and an experiment's child run the same [`serve`].

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use certs::TlsArgs;
use harness::{
    RunMeta,
    child::Role,
    records::{write_csv, write_json},
};
use prometheus_client::registry::Registry;
use proto::ingest::v1::ingest_server::IngestServer;
use serde::{Deserialize, Serialize};

use crate::{
    plan::ServicePlan,
    record::{BUDGET, BudgetRow, MESSAGES, SERVER, ServerSummary, TIMELINE},
    service::{IngestService, Ingestor, Policy},
};

pub const DEFAULT_ADDR: &str = "127.0.0.1:50071";

/// Where pending messages wait.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyName {
    /// Take every message the stream offers into an unbounded channel
    Unbounded,
    /// Reserve a place (under --budget, in a channel of --capacity) before each receive
    Reserve,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on (port 0: any free port, printed at start)
    #[arg(long, default_value = DEFAULT_ADDR)]
    pub addr: SocketAddr,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[arg(long, value_enum, default_value = "reserve")]
    pub policy: PolicyName,
    /// Physical queue capacity K (reserve policy)
    #[arg(long, default_value_t = 32)]
    pub capacity: usize,
    /// Logical budget B on pending messages, at most K [default: K]
    #[arg(long)]
    pub budget: Option<usize>,
    /// Service time by phase, SERVICE@FROM,...; time 0 is the first call's arrival
    #[arg(long, default_value = "10ms@0s,40ms@12s,10ms@24s")]
    pub plan: ServicePlan,
    /// Workers serving the queue
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// How often the queue depth and memory are sampled
    #[arg(long, value_parser = program::duration::parse, default_value = "50ms")]
    pub sample_every: Duration,
    /// Folder for the server's records (messages, timeline, budget, server.json)
    #[arg(long, default_value = "target/experiments/ingest-server")]
    pub record: PathBuf,
    /// Stop after this many Ingest calls have ended (default: run until Ctrl-C)
    #[arg(long)]
    pub calls: Option<u64>,
    /// Once listening, write the address to this file (atomically: written
    /// elsewhere, then renamed), for a script that waits for it
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
    /// Serve Prometheus metrics (`GET /metrics`, plain HTTP) on this address:
    /// the gate's Q, Q + R, B and K, the waiting and the work, and the gRPC
    /// server's own; off by default
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
}

/// A server's settings, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeConfig {
    pub addr: SocketAddr,
    pub tls: TlsArgs,
    pub policy: Policy,
    pub plan: ServicePlan,
    pub workers: usize,
    pub sample_every: Duration,
    pub record: PathBuf,
    pub calls: Option<u64>,
    /// Where to serve `/metrics`, if anywhere.
    #[serde(default)]
    pub metrics_addr: Option<SocketAddr>,
}

impl ServeArgs {
    pub fn config(&self) -> anyhow::Result<ServeConfig> {
        let policy = match self.policy {
            PolicyName::Unbounded => Policy::Unbounded,
            PolicyName::Reserve => {
                let budget = self.budget.unwrap_or(self.capacity);
                anyhow::ensure!(self.capacity > 0, "--capacity must be at least 1");
                anyhow::ensure!(
                    (1..=self.capacity).contains(&budget),
                    "--budget {budget} must be between 1 and --capacity {}",
                    self.capacity
                );
                Policy::Reserve {
                    capacity: self.capacity,
                    budget,
                }
            }
        };
        Ok(ServeConfig {
            addr: self.addr,
            tls: self.tls.clone(),
            policy,
            plan: self.plan.clone(),
            workers: self.workers,
            sample_every: self.sample_every,
            record: self.record.clone(),
            calls: self.calls,
            metrics_addr: self.metrics_addr,
        })
    }
}

/// What a server started by an experiment says once it listens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listening {
    pub addr: SocketAddr,
}

/// The server as an experiment's child: `ingest serve-child`.
impl Role for ServeConfig {
    const COMMAND: &'static [&'static str] = &["serve-child"];
    type Ready = Listening;
    type Ask = ();
    type Answer = ();
}

/// `ingest serve`: prints where it listens and writes the ready file.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let config = args.config()?;
    let ready_file = args.ready_file.clone();
    serve(
        &config,
        |_| {},
        |addr| {
            println!(
                "ingest server listening on {addr}: {:?}, plan {}",
                config.policy, config.plan
            );
            if let Some(path) = &ready_file {
                program::ready_file::publish(path, &format!("{addr}\n"))?;
            }
            Ok(())
        },
    )
    .await?;
    println!("records written to {}", config.record.display());
    Ok(())
}

/// Calls one connection may carry at once. Each may hold a full stream window
/// (1 MiB) of unread messages, so a connection may hold 16 MiB.
pub const STREAMS_PER_CONNECTION: u32 = 16;

/// `ingest serve-child`: the same server, configured by its experiment.
pub async fn child() -> anyhow::Result<()> {
    let config: ServeConfig = harness::child::config()?;
    serve(
        &config,
        |_| {},
        |addr| harness::child::ready::<ServeConfig>(&Listening { addr }),
    )
    .await
}

/// Serves until Ctrl-C (or `calls` calls), then stops the workers and writes
/// the records. `on_start` sees the ingestor before the first call (a
/// controller can take its gate); `on_ready` is told the address once the
/// server listens.
pub async fn serve(
    config: &ServeConfig,
    on_start: impl FnOnce(&Arc<Ingestor>),
    on_ready: impl FnOnce(SocketAddr) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut server = grpc_server::BoundServer::bind(&grpc_server::Args {
        addr: config.addr,
        tls: config.tls.clone(),
        mtls: false,
        concurrency_limit: None,
    })
    .await?;
    let ingestor = Ingestor::start(
        config.policy,
        config.plan.clone(),
        config.workers,
        config.sample_every,
    );
    // The timeline grows on disk while the server runs: a live view reads it.
    ingestor
        .recorder()
        .grow_timeline(&config.record.join(TIMELINE))?;
    if let Some(addr) = config.metrics_addr {
        let mut registry = Registry::default();
        server = server.with_metrics(&mut registry);
        crate::metrics::register(&mut registry, ingestor.clone(), config.policy);
        grpc_server::metrics::serve(addr, registry).await?;
    }
    on_start(&ingestor);
    on_ready(server.local_addr())?;
    let mut calls_done = ingestor.calls_done.subscribe();
    let calls = config.calls;
    let stop = async move {
        tokio::select! {
            _ = program::shutdown_signal() => {}
            _ = calls_done.wait_for(|n| calls.is_some_and(|c| *n >= c)) => {}
        }
    };
    server
        .add_service(
            IngestServer::new(IngestService(ingestor.clone())).max_decoding_message_size(4 << 20),
        )
        // A handler that waits for the budget leaves its stream's bytes
        // unread; its neighbours on the connection must still get through.
        .with_independent_streams(STREAMS_PER_CONNECTION)
        .with_drain_timeout(Duration::from_secs(5))
        .serve(stop)
        .await?;
    ingestor.stop().await;
    write_records(&ingestor, config)
}

fn write_records(ingestor: &Ingestor, config: &ServeConfig) -> anyhow::Result<()> {
    let recorder = ingestor.recorder();
    // The record folder may be an experiment's arm folder that holds the
    // client's files too: the server writes into it and never empties it.
    let file = |name: &str| config.record.join(name);
    let messages = recorder.messages();
    let samples = recorder.samples();
    let changes = ingestor.gate().map(|g| g.changes()).unwrap_or_default();
    // The growing copy began a moment after the sampler did; the whole
    // timeline, written now, is the one the report reads.
    recorder.finish_timeline()?;
    write_csv(&file(MESSAGES), &messages)?;
    write_csv(&file(TIMELINE), &samples)?;
    write_csv(&file(BUDGET), &BudgetRow::of(&changes))?;
    write_json(
        &file(SERVER),
        &ServerSummary {
            meta: RunMeta::now(),
            policy: format!("{:?}", config.policy),
            plan: config.plan.to_string(),
            workers: config.workers,
            sample_every_ms: config.sample_every.as_secs_f64() * 1e3,
            epoch_ms: ingestor
                .epoch()
                .map(|e| recorder.since_start(e).as_secs_f64() * 1e3),
            processed: messages.len(),
            max_queued: samples.iter().map(|s| s.queued).max(),
            max_pending: samples.iter().map(|s| s.pending).max(),
            rss_kib_first: samples.first().map(|s| s.rss_kib),
            rss_kib_max: samples.iter().map(|s| s.rss_kib).max(),
            idle_with_backlog_ms: recorder.idle_with_backlog_total().as_secs_f64() * 1e3,
        },
    )
}
