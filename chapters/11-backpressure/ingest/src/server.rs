//! `cargo run -p ingest -- serve`: the ingest server as its own process, so its
//! memory is its own and an experiment can start a fresh one for every run.

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use certs::TlsArgs;
use loadgen::{
    meta::RunMeta,
    report::{write, write_json},
};
use proto::ingest::v1::ingest_server::IngestServer;
use serde_json::json;

use crate::{
    plan::ServicePlan,
    record::{RunFiles, budget_csv, messages_csv, timeline_csv},
    service::{IngestService, Ingestor, Policy},
};

pub const DEFAULT_ADDR: &str = "127.0.0.1:50071";

/// Where pending messages wait.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
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
    /// elsewhere, then renamed), for a harness that waits for it
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
}

impl ServeArgs {
    pub fn policy(&self) -> anyhow::Result<Policy> {
        Ok(match self.policy {
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
        })
    }
}

/// Serves until Ctrl-C (or `--calls` calls), then stops the workers and
/// writes the records. `on_start` sees the ingestor before the first call (a
/// controller can take its gate).
pub async fn serve(args: ServeArgs, on_start: impl FnOnce(&Arc<Ingestor>)) -> anyhow::Result<()> {
    let policy = args.policy()?;
    let server = grpc_server::BoundServer::bind(&grpc_server::Args {
        addr: args.addr,
        tls: args.tls.clone(),
        mtls: false,
        concurrency_limit: None,
    })
    .await?;
    let ingestor = Ingestor::start(policy, args.plan.clone(), args.workers, args.sample_every);
    on_start(&ingestor);
    let addr = server.local_addr();
    println!(
        "ingest server listening on {addr}: {policy:?}, plan {}",
        args.plan
    );
    if let Some(path) = &args.ready_file {
        let partial = path.with_extension("partial");
        write(&partial, addr.to_string().as_bytes())?;
        std::fs::rename(&partial, path)?;
    }
    let mut calls_done = ingestor.calls_done.subscribe();
    let calls = args.calls;
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
        .with_drain_timeout(Duration::from_secs(5))
        .serve(stop)
        .await?;
    ingestor.stop().await;
    let files = write_records(&ingestor, &args)?;
    println!(
        "records written to {}",
        files.run.parent().unwrap_or(&args.record).display()
    );
    Ok(())
}

fn write_records(ingestor: &Ingestor, args: &ServeArgs) -> anyhow::Result<RunFiles> {
    let recorder = ingestor.recorder();
    let files = RunFiles::in_dir(&args.record);
    let messages = recorder.messages();
    let samples = recorder.samples();
    let changes = ingestor.gate().map(|g| g.changes()).unwrap_or_default();
    write(&files.messages, messages_csv(&messages).as_bytes())?;
    write(&files.timeline, timeline_csv(&samples).as_bytes())?;
    write(&files.budget, budget_csv(&changes).as_bytes())?;
    let epoch_ms = ingestor
        .epoch()
        .map(|e| recorder.since_start(e).as_secs_f64() * 1e3);
    write_json(
        &files.run,
        &json!({
            "meta": RunMeta::now(),
            "policy": format!("{:?}", args.policy()?),
            "plan": args.plan.to_string(),
            "workers": args.workers,
            "sample_every_ms": args.sample_every.as_secs_f64() * 1e3,
            "epoch_ms": epoch_ms,
            "processed": messages.len(),
            "max_queued": samples.iter().map(|s| s.queued).max(),
            "max_pending": samples.iter().map(|s| s.pending).max(),
            "rss_kib_first": samples.first().map(|s| s.rss_kib),
            "rss_kib_max": samples.iter().map(|s| s.rss_kib).max(),
            "idle_with_backlog_ms": recorder.idle_with_backlog_total().as_secs_f64() * 1e3,
        }),
    )?;
    Ok(files)
}
