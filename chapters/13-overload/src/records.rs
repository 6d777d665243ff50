//! The raw records of one (policy, load) cell, as typed rows, in the
//! folder's `raw/`: every call as its caller saw it, every piece of the
//! server's work, and every arrival with the queue it found. Times are from
//! the start of the cell's schedule.

use std::time::Duration;

use harness::records::{ms, opt_ms};
use loadgen::Outcome;
use serde::{Deserialize, Serialize};

use crate::{
    config::{Policy, Transport},
    server::Fate,
};

/// One call: `raw/TRANSPORT-POLICY-LOADx-calls.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRow {
    pub index: u64,
    /// When the call was due, when its first attempt started and when its
    /// caller had the last answer (empty for a call never started).
    #[serde(rename = "due_ms", with = "ms")]
    pub due: Duration,
    #[serde(rename = "started_ms", with = "opt_ms")]
    pub started: Option<Duration>,
    #[serde(rename = "ended_ms", with = "opt_ms")]
    pub ended: Option<Duration>,
    pub outcome: Outcome,
    /// A failed call's gRPC code name (`RESOURCE_EXHAUSTED`, ...).
    pub code: Option<String>,
    /// Attempts the call made, the first included.
    pub attempts: u32,
}

impl CallRow {
    /// From when it was due to when its caller had an answer.
    pub fn latency(&self) -> Option<Duration> {
        Some(self.ended? - self.due)
    }
}

/// One call inside the server: `raw/TRANSPORT-POLICY-LOADx-server.csv`. `started` and
/// `ended` are the worker's time, for served and wasted calls only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkRow {
    #[serde(rename = "arrived_ms", with = "ms")]
    pub arrived: Duration,
    /// When its caller stops waiting, if the call said (`grpc-timeout`).
    #[serde(rename = "deadline_ms", with = "opt_ms")]
    pub deadline: Option<Duration>,
    #[serde(rename = "started_ms", with = "opt_ms")]
    pub started: Option<Duration>,
    #[serde(rename = "ended_ms", with = "opt_ms")]
    pub ended: Option<Duration>,
    /// Calls already waiting when it arrived.
    pub waiting_ahead: usize,
    pub fate: Fate,
}

/// Every arrival, including calls still waiting when the cell ended (which
/// have no [`WorkRow`]): `raw/TRANSPORT-POLICY-LOADx-arrivals.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrivalRow {
    #[serde(rename = "arrived_ms", with = "ms")]
    pub arrived: Duration,
    pub waiting: usize,
}

/// The file of one kind of record of one cell, under `raw/`.
pub fn raw_file(transport: Transport, policy: Policy, load: f64, kind: &str) -> String {
    format!("raw/{transport}-{policy}-{load}x-{kind}.csv")
}
