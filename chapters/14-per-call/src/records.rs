//! The files a run leaves, as types: `steps.csv` (one row per step of every
//! ramp), `ramps.json` (each ramp's server and the machine's load when it
//! started), `samples.csv` (every Nth slot's record), and what was found about
//! the placement, h2load and system calls. `--render` needs nothing else.

use std::time::Duration;

use harness::{
    pod::Throttling,
    records::{ms, opt_ms},
};
use loadgen::{Outcome, SlotRecord};
use serde::{Deserialize, Serialize};

use crate::{
    ramp::{Shape, StepResult},
    server::ServerInfo,
    syscalls::SyscallCount,
};

pub const STEPS: &str = "steps.csv";
pub const RAMPS: &str = "ramps.json";
pub const SAMPLES: &str = "samples.csv";
pub const PLACEMENT: &str = "placement.json";
pub const H2LOAD: &str = "h2load.json";
pub const SYSCALLS: &str = "syscalls.json";

/// One ramp of one arm and shape; its steps are the rows of `steps.csv`
/// with the same arm, shape and repeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RampRecord {
    pub arm: String,
    pub shape: Shape,
    pub repeat: usize,
    pub server: ServerInfo,
    /// The machine's 1-minute load average when the ramp started: on a
    /// shared machine, how much else was running.
    pub loadavg_1m: f64,
    /// With `--server-cpus`: how often the kernel held the server back
    /// for having spent its quota, over the whole ramp.
    #[serde(default)]
    pub throttling: Option<Throttling>,
}

/// One sampled slot of one step: a row of `samples.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleRow {
    /// The ramp and step it belongs to.
    pub arm: String,
    pub shape: Shape,
    pub repeat: usize,
    pub offered: f64,
    /// The slot, as the generator recorded it (a [`SlotRecord`] of the
    /// step, whose own `step` is `offered` here).
    pub index: u64,
    #[serde(rename = "due_ms", with = "ms")]
    pub due: Duration,
    #[serde(rename = "started_ms", with = "opt_ms")]
    pub started: Option<Duration>,
    #[serde(rename = "ended_ms", with = "opt_ms")]
    pub ended: Option<Duration>,
    pub outcome: Outcome,
    pub deferred: bool,
    pub code: Option<String>,
}

impl SampleRow {
    /// Every `every`th record of a step.
    pub fn of(step: &StepResult, records: &[SlotRecord], every: u64) -> Vec<SampleRow> {
        records
            .iter()
            .filter(|r| r.index % every == 0)
            .map(|r| SampleRow {
                arm: step.arm.clone(),
                shape: step.shape,
                repeat: step.repeat,
                offered: step.offered,
                index: r.index,
                due: r.due,
                started: r.started,
                ended: r.ended,
                outcome: r.outcome,
                deferred: r.deferred,
                code: r.code.clone(),
            })
            .collect()
    }
}

/// System calls per unit, or why they were not counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Syscalls {
    pub note: String,
    pub counts: Vec<SyscallCount>,
}
