//! `fleet run`: four measurements with more than one server, under chapter
//! 11's open-loop load, every arm side by side in one run.
//!
//! Replicas run in this process, each on a runtime and thread of its own, on
//! 127.0.0.2, .3 and .4 (all of 127.0.0.0/8 is loopback on Linux). The parts,
//! one file each:
//!
//! - `restart.rs`: a rolling restart of three replicas, drained vs killed;
//! - `age.rs`: a replica added behind a layer-4 balancer, with and without
//!   a maximum connection age;
//! - `slow.rs`: one replica 20 ms slower, under round robin, tonic's
//!   balancer and p2c over peak-EWMA load;
//! - `tail.rs`: a replica with a latency tail, without and with hedging.
//!
//! `render.rs` turns the records into the report, tables and plots.

mod age;
mod render;
mod restart;
mod slow;
mod tail;

use std::{
    collections::HashMap,
    future::Future,
    net::{IpAddr, SocketAddr},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::bail;
use clap::ValueEnum;
use harness::{Experiment, Folder, Start, experiment::Flags};
use loadgen::{Counters, Outcome, Schedule, Timer, WhenFull};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tonic::Status;

use crate::{
    client::{Answer, Call},
    replica::{Replica, Spec},
};

pub use render::render;

/// The parts of the experiment, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    Restart,
    Age,
    Slow,
    Tail,
}

/// More than one server: a rolling restart drained vs killed, connection
/// age and a replica added later, balancing around a slow replica, and
/// hedging a latency tail, under open-loop load. Writes CSV, Markdown and
/// SVG to --out.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Which parts to run, comma-separated
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        default_value = "restart,age,slow,tail"
    )]
    pub parts: Vec<Part>,
    /// The replicas' addresses (loopback), comma-separated; three are used
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "127.0.0.2,127.0.0.3,127.0.0.4"
    )]
    pub hosts: Vec<IpAddr>,
    /// Calls per second of the open-loop load
    #[arg(long, default_value_t = 200.0)]
    pub rate: f64,
    /// How long each arm's load lasts [default: 12s, quick: 5s]
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// The start of each arm that is not counted (balancers and the hedge's
    /// histogram learn during it) [default: 2s, quick: 1s]
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true)]
    pub warmup: Option<Duration>,
    /// Repeats of every arm, interleaved (A B, then B A) [default: 2, quick: 1]
    #[arg(long)]
    pub repeats: Option<u32>,
    /// Every call's deadline
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "1s")]
    pub deadline: Duration,
    /// How long each call works on the server in the restart and age parts,
    /// so that calls are in flight when a replica goes away (the slow and
    /// tail parts ask for no work: their replicas' own latency is the point)
    #[arg(long, default_value_t = 50)]
    pub work_ms: u32,
    /// Restart: how long a draining replica says NOT_SERVING before GOAWAY
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "500ms")]
    pub grace: Duration,
    /// Restart: how long a stopped replica takes to start again
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "200ms")]
    pub restart_after: Duration,
    /// Age: each connection's maximum age in the arm that has one
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "2s")]
    pub max_age: Duration,
    /// Age: tonic's max_connection_age_grace, in the arm that has one
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "1s")]
    pub age_grace: Duration,
    /// Age: clients, each with one connection through the layer-4 balancer
    #[arg(long, default_value_t = 6)]
    pub clients: u32,
    /// Slow: what the slow replica adds to every call
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "20ms")]
    pub slower_by: Duration,
    /// Tail: hedge a call that has waited longer than this percentile of
    /// recent answers
    #[arg(long, default_value_t = 0.85)]
    pub hedge_percentile: f32,
    /// Seed of the tail's draws
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The development PKI the replicas use (made there if missing)
    #[arg(long, env = "CERTS_DIR", value_name = "DIR")]
    pub certs_dir: Option<PathBuf>,
    #[command(flatten)]
    pub flags: Flags,
    /// Folder for the results (an earlier run there is replaced)
    #[arg(long, default_value = "target/experiments/ch16")]
    pub out: PathBuf,
}

/// The most a replica may add to a call: its extra time joins the call's own
/// `delay_ms`, which the greeter caps at a minute.
pub const MAX_EXTRA: Duration = Duration::from_secs(10);

/// The checked configuration a run uses, stored with its results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub parts: Vec<Part>,
    pub hosts: Vec<IpAddr>,
    pub rate: f64,
    pub duration: Duration,
    pub warmup: Duration,
    pub repeats: u32,
    pub deadline: Duration,
    pub work_ms: u32,
    pub grace: Duration,
    pub restart_after: Duration,
    pub max_age: Duration,
    pub age_grace: Duration,
    pub clients: u32,
    pub slower_by: Duration,
    pub hedge_percentile: f32,
    pub seed: u64,
    pub certs_dir: PathBuf,
    pub out: PathBuf,
}

impl Experiment for Config {
    fn out(&self) -> &Path {
        &self.out
    }
}

impl Args {
    pub fn config(&self) -> anyhow::Result<Config> {
        let quick = self.flags.quick;
        let secs = |s: u64| Duration::from_secs(s);
        let config = Config {
            parts: self.parts.clone(),
            hosts: self.hosts.clone(),
            rate: self.rate,
            duration: self
                .duration
                .unwrap_or(if quick { secs(5) } else { secs(12) }),
            warmup: self.warmup.unwrap_or(if quick { secs(1) } else { secs(2) }),
            repeats: self.repeats.unwrap_or(if quick { 1 } else { 2 }),
            deadline: self.deadline,
            work_ms: self.work_ms,
            grace: self.grace,
            restart_after: self.restart_after,
            max_age: self.max_age,
            age_grace: self.age_grace,
            clients: self.clients,
            slower_by: self.slower_by,
            hedge_percentile: self.hedge_percentile,
            seed: self.seed,
            certs_dir: self.certs_dir.clone().unwrap_or_else(program::certs_dir),
            out: self.out.clone(),
        };
        let show = program::duration::Show;
        if config.parts.is_empty() {
            bail!("--parts needs at least one part");
        }
        if config.hosts.len() != 3 || config.hosts.iter().any(|h| !h.is_loopback()) {
            bail!(
                "--hosts takes exactly three loopback addresses, such as 127.0.0.2,127.0.0.3,127.0.0.4"
            );
        }
        if !(config.rate.is_finite() && config.rate >= 1.0 && config.rate <= 5000.0) {
            bail!("--rate must be between 1 and 5000 calls per second");
        }
        if config.repeats == 0 || config.clients == 0 {
            bail!("--repeats and --clients must be at least 1");
        }
        if config.warmup >= config.duration {
            bail!(
                "--warmup ({}) must be shorter than --duration ({}), or nothing is measured",
                show(config.warmup),
                show(config.duration)
            );
        }
        if config.duration < Duration::from_secs(3) {
            bail!("--duration must be at least 3s: the restart part stops three replicas in it");
        }
        if config.deadline.is_zero() || config.max_age.is_zero() || config.age_grace.is_zero() {
            bail!("--deadline, --max-age and --age-grace must be longer than 0ms");
        }
        if !(config.hedge_percentile > 0.0 && config.hedge_percentile < 1.0) {
            bail!("--hedge-percentile must be between 0 and 1 (0.85 is the 85th percentile)");
        }
        if config.work_ms > grpc_server::MAX_DELAY_MS {
            bail!("--work-ms must be at most {}", grpc_server::MAX_DELAY_MS);
        }
        if config.slower_by > MAX_EXTRA {
            bail!(
                "--slower-by must be at most {}",
                program::duration::Show(MAX_EXTRA)
            );
        }
        Ok(config)
    }
}

/// `fleet run`: the experiment, or with `--render DIR` only its report.
pub async fn main(args: Args) -> anyhow::Result<()> {
    // Every call's row (2 MB for a full run) is a raw record: the report is
    // drawn from the tables they reduce to.
    let steps = harness::experiment::Steps {
        run,
        reduce: render::reduce,
        render,
        raw: &[restart::CALLS, age::CALLS, slow::CALLS, tail::CALLS],
    };
    harness::experiment::main(&args.flags, || args.config(), Start::Fresh, steps).await
}

async fn run(config: &Config, folder: &Folder) -> anyhow::Result<()> {
    // The replicas make the PKI if it is missing; the clients need its CA.
    certs::Pki::new(&config.certs_dir).generate(false)?;
    for part in &config.parts {
        println!("== {part:?}");
        match part {
            Part::Restart => restart::run(config, folder).await?,
            Part::Age => age::run(config, folder).await?,
            Part::Slow => slow::run(config, folder).await?,
            Part::Tail => tail::run(config, folder).await?,
        }
    }
    Ok(())
}

impl Config {
    pub fn ca(&self) -> PathBuf {
        self.certs_dir.join("ca.pem")
    }

    /// The spec of replica `i` (named a, b, c) on a free port.
    pub fn spec(&self, i: usize) -> Spec {
        let name = ["a", "b", "c"][i];
        Spec::new(
            name,
            SocketAddr::new(self.hosts[i], 0),
            self.certs_dir.clone(),
        )
    }

    /// The arms' order in repeat `r`: as given, then reversed (A B, B A).
    pub fn order<T: Copy>(&self, arms: &[T], r: u32) -> Vec<T> {
        let mut arms = arms.to_vec();
        if r % 2 == 1 {
            arms.reverse();
        }
        arms
    }
}

pub async fn start_all(specs: Vec<Spec>) -> anyhow::Result<Vec<Replica>> {
    let mut replicas = Vec::new();
    for spec in specs {
        replicas.push(Replica::start(spec).await?);
    }
    Ok(replicas)
}

/// One call's story, and one row of a part's `calls.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRow {
    pub arm: String,
    pub repeat: u32,
    pub index: u64,
    /// When it was due, from the start of the arm's load.
    pub due_ms: f64,
    /// From due to answer (ok calls) or to failure.
    pub latency_ms: Option<f64>,
    pub outcome: Outcome,
    pub code: Option<String>,
    /// The replica that answered.
    pub replica: Option<String>,
    /// What the client was told, for a call that failed.
    pub message: Option<String>,
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

// ANCHOR: load
/// Chapter 11's open-loop generator at `config.rate` for `config.duration`:
/// every call is due at a fixed time, and its latency counts from then.
/// Each call asks the server for `work_ms` of work. `send` makes each
/// call's future when it is due; the rows say which replica answered.
pub async fn load<F, Fut>(
    config: &Config,
    (arm, repeat): (&str, u32),
    work_ms: u32,
    send: F,
) -> Vec<CallRow>
where
    F: Fn(u64, Call) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Answer, Status>> + Send + 'static,
{
    let slots = Schedule::constant(config.rate, config.duration).slots();
    // Each call's replica, or what its failure said.
    let answered: Arc<Mutex<HashMap<u64, Result<String, String>>>> = Arc::default();
    let counters = Arc::new(Counters::default());
    let progress = tokio::spawn(loadgen::cli::progress(counters.clone()));
    let send = Arc::new(send);
    let deadline = config.deadline;
    let records = loadgen::run_bounded(
        &slots,
        Timer::Precise,
        1024,
        WhenFull::Defer,
        config.deadline + Duration::from_secs(1),
        counters,
        |slot| {
            let (send, answered) = (send.clone(), answered.clone());
            async move {
                // Made when due: the deadline counts from the send.
                let call = Call {
                    name: "fleet".into(),
                    delay_ms: work_ms,
                    deadline: Instant::now() + deadline,
                };
                let result = send(slot.index, call).await;
                let code = result
                    .as_ref()
                    .err()
                    .map(|s| loadgen::cli::code_name(s.code()));
                let said = result
                    .map(|a| a.replica)
                    .map_err(|s| s.message().to_string());
                answered
                    .lock()
                    .expect("not poisoned")
                    .insert(slot.index, said);
                match code {
                    None => Ok(()),
                    Some(code) => Err(loadgen::SendError { code, fatal: false }),
                }
            }
        },
    )
    .await;
    progress.abort();
    let mut answered = std::mem::take(&mut *answered.lock().expect("not poisoned"));
    records
        .iter()
        .map(|r| {
            let said = answered.remove(&r.index);
            CallRow {
                arm: arm.into(),
                repeat,
                index: r.index,
                due_ms: ms(r.due),
                latency_ms: r.latency().map(ms),
                outcome: r.outcome,
                code: r.code.clone(),
                replica: said.clone().and_then(Result::ok),
                message: said.and_then(Result::err),
            }
        })
        .collect()
}
// ANCHOR_END: load

/// Something that happened to a replica during an arm (restart, age parts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    pub arm: String,
    pub repeat: u32,
    pub replica: String,
    pub event: String,
    /// From the start of the arm's load.
    pub at_ms: f64,
}
