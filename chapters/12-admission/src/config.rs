//! The command line, and the checked configuration it becomes. `--quick`
//! changes only defaults: one block at a quarter of Part 2's time scale.

use std::path::{Path, PathBuf};

use harness::{Experiment, experiment::Flags, live::LiveArgs};
use ingest::plan::ServicePlan;
use serde::{Deserialize, Serialize};

use crate::{PolicyKind, contract::PLAN};

#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Paired blocks (each runs every policy once) [default: 5; 1 with --quick]
    #[arg(long)]
    pub blocks: Option<usize>,
    /// Time scale: every time (schedule, phases, service times, ticks,
    /// thresholds, windows) times this, the send rate divided by it; below 1
    /// service times are waited out precisely [default: 1; 0.25 with --quick]
    #[arg(long)]
    pub scale: Option<f64>,
    /// Policies to compare, comma-separated
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fixed-32,fixed-8,fixed-4,fixed-2,adaptive,target"
    )]
    pub policies: Vec<PolicyKind>,
    /// Seed of the run order within blocks (and of the bootstrap)
    #[arg(long, default_value_t = 12)]
    pub seed: u64,
    /// Concurrent Ingest calls on the connection, sharing the send rate
    /// (Part 2 used 1)
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
    /// Workers serving the queue (Part 2 used 1)
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Draw each service time from an exponential distribution with the
    /// phase's mean (seeded, the same draws for every policy)
    #[arg(long)]
    pub exponential: bool,
    /// Delay target of the `target` policy, ms at scale 1
    #[arg(long, default_value_t = 100.0)]
    pub target_ms: f64,
    /// Payload bytes per message (Part 2: 16,384)
    #[arg(long, default_value_t = 16 * 1024)]
    pub message_bytes: usize,
    /// Bootstrap resamples
    #[arg(long, default_value_t = 2000)]
    pub resamples: usize,
    /// Folder for every file of the experiment (emptied first if it holds an
    /// earlier experiment)
    #[arg(long, default_value = "target/experiments/ch12")]
    pub out: PathBuf,
    /// Continue an interrupted experiment in --out: keep its contract (which
    /// these flags must match), its ledger and its valid runs, and run the rest
    #[arg(long)]
    pub resume: bool,
    #[command(flatten)]
    pub flags: Flags,
    #[command(flatten)]
    pub live: LiveArgs,
    /// Serve each run's server metrics (`GET /metrics`: Q, Q + R, B, K and
    /// the gRPC families) on this address while it runs; off by default
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Folder of the development PKI (created if missing)
    #[arg(long, env = "CERTS_DIR", default_value_os_t = program::certs_dir())]
    pub certs_dir: PathBuf,
}

/// The experiment's settings, checked: what `config.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub blocks: usize,
    pub scale: f64,
    pub policies: Vec<PolicyKind>,
    pub seed: u64,
    pub streams: usize,
    pub workers: usize,
    pub exponential: bool,
    pub target_ms: f64,
    pub message_bytes: usize,
    pub resamples: usize,
    pub quick: bool,
    pub out: PathBuf,
    pub certs_dir: PathBuf,
}

impl RunArgs {
    pub fn config(&self) -> anyhow::Result<Config> {
        let quick = self.flags.quick;
        let config = Config {
            blocks: self.blocks.unwrap_or(if quick { 1 } else { 5 }),
            scale: self.scale.unwrap_or(if quick { 0.25 } else { 1.0 }),
            policies: self.policies.clone(),
            seed: self.seed,
            streams: self.streams,
            workers: self.workers,
            exponential: self.exponential,
            target_ms: self.target_ms,
            message_bytes: self.message_bytes,
            resamples: self.resamples,
            quick,
            out: self.out.clone(),
            certs_dir: self.certs_dir.clone(),
        };
        config.check()?;
        Ok(config)
    }
}

impl Config {
    fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.blocks >= 1, "--blocks must be at least 1");
        let s = self.scale;
        anyhow::ensure!(
            s.is_finite() && s > 0.0 && s <= 4.0,
            "--scale must be in (0, 4], not {s}"
        );
        anyhow::ensure!(self.streams >= 1, "--streams must be at least 1");
        anyhow::ensure!(self.workers >= 1, "--workers must be at least 1");
        anyhow::ensure!(
            self.message_bytes >= 1,
            "--message-bytes must be at least 1"
        );
        anyhow::ensure!(self.target_ms > 0.0, "--target-ms must be above 0");
        anyhow::ensure!(
            !self.policies.is_empty(),
            "--policies needs at least one policy"
        );
        let mut p = self.policies.clone();
        p.sort();
        p.dedup();
        anyhow::ensure!(
            p.len() == self.policies.len(),
            "--policies names a policy twice"
        );
        Ok(())
    }

    /// Part 2's plan, times scaled. Below scale 1 the service times are a
    /// few milliseconds, which tokio's millisecond timer would stretch by up
    /// to 40%, so a scaled plan is waited out precisely.
    pub fn plan(&self) -> ServicePlan {
        let mut plan = PLAN
            .parse::<ServicePlan>()
            .expect("the seed's plan is valid")
            .scaled(self.scale);
        if self.scale < 1.0 {
            plan = plan.with_precise_wait();
        }
        if self.exponential {
            plan.with_exponential(1)
        } else {
            plan
        }
    }
}

impl Experiment for Config {
    const RESUME: Option<&'static str> = Some("--resume");
    fn out(&self) -> &Path {
        &self.out
    }
}
