//! The files a run leaves, as types: `steps.csv` (one row per step of every
//! ramp), `ramps.json` (each ramp's server and the machine's load when it
//! started), `samples.csv` (every Nth slot's record), and what was found about
//! the placement, h2load and system calls. `--render` needs nothing else.

use std::time::Duration;

use harness::records::{ms, opt_ms};
use loadgen::{Outcome, SlotRecord};
use serde::{Deserialize, Serialize};

use crate::{
    ramp::{PerUnit, Shape, StepResult},
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
}

/// A [`StepResult`] as a flat row of `steps.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRow {
    pub arm: String,
    pub shape: Shape,
    pub repeat: usize,
    pub step: usize,
    pub offered: f64,
    pub duration_s: f64,
    pub scheduled: u64,
    pub ok: u64,
    pub failed: u64,
    pub shed: u64,
    pub deferred: u64,
    pub unfinished: u64,
    pub goodput: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub late_p50_ms: f64,
    pub server_cpu: f64,
    pub client_cpu: f64,
    pub cpu_us_per_unit: f64,
    pub busy_us_per_unit: f64,
    pub ctx_switches_per_unit: f64,
    pub parks_per_unit: f64,
    pub spawned_per_unit: f64,
}

impl From<StepResult> for StepRow {
    fn from(s: StepResult) -> StepRow {
        StepRow {
            arm: s.arm,
            shape: s.shape,
            repeat: s.repeat,
            step: s.step,
            offered: s.offered,
            duration_s: s.duration_s,
            scheduled: s.scheduled,
            ok: s.ok,
            failed: s.failed,
            shed: s.shed,
            deferred: s.deferred,
            unfinished: s.unfinished,
            goodput: s.goodput,
            p50_ms: s.p50_ms,
            p99_ms: s.p99_ms,
            max_ms: s.max_ms,
            late_p50_ms: s.late_p50_ms,
            server_cpu: s.server_cpu,
            client_cpu: s.client_cpu,
            cpu_us_per_unit: s.per_unit.cpu_us,
            busy_us_per_unit: s.per_unit.busy_us,
            ctx_switches_per_unit: s.per_unit.context_switches,
            parks_per_unit: s.per_unit.parks,
            spawned_per_unit: s.per_unit.spawned,
        }
    }
}

impl From<StepRow> for StepResult {
    fn from(r: StepRow) -> StepResult {
        StepResult {
            arm: r.arm,
            shape: r.shape,
            repeat: r.repeat,
            step: r.step,
            offered: r.offered,
            duration_s: r.duration_s,
            scheduled: r.scheduled,
            ok: r.ok,
            failed: r.failed,
            shed: r.shed,
            deferred: r.deferred,
            unfinished: r.unfinished,
            goodput: r.goodput,
            p50_ms: r.p50_ms,
            p99_ms: r.p99_ms,
            max_ms: r.max_ms,
            late_p50_ms: r.late_p50_ms,
            server_cpu: r.server_cpu,
            client_cpu: r.client_cpu,
            per_unit: PerUnit {
                cpu_us: r.cpu_us_per_unit,
                busy_us: r.busy_us_per_unit,
                context_switches: r.ctx_switches_per_unit,
                parks: r.parks_per_unit,
                spawned: r.spawned_per_unit,
            },
        }
    }
}

/// One sampled slot of one step: a row of `samples.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleRow {
    pub arm: String,
    pub shape: Shape,
    pub repeat: usize,
    pub offered: f64,
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
