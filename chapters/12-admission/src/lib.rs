//! Chapter 12: fixed or adaptive admission? Part 2's experiment,
//! replicated: fixed-32, fixed-8 and Part 2's feedback controller (plus
//! fixed-4, fixed-2 and a delay-target rule of our own) in paired, seeded
//! blocks, every run in fresh server and client processes, analysed by rules
//! frozen before the first run.
//! It reads as config -> run -> records -> render:
//!
//! - [`config`]: the command line, checked into a [`config::Config`];
//! - [`contract`]: what is frozen before the first run (parameters, run order,
//!   endpoints, definitions);
//! - [`controller`]: the budget rules, as pure decisions on scripted ticks;
//! - [`children`]: the two processes of every run (server, client);
//! - [`runner`]: the protocol (blocks, attempts, the exclusions ledger);
//! - [`records`]: the typed files a run leaves, and reading them back;
//! - [`analysis`]: pooled nearest-rank percentiles, block bootstrap, recovery;
//! - [`hypotheses`]: Part 2's four hypotheses, each decided by its frozen rule;
//! - [`render`], [`report`], [`plots`]: from the records to the tables and charts.

pub mod analysis;
pub mod children;
pub mod config;
pub mod contract;
pub mod controller;
pub mod hypotheses;
pub mod plots;
pub mod records;
pub mod render;
pub mod report;
pub mod runner;

use clap::{Parser, Subcommand, ValueEnum};
use serde::{Deserialize, Serialize};

/// The admission policies: Part 2's three, two smaller fixed budgets
/// (Part 2's open question: would a small fixed budget do as well?), and ours.
#[derive(
    ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub enum PolicyKind {
    /// B = 32 (the physical capacity K)
    #[value(name = "fixed-32")]
    #[serde(rename = "fixed-32")]
    Fixed32,
    /// B = 8
    #[value(name = "fixed-8")]
    #[serde(rename = "fixed-8")]
    Fixed8,
    /// B = 4
    #[value(name = "fixed-4")]
    #[serde(rename = "fixed-4")]
    Fixed4,
    /// B = 2, where the target policy settles during the slowdown
    #[value(name = "fixed-2")]
    #[serde(rename = "fixed-2")]
    Fixed2,
    /// Part 2's controller: B from 16, halve / +1 on a 500 ms tick
    #[serde(rename = "adaptive")]
    Adaptive,
    /// Ours: B = target delay / measured service time, on a 100 ms tick
    #[serde(rename = "target")]
    Target,
}

impl PolicyKind {
    /// The budget the server starts with.
    pub fn start_budget(self) -> usize {
        match self {
            PolicyKind::Fixed32 => 32,
            PolicyKind::Fixed8 => 8,
            PolicyKind::Fixed4 => 4,
            PolicyKind::Fixed2 => 2,
            PolicyKind::Adaptive | PolicyKind::Target => 16,
        }
    }
}

// A policy is printed as `--policies` takes it; serde's renames above must
// spell it the same, since the contract and the records carry it (a test
// checks that they do).
program::clap_name_display!(PolicyKind);

/// Fixed or adaptive admission: Part 2's experiment, replicated.
///
/// Runs --blocks paired blocks; in each, every policy once, in a seeded
/// order, each run in a fresh server process and a fresh client process.
/// Writes the frozen contract first, then an exclusions ledger, the per-run
/// records, the analysis (JSON), a Markdown report beside Part 2's figures
/// and SVG plots, to --out, whose path it prints at the end.
#[derive(Parser, Debug, Clone)]
#[command(name = "admission", version, args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Child>,
    #[command(flatten)]
    pub run: config::RunArgs,
}

/// The processes the runner starts, configured over their stdin; not for use by hand.
#[derive(Subcommand, Debug, Clone)]
pub enum Child {
    /// The ingest server with a budget controller (started by the runner)
    #[command(hide = true)]
    Serve,
    /// The open-loop client (started by the runner)
    #[command(hide = true)]
    Client,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_is_spelled_alike_on_the_command_line_and_on_disk() {
        for policy in PolicyKind::value_variants() {
            let on_disk = serde_json::to_value(policy).unwrap();
            assert_eq!(on_disk, serde_json::json!(policy.to_string()));
        }
    }
}
