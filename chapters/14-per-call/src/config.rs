//! The command line, and the checked configuration a run uses. `--quick`
//! changes only defaults.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::bail;
use clap::Parser;
use harness::{Experiment, experiment::Flags};
use loadgen::WhenFull;
use serde::{Deserialize, Serialize};

use crate::{
    arm::Arm,
    ramp::{Ramp, Shape},
};

/// The per-call price: a tiny echo served as unary calls and as messages on
/// persistent bidirectional streams, by a server pinned to one core, under an
/// open-loop ramp of offered load, for each runtime arm. Writes CSV, JSON,
/// Markdown and SVG to --out.
#[derive(Parser, Debug, Clone)]
#[command(name = "per_call", version)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Server arms, FLAVOUR-HANDLER: `ct` (current-thread runtime) or `mtN`
    /// (multi-thread, N workers), `inline` or `spawn` (a task per call or message)
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ct-inline,ct-spawn,mt2-inline,mt2-spawn"
    )]
    pub arms: Vec<Arm>,
    /// Ramps per arm and shape; arms are interleaved within each repeat (A B A B)
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Unary calls per second, FROM:TO:STEPS (geometric)
    #[arg(long, default_value = "8000:128000:9")]
    pub unary_ramp: Ramp,
    /// Streamed messages per second, FROM:TO:STEPS (geometric)
    #[arg(long, default_value = "32000:724000:10")]
    pub stream_ramp: Ramp,
    /// REST requests per second over HTTP/1.1, FROM:TO:STEPS (geometric)
    #[arg(long, default_value = "4000:64000:9")]
    pub rest_h1_ramp: Ramp,
    /// REST requests per second over HTTP/2 (h2c), FROM:TO:STEPS (geometric)
    #[arg(long, default_value = "4000:128000:11")]
    pub rest_h2_ramp: Ramp,
    /// The shapes to ramp, in this order within each arm
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "unary,stream,rest-h1,rest-h2"
    )]
    pub shapes: Vec<Shape>,
    /// HTTP/1.1 connections the REST client's pool may use at once (1 to 10000)
    #[arg(long, default_value_t = 100)]
    pub h1_connections: usize,
    /// How long each step offers its rate
    #[arg(long, value_parser = program::duration::parse, default_value = "2s")]
    pub step: Duration,
    /// Load at the ramp's first rate before the ramp, not recorded
    #[arg(long, value_parser = program::duration::parse, default_value = "1s")]
    pub warmup: Duration,
    /// Persistent Echo streams the messages are spread over
    #[arg(long, default_value_t = 20)]
    pub streams: usize,
    /// Calls (or messages) in flight at most; beyond that a slot waits or is
    /// shed. Little's law: it must exceed rate x latency, or the bound, not
    /// the server, sets the plateau (724k msg/s x 0.5 ms = 362)
    #[arg(long, default_value_t = 1024)]
    pub max_in_flight: usize,
    /// What a slot does when --max-in-flight are busy
    #[arg(long, value_enum, default_value = "defer")]
    pub when_full: WhenFull,
    /// Deadline of each call (or each message's echo)
    #[arg(long, value_parser = program::duration::parse, default_value = "1s")]
    pub deadline: Duration,
    /// Rate of the strace runs, for both gRPC shapes (strace slows the server several-fold)
    #[arg(long, default_value_t = 2000.0)]
    pub strace_rate: f64,
    /// Skip counting system calls per unit with strace (done only when strace is installed)
    #[arg(long)]
    pub no_strace: bool,
    /// Do not pin the server to CPU 0 and the generator to CPU 1
    #[arg(long)]
    pub no_pin: bool,
    /// Run each server in a CPU quota of this many CPUs (0.5: 50 ms of every
    /// 100 ms), as Kubernetes limits a pod: the server then fills its quota
    /// long before the generator fills its core. Needs root and the cgroup
    /// cpu controller
    #[arg(long, value_name = "CPUS")]
    pub server_cpus: Option<f64>,
    /// Drive a server started elsewhere with `per_call serve` (in a pod of a
    /// real cluster, deploy/k8s/), reached at its metrics address: its gRPC
    /// and REST ports are read from there. --arms then names the one arm it
    /// runs; its CPU limit is its pod's
    #[arg(long, value_name = "HOST:PORT")]
    pub target: Option<String>,
    /// --quick: a short version that keeps the shape of the result (one
    /// repeat, shorter and fewer steps, and only ct-inline and mt2-spawn when
    /// more arms are named); --render DIR: an earlier run, rendered again
    #[command(flatten)]
    pub flags: Flags,
    /// Keep every Nth slot's record in samples.csv (all slots count in the
    /// summaries; a full run has tens of millions of slots)
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub raw_every: u64,
    /// Folder for the results (an earlier run there is replaced)
    #[arg(long, default_value = "target/experiments/ch14")]
    pub out: PathBuf,
    /// Run as a server process, configured over stdin (the experiment starts these itself)
    #[arg(long, hide = true)]
    pub serve_child: bool,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum Command {
    /// One arm's server alone, for a pod of a real cluster (deploy/k8s/):
    /// the echo over gRPC and REST, and its own counts for --target
    Serve(crate::remote::ServeArgs),
}

/// The settings a run really uses, checked: what `config.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub arms: Vec<Arm>,
    pub repeats: usize,
    pub unary_ramp: Ramp,
    pub stream_ramp: Ramp,
    // A run made before the REST shapes existed has none of these four:
    // `--render` reads it as the gRPC shapes alone.
    #[serde(default = "no_ramp")]
    pub rest_h1_ramp: Ramp,
    #[serde(default = "no_ramp")]
    pub rest_h2_ramp: Ramp,
    #[serde(default = "grpc_shapes")]
    pub shapes: Vec<Shape>,
    #[serde(default)]
    pub h1_connections: usize,
    pub step: Duration,
    pub warmup: Duration,
    pub streams: usize,
    pub max_in_flight: usize,
    pub when_full: WhenFull,
    pub deadline: Duration,
    pub strace_rate: f64,
    /// Count system calls with strace (when it is installed).
    pub strace: bool,
    /// Pin the server to CPU 0 and the generator to CPU 1.
    pub pin: bool,
    /// The server's CPU quota, in CPUs; none: as much as its core gives.
    #[serde(default)]
    pub server_cpus: Option<f64>,
    /// The metrics address of a server started elsewhere (`per_call serve`);
    /// none: the run starts its own servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    pub quick: bool,
    pub raw_every: u64,
    pub out: PathBuf,
}

impl Args {
    /// Checks the flags; `--quick` shortens the defaults.
    pub fn config(&self) -> anyhow::Result<Config> {
        if self.arms.is_empty() {
            bail!("--arms names no arm");
        }
        if self.repeats == 0 {
            bail!("--repeats must be at least 1");
        }
        if self.step < Duration::from_millis(100) {
            bail!("--step must be at least 100ms");
        }
        if self.streams == 0 || self.streams > 1000 {
            bail!("--streams must be between 1 and 1000");
        }
        if self.shapes.is_empty() {
            bail!("--shapes names no shape");
        }
        if !(1..=10_000).contains(&self.h1_connections) {
            bail!(
                "--h1-connections must be between 1 and 10000 (got {})",
                self.h1_connections
            );
        }
        if self.max_in_flight == 0 {
            bail!("--max-in-flight must be at least 1");
        }
        if !(self.strace_rate.is_finite() && self.strace_rate >= 1.0) {
            bail!("--strace-rate must be at least 1");
        }
        if self.deadline.is_zero() {
            bail!("--deadline must be above 0");
        }
        if let Some(cpus) = self.server_cpus
            && !(0.05..=64.0).contains(&cpus)
        {
            bail!("--server-cpus must be between 0.05 and 64 (got {cpus})");
        }
        if self.target.is_some() {
            if self.server_cpus.is_some() {
                bail!(
                    "--server-cpus is refused with --target: the server's CPU limit is its pod's \
                     (`resources.limits.cpu`), not this program's"
                );
            }
            if self.arms.len() != 1 {
                bail!(
                    "with --target, --arms names the one arm the server runs (`per_call serve \
                     --arm ...`), e.g. --arms ct-inline; got {}",
                    self.arms.len()
                );
            }
        }
        let quick = self.flags.quick;
        let mut c = Config {
            arms: self.arms.clone(),
            repeats: self.repeats,
            unary_ramp: self.unary_ramp,
            stream_ramp: self.stream_ramp,
            rest_h1_ramp: self.rest_h1_ramp,
            rest_h2_ramp: self.rest_h2_ramp,
            shapes: dedup(&self.shapes),
            h1_connections: self.h1_connections,
            step: self.step,
            warmup: self.warmup,
            streams: self.streams,
            max_in_flight: self.max_in_flight,
            when_full: self.when_full,
            deadline: self.deadline,
            strace_rate: self.strace_rate,
            strace: !self.no_strace,
            pin: !self.no_pin,
            server_cpus: self.server_cpus,
            target: self.target.clone(),
            quick,
            raw_every: self.raw_every,
            out: self.out.clone(),
        };
        if quick {
            c.repeats = 1;
            c.strace = false;
            c.step = c.step.min(Duration::from_millis(800));
            c.warmup = c.warmup.min(Duration::from_millis(300));
            c.unary_ramp.steps = c.unary_ramp.steps.min(5);
            c.stream_ramp.steps = c.stream_ramp.steps.min(6);
            c.rest_h1_ramp.steps = c.rest_h1_ramp.steps.min(5);
            c.rest_h2_ramp.steps = c.rest_h2_ramp.steps.min(5);
            if c.arms.len() > 2 {
                // The two ends of the spectrum: everything on one thread, and
                // a hop to a pool of two per unit of work.
                c.arms = vec![
                    "ct-inline".parse().expect("valid"),
                    "mt2-spawn".parse().expect("valid"),
                ];
            }
        }
        Ok(c)
    }
}

impl Config {
    /// How much of one CPU the server may use: its quota, or all of its core.
    pub fn server_share(&self) -> f64 {
        self.server_cpus.unwrap_or(1.0)
    }

    /// The ramp of `shape`.
    pub fn ramp(&self, shape: Shape) -> Ramp {
        match shape {
            Shape::Unary => self.unary_ramp,
            Shape::Stream => self.stream_ramp,
            Shape::RestH1 => self.rest_h1_ramp,
            Shape::RestH2 => self.rest_h2_ramp,
        }
    }
}

fn no_ramp() -> Ramp {
    Ramp {
        from: 1.0,
        to: 1.0,
        steps: 1,
    }
}

fn grpc_shapes() -> Vec<Shape> {
    vec![Shape::Unary, Shape::Stream]
}

/// Each shape once, in the order first named.
fn dedup(shapes: &[Shape]) -> Vec<Shape> {
    let mut once = Vec::new();
    for &s in shapes {
        if !once.contains(&s) {
            once.push(s);
        }
    }
    once
}

impl Experiment for Config {
    fn out(&self) -> &Path {
        &self.out
    }
}
