//! The ramp, and what one ramp says: per-step numbers, the plateau and the knee.

use std::{fmt, str::FromStr, time::Duration};

use loadgen::{Outcome, SlotRecord, Summary};
pub use perf::stats::Spread;
use serde::{Deserialize, Serialize};

use crate::{rest::Http, server::Snapshot};

/// `FROM:TO:STEPS`: STEPS rates from FROM to TO per second, each a constant
/// factor above the one before (a geometric ramp spends as many steps at low
/// load as near saturation, where the interesting things happen in
/// proportion to the rate).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ramp {
    pub from: f64,
    pub to: f64,
    pub steps: usize,
}

impl Ramp {
    /// The offered rates, rounded to whole sends per second.
    pub fn rates(&self) -> Vec<f64> {
        if self.steps == 1 {
            return vec![self.from.round()];
        }
        let factor = (self.to / self.from).powf(1.0 / (self.steps - 1) as f64);
        (0..self.steps)
            .map(|i| (self.from * factor.powi(i as i32)).round())
            .collect()
    }
}

impl FromStr for Ramp {
    type Err = String;

    fn from_str(text: &str) -> Result<Ramp, String> {
        let usage = || format!("`{text}` is not a ramp; write FROM:TO:STEPS, e.g. 2000:20000:8");
        let parts: Vec<&str> = text.split(':').collect();
        let [from, to, steps] = parts[..] else {
            return Err(usage());
        };
        let from: f64 = from.trim().parse().map_err(|_| usage())?;
        let to: f64 = to.trim().parse().map_err(|_| usage())?;
        let steps: usize = steps.trim().parse().map_err(|_| usage())?;
        if !(from.is_finite() && to.is_finite() && from >= 1.0 && to >= from) {
            return Err(format!(
                "in `{text}`: rates must be at least 1/s, and TO at least FROM"
            ));
        }
        if !(1..=50).contains(&steps) {
            return Err(format!("in `{text}`: STEPS must be between 1 and 50"));
        }
        Ok(Ramp { from, to, steps })
    }
}

impl fmt::Display for Ramp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.from, self.to, self.steps)
    }
}

/// Unary calls, messages on persistent streams, or REST requests over
/// HTTP/1.1 or HTTP/2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    Unary,
    Stream,
    RestH1,
    RestH2,
}

impl Shape {
    pub const ALL: [Shape; 4] = [Shape::Unary, Shape::Stream, Shape::RestH1, Shape::RestH2];

    /// The HTTP version of a REST shape.
    pub fn http(&self) -> Option<Http> {
        match self {
            Shape::RestH1 => Some(Http::H1),
            Shape::RestH2 => Some(Http::H2),
            Shape::Unary | Shape::Stream => None,
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Shape::Unary => "unary",
            Shape::Stream => "stream",
            Shape::RestH1 => "rest-h1",
            Shape::RestH2 => "rest-h2",
        })
    }
}

impl FromStr for Shape {
    type Err = String;

    fn from_str(text: &str) -> Result<Shape, String> {
        Shape::ALL
            .into_iter()
            .find(|s| s.to_string() == text)
            .ok_or_else(|| {
                format!("`{text}` is not a shape; write unary, stream, rest-h1 or rest-h2")
            })
    }
}

/// Server-side counts divided by the units (calls or messages) it answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PerUnit {
    pub cpu_us: f64,
    pub busy_us: f64,
    pub context_switches: f64,
    pub parks: f64,
    pub spawned: f64,
}

impl PerUnit {
    pub fn of(delta: &Snapshot, units: u64) -> PerUnit {
        let per = |n: f64| if units == 0 { 0.0 } else { n / units as f64 };
        PerUnit {
            cpu_us: per(delta.cpu_ns as f64 / 1e3),
            busy_us: per(delta.busy_ns as f64 / 1e3),
            context_switches: per(delta.context_switches as f64),
            parks: per(delta.parks as f64),
            spawned: per(delta.spawned as f64),
        }
    }
}

/// One step of one ramp: a row of `steps.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
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
    /// Answers that arrived within the step's duration, per second.
    pub goodput: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// How late the generator started sends, median: its own timing error
    /// (Tokio's timer wakes on whole milliseconds) plus any deferral.
    pub late_p50_ms: f64,
    /// The server process's CPU time over the step's wall time (1.0 = one core).
    pub server_cpu: f64,
    /// The generator's CPU time over the step's wall time.
    pub client_cpu: f64,
    /// The server's cost per unit (a call or a message), flat so that the
    /// step is one CSV row: see [`PerUnit`].
    pub cpu_us_per_unit: f64,
    pub busy_us_per_unit: f64,
    pub ctx_switches_per_unit: f64,
    pub parks_per_unit: f64,
    pub spawned_per_unit: f64,
    /// What the server saw of a REST client's connections during the step
    /// (zero for the gRPC shapes, whose one connection is opened before the
    /// ramp): opened, still open at its end, ended by an error.
    #[serde(default)]
    pub connections_opened: u64,
    #[serde(default)]
    pub connections_open: u64,
    #[serde(default)]
    pub connections_failed: u64,
    /// The kernel's count of connections its listen queues turned away
    /// during the step (`TcpExt ListenOverflows`, in the server's network
    /// namespace: machine-wide on one machine, the pod's in a cluster).
    #[serde(default)]
    pub listen_overflows: u64,
    /// Failed slots by kind, `kind=count` separated by `; `.
    #[serde(default)]
    pub errors: String,
    /// How late the generator started sends, 99th percentile: its error
    /// beside the p99 it measures (empty in runs made before it was kept).
    #[serde(default)]
    pub late_p99_ms: Option<f64>,
    /// With a CPU quota (`--server-cpus`, or a remote server's pod): the
    /// quota's periods during the step, and how many of them ended with the
    /// server stopped for having spent it.
    #[serde(default)]
    pub periods: Option<u64>,
    #[serde(default)]
    pub throttled_periods: Option<u64>,
}

/// Failed slots counted by their code: `DEADLINE_EXCEEDED=12; connect: ConnectionRefused=3`.
pub fn errors_by_kind(records: &[SlotRecord]) -> String {
    let mut kinds = std::collections::BTreeMap::<&str, u64>::new();
    for r in records.iter().filter(|r| r.outcome == Outcome::Failed) {
        *kinds
            .entry(r.code.as_deref().unwrap_or("unknown"))
            .or_default() += 1;
    }
    let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k}={n}")).collect();
    kinds.join("; ")
}

// ANCHOR: goodput
/// Successful answers that arrived before the step's end, per second of the
/// step. A call that was deferred past the end still counts in the latency
/// percentiles (from when it was due) but not here: that rate is what the
/// server achieved, which under overload is less than what was offered.
pub fn goodput(records: &[SlotRecord], duration: Duration) -> f64 {
    let done = records
        .iter()
        .filter(|r| r.outcome == Outcome::Ok)
        .filter(|r| r.ended.is_some_and(|e| e <= duration))
        .count();
    done as f64 / duration.as_secs_f64()
}
// ANCHOR_END: goodput

impl StepResult {
    /// Fills in the slot accounting and latency of a step from its records.
    pub fn from_records(records: &[SlotRecord], offered: f64, duration: Duration) -> StepResult {
        let s = Summary::of(records);
        StepResult {
            arm: String::new(),
            shape: Shape::Unary,
            repeat: 0,
            step: 0,
            offered,
            duration_s: duration.as_secs_f64(),
            scheduled: s.scheduled,
            ok: s.ok,
            failed: s.failed,
            shed: s.shed,
            deferred: s.deferred,
            unfinished: s.unfinished,
            goodput: goodput(records, duration),
            p50_ms: s.latency.p50_ms,
            p99_ms: s.latency.p99_ms,
            max_ms: s.latency.max_ms,
            late_p50_ms: s.lateness.p50_ms,
            late_p99_ms: Some(s.lateness.p99_ms),
            periods: None,
            throttled_periods: None,
            server_cpu: 0.0,
            client_cpu: 0.0,
            cpu_us_per_unit: 0.0,
            busy_us_per_unit: 0.0,
            ctx_switches_per_unit: 0.0,
            parks_per_unit: 0.0,
            spawned_per_unit: 0.0,
            connections_opened: 0,
            connections_open: 0,
            connections_failed: 0,
            listen_overflows: 0,
            errors: errors_by_kind(records),
        }
    }

    /// The same step with the server's cost per unit filled in.
    pub fn with_per_unit(self, p: PerUnit) -> StepResult {
        StepResult {
            cpu_us_per_unit: p.cpu_us,
            busy_us_per_unit: p.busy_us,
            ctx_switches_per_unit: p.context_switches,
            parks_per_unit: p.parks,
            spawned_per_unit: p.spawned,
            ..self
        }
    }

    pub fn per_unit(&self) -> PerUnit {
        PerUnit {
            cpu_us: self.cpu_us_per_unit,
            busy_us: self.busy_us_per_unit,
            context_switches: self.ctx_switches_per_unit,
            parks: self.parks_per_unit,
            spawned: self.spawned_per_unit,
        }
    }

    /// Far enough past capacity that further steps would only say it again.
    pub fn saturated(&self) -> bool {
        self.goodput < 0.8 * self.offered
    }
}

// ANCHOR: knee
/// Why a step counts as the knee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KneeReason {
    /// Answered less than 95% of the offered rate within the step.
    Goodput,
    /// More than 1% of its slots found every in-flight place busy.
    Queueing,
    /// p99 above 4x the lowest step's p99 (and above 2 ms).
    Tail,
}

/// The first step, in ramp order, that shows any sign of saturation.
pub fn knee(steps: &[StepResult]) -> Option<(usize, KneeReason)> {
    let baseline = steps.first()?.p99_ms;
    steps.iter().enumerate().find_map(|(i, s)| {
        let reason = if s.goodput < 0.95 * s.offered {
            KneeReason::Goodput
        } else if (s.deferred + s.shed) as f64 > 0.01 * s.scheduled as f64 {
            KneeReason::Queueing
        } else if s.p99_ms > (4.0 * baseline).max(2.0) {
            KneeReason::Tail
        } else {
            return None;
        };
        Some((i, reason))
    })
}
// ANCHOR_END: knee

/// The highest goodput of any step.
pub fn plateau(steps: &[StepResult]) -> f64 {
    steps.iter().map(|s| s.goodput).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ramp_is_geometric_from_first_to_last() {
        let ramp: Ramp = "1000:16000:5".parse().unwrap();
        assert_eq!(ramp.rates(), [1000.0, 2000.0, 4000.0, 8000.0, 16000.0]);
        assert_eq!("500:500:1".parse::<Ramp>().unwrap().rates(), [500.0]);
        for bad in [
            "1000:16000",
            "0:10:3",
            "10:5:3",
            "10:20:0",
            "a:b:c",
            "1:2:99",
        ] {
            assert!(bad.parse::<Ramp>().is_err(), "{bad}");
        }
        assert_eq!(ramp.to_string().parse::<Ramp>().unwrap(), ramp);
    }

    fn step(offered: f64, goodput: f64, deferred: u64, p99_ms: f64) -> StepResult {
        StepResult {
            goodput,
            deferred,
            p99_ms,
            scheduled: offered as u64,
            ..StepResult::from_records(&[], offered, Duration::from_secs(1))
        }
    }

    #[test]
    fn the_knee_is_the_first_step_that_shows_saturation() {
        let clean = |rate: f64| step(rate, rate, 0, 0.5);
        assert_eq!(knee(&[clean(1000.0), clean(2000.0)]), None);
        // Tail: 0.5 ms baseline, so the threshold is 2 ms (the floor), not 4 x 0.5.
        let steps = [
            clean(1000.0),
            step(2000.0, 2000.0, 0, 1.9),
            step(4000.0, 4000.0, 0, 2.5),
        ];
        assert_eq!(knee(&steps), Some((2, KneeReason::Tail)));
        // Queueing: 41 of 4000 slots deferred is just over 1%.
        let steps = [clean(1000.0), step(4000.0, 4000.0, 41, 1.0)];
        assert_eq!(knee(&steps), Some((1, KneeReason::Queueing)));
        let steps = [clean(1000.0), step(4000.0, 4000.0, 40, 1.0)];
        assert_eq!(knee(&steps), None);
        // Goodput is checked first.
        let steps = [clean(1000.0), step(4000.0, 3000.0, 900, 90.0)];
        assert_eq!(knee(&steps), Some((1, KneeReason::Goodput)));
        assert_eq!(plateau(&steps), 3000.0);
        assert!(steps[1].saturated() && !steps[0].saturated());
    }

    fn record(index: u64, outcome: Outcome, ended_ms: Option<u64>, deferred: bool) -> SlotRecord {
        SlotRecord {
            index,
            step: 0,
            due: Duration::from_millis(index),
            started: ended_ms.map(|_| Duration::from_millis(index)),
            ended: ended_ms.map(Duration::from_millis),
            outcome,
            deferred,
            code: None,
        }
    }

    #[test]
    fn goodput_counts_answers_within_the_step_only() {
        let records = [
            record(0, Outcome::Ok, Some(10), false),
            record(1, Outcome::Ok, Some(999), true),
            record(2, Outcome::Ok, Some(1500), true), // after the step: not goodput
            record(3, Outcome::Failed, Some(20), false),
            record(4, Outcome::Shed, None, false),
        ];
        let s = StepResult::from_records(&records, 5.0, Duration::from_secs(1));
        assert_eq!(s.goodput, 2.0);
        assert_eq!(
            (s.scheduled, s.ok, s.failed, s.shed, s.deferred),
            (5, 3, 1, 1, 2)
        );
    }
}
