//! `cargo run -p ingest -- compare`: chapter 11's experiment. The same
//! open-loop stream of messages against an unbounded server and against a
//! reserve-before-receive server, each a fresh process ([`run`]), then the
//! two side by side from the records they left ([`render`]).

pub mod render;
pub mod run;

use std::{path::PathBuf, time::Duration};

use harness::{
    Experiment, Start,
    experiment::{Flags, Steps},
    live::LiveArgs,
};
use serde::{Deserialize, Serialize};

use crate::{plan::ServicePlan, server::PolicyName};

/// The two arms, in the order they run.
pub const ARMS: [PolicyName; 2] = [PolicyName::Unbounded, PolicyName::Reserve];

/// Runs both servers against the same open-loop stream and compares them.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// Scheduled sends per second
    #[arg(long, default_value_t = 80.0)]
    pub rate: f64,
    /// How long the client sends [default: 24s, 12s with --quick]
    #[arg(long, value_parser = program::duration::parse)]
    pub duration: Option<Duration>,
    /// The worker's service time by phase
    /// [default: 10ms@0s,40ms@6s,10ms@18s; 10ms@0s,40ms@3s,10ms@9s with --quick]
    #[arg(long)]
    pub plan: Option<ServicePlan>,
    /// Queue capacity K of the reserve-before-receive server
    #[arg(long, default_value_t = 32)]
    pub capacity: usize,
    #[arg(long, default_value_t = 16 * 1024)]
    pub message_bytes: usize,
    #[command(flatten)]
    pub flags: Flags,
    #[command(flatten)]
    pub live: LiveArgs,
    /// Folder for every file of the run (an earlier run there is replaced)
    #[arg(long, default_value = "target/experiments/ch11")]
    pub out: PathBuf,
}

/// The experiment's settings, checked, as stored in `config.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub rate: f64,
    pub duration: Duration,
    pub plan: ServicePlan,
    pub capacity: usize,
    pub message_bytes: usize,
    pub quick: bool,
    pub out: PathBuf,
    pub certs_dir: PathBuf,
}

impl CompareArgs {
    pub fn config(&self) -> anyhow::Result<Config> {
        anyhow::ensure!(
            self.rate.is_finite() && self.rate > 0.0,
            "--rate must be above 0"
        );
        anyhow::ensure!(self.capacity > 0, "--capacity must be at least 1");
        let quick = self.flags.quick;
        let default_plan = if quick {
            "10ms@0s,40ms@3s,10ms@9s"
        } else {
            "10ms@0s,40ms@6s,10ms@18s"
        };
        Ok(Config {
            rate: self.rate,
            duration: self
                .duration
                .unwrap_or(Duration::from_secs(if quick { 12 } else { 24 })),
            plan: match &self.plan {
                Some(plan) => plan.clone(),
                None => default_plan.parse().map_err(anyhow::Error::msg)?,
            },
            capacity: self.capacity,
            message_bytes: self.message_bytes,
            quick,
            out: self.out.clone(),
            certs_dir: program::certs_dir(),
        })
    }
}

impl Experiment for Config {
    fn out(&self) -> &std::path::Path {
        &self.out
    }
}

pub async fn compare(args: CompareArgs) -> anyhow::Result<()> {
    let live = harness::live::start(&args.live, crate::live::view).await?;
    let steps = Steps {
        run: async |config: &Config, folder: &harness::Folder| {
            run::run(config, folder, live.as_ref()).await
        },
        // The arms' records are the tables: about 600 kB for a full run.
        reduce: harness::experiment::nothing_to_reduce,
        render: render::render,
        raw: &[],
    };
    harness::experiment::main(&args.flags, || args.config(), Start::Fresh, steps).await?;
    harness::live::finish(live).await;
    Ok(())
}
