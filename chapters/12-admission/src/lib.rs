//! Chapter 12: fixed or adaptive admission? The seed's Part 2 experiment,
//! replicated: fixed-32, fixed-8 and the seed's feedback controller (plus a
//! delay-target rule of our own) in paired, seeded blocks, every run in fresh
//! server and client processes, analysed by rules frozen before the first run.
//!
//! - [`controller`]: the budget rules, as pure decisions on scripted ticks.
//! - [`analysis`]: pooled nearest-rank percentiles, block bootstrap, recovery.
//! - [`runner`]: the protocol (contract, ledger, blocks, fresh processes).
//! - [`children`]: the hidden `serve` and `client` subcommands it re-executes.
//! - [`report`]: the Markdown report beside the seed's tables, and the plots.

pub mod analysis;
pub mod children;
pub mod controller;
pub mod report;
pub mod runner;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// The four admission policies.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyKind {
    /// B = 32 (the physical capacity K)
    #[value(name = "fixed-32")]
    Fixed32,
    /// B = 8
    #[value(name = "fixed-8")]
    Fixed8,
    /// The seed's controller: B from 16, halve / +1 on a 500 ms tick
    Adaptive,
    /// Ours: B = target delay / measured service time, on a 100 ms tick
    Target,
}

impl PolicyKind {
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Fixed32 => "fixed-32",
            PolicyKind::Fixed8 => "fixed-8",
            PolicyKind::Adaptive => "adaptive",
            PolicyKind::Target => "target",
        }
    }

    /// The budget the server starts with.
    pub fn start_budget(self) -> usize {
        match self {
            PolicyKind::Fixed32 => 32,
            PolicyKind::Fixed8 => 8,
            PolicyKind::Adaptive | PolicyKind::Target => 16,
        }
    }
}

/// Fixed or adaptive admission: the seed's experiment, replicated.
///
/// Runs --blocks paired blocks; in each, every policy once, in a seeded
/// order, each run in a fresh server process and a fresh client process.
/// Writes the frozen contract first, then an exclusions ledger, the per-run
/// records, the analysis (JSON), a Markdown report beside the seed's figures
/// and SVG plots, to --out, whose path it prints at the end.
#[derive(Parser, Debug, Clone)]
#[command(name = "admission", version, args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Child>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Paired blocks (each runs every policy once) [default: 5; 1 with --quick]
    #[arg(long)]
    pub blocks: Option<usize>,
    /// One block at a quarter of the seed's time scale (about 40 s)
    #[arg(long)]
    pub quick: bool,
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
        default_value = "fixed-32,fixed-8,adaptive,target"
    )]
    pub policies: Vec<PolicyKind>,
    /// Seed of the run order within blocks (and of the bootstrap)
    #[arg(long, default_value_t = 12)]
    pub seed: u64,
    /// Concurrent Ingest calls on the connection, sharing the send rate
    /// (the seed used 1)
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
    /// Workers serving the queue (the seed used 1)
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Draw each service time from an exponential distribution with the
    /// phase's mean (seeded, the same draws for every policy)
    #[arg(long)]
    pub exponential: bool,
    /// Delay target of the `target` policy, ms at scale 1
    #[arg(long, default_value_t = 100.0)]
    pub target_ms: f64,
    /// Payload bytes per message (the seed: 16,384)
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
    /// Do not run: recompute the analysis, report and plots from the runs
    /// already in --out (its contract must match the other flags)
    #[arg(long)]
    pub reanalyse: bool,
    /// Folder of the development PKI (created if missing)
    #[arg(long, env = "CERTS_DIR", default_value_os_t = program::certs_dir())]
    pub certs_dir: PathBuf,
}

/// The processes the runner starts; not for direct use.
#[derive(Subcommand, Debug, Clone)]
pub enum Child {
    /// The ingest server with a budget controller (started by the runner)
    #[command(hide = true)]
    Serve(children::ServeChild),
    /// The open-loop client (started by the runner)
    #[command(hide = true)]
    Client(children::ClientChild),
}
