//! What a cell's records say: goodput, latency, refusals, time-outs and
//! amplification on the callers' side; busy and wasted worker time, fates
//! and queue depths on the server's. Pure functions of the rows, so a
//! finished run can be recomputed from its files.

use std::time::Duration;

use loadgen::{Outcome, Percentiles, cli::code_name};
use serde::{Deserialize, Serialize};
use tonic::Code;

use crate::{
    client,
    config::{Config, Policy, Transport},
    records::{ArrivalRow, CallRow, WorkRow},
    server::Fate,
};

/// The server's figures for one cell, over the measured window.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerFigures {
    /// Worker time spent, as a share of all the workers' time in the window.
    pub busy_share: f64,
    /// The part of that work whose caller had given up before it ended.
    pub wasted_share: f64,
    pub busy_s: f64,
    pub wasted_s: f64,
    /// Calls that arrived in the window, by what became of them.
    pub served: u64,
    pub wasted: u64,
    pub dropped: u64,
    pub shed: u64,
    /// Calls that arrived in the window and were still waiting at the end.
    pub never_started: u64,
    /// Calls already waiting when a call arrived: median and maximum.
    pub queue_p50: usize,
    pub queue_max: usize,
}

/// One (transport, policy, load) cell: what the callers saw, and what the
/// server did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    pub transport: Transport,
    pub policy: Policy,
    /// Offered load as a multiple of capacity, and in calls per second.
    pub load: f64,
    pub offered_per_s: f64,
    /// Calls due in the measured window (after the warm-up).
    pub calls: u64,
    /// Calls due in the window that succeeded within their deadline.
    pub ok: u64,
    /// Successes within the deadline per second, counted when they ended
    /// (so the work done after the step ends is not counted).
    pub goodput_per_s: f64,
    /// From due to the reply, successes only.
    pub ok_latency: Percentiles,
    /// Calls that ended refused (RESOURCE_EXHAUSTED), and how fast they knew.
    pub refused: u64,
    pub refused_latency: Percentiles,
    /// Calls that ended at their deadline (DEADLINE_EXCEEDED), dropped ones included.
    pub timed_out: u64,
    /// Anything else: other codes, or not sent at all.
    pub other: u64,
    /// Attempts per offered call (1.0: no retries).
    pub attempts_per_call: f64,
    pub server: ServerFigures,
}

/// The figures of one cell, over the window from the end of the warm-up to
/// the end of the step.
pub fn figures(
    config: &Config,
    transport: Transport,
    policy: Policy,
    load: f64,
    calls: &[CallRow],
    work: &[WorkRow],
    arrivals: &[ArrivalRow],
) -> Cell {
    let window = config.warmup..config.step;
    let measured: Vec<&CallRow> = calls.iter().filter(|r| window.contains(&r.due)).collect();
    let secs = (config.step - config.warmup).as_secs_f64();
    let code_is = |r: &CallRow, code: Code| {
        r.outcome == Outcome::Failed && r.code.as_deref() == Some(code_name(code).as_str())
    };
    let good: Vec<Duration> = measured
        .iter()
        .filter(|r| r.outcome == Outcome::Ok)
        .filter_map(|r| r.latency())
        .filter(|l| *l <= config.deadline)
        .collect();
    let refused: Vec<Duration> = measured
        .iter()
        .filter(|r| code_is(r, Code::ResourceExhausted))
        .filter_map(|r| r.latency())
        .collect();
    let ended_in_window = calls
        .iter()
        .filter(|r| r.outcome == Outcome::Ok)
        .filter(|r| r.latency().is_some_and(|l| l <= config.deadline))
        .filter(|r| r.ended.is_some_and(|e| window.contains(&e)))
        .count();
    let timed_out = measured
        .iter()
        .filter(|r| code_is(r, Code::DeadlineExceeded))
        .count() as u64;
    let ok = good.len() as u64;
    let calls_n = measured.len() as u64;
    Cell {
        transport,
        policy,
        load,
        offered_per_s: load * config.capacity(),
        calls: calls_n,
        ok,
        goodput_per_s: ended_in_window as f64 / secs,
        ok_latency: Percentiles::of(good),
        refused: refused.len() as u64,
        refused_latency: Percentiles::of(refused.iter().copied()),
        timed_out,
        other: calls_n - ok - refused.len() as u64 - timed_out,
        attempts_per_call: client::amplification(measured.iter().map(|r| r.attempts)),
        server: server_figures(config, work, arrivals, config.warmup, config.step),
    }
}

/// Worker time inside [from, to], and the part of it spent on calls whose
/// caller had given up before the work ended. Counted by time, not by call,
/// so a backlog left at the end of the step does not count, and work that
/// spans the window's edges counts only for the part inside it.
pub fn server_figures(
    config: &Config,
    work: &[WorkRow],
    arrivals: &[ArrivalRow],
    from: Duration,
    to: Duration,
) -> ServerFigures {
    let mut busy = Duration::ZERO;
    let mut wasted = Duration::ZERO;
    for w in work {
        let (Some(started), Some(ended)) = (w.started, w.ended) else {
            continue;
        };
        let inside = ended.min(to).saturating_sub(started.max(from));
        busy += inside;
        if w.fate == Fate::Wasted {
            wasted += inside;
        }
    }
    let arrived: Vec<&WorkRow> = work
        .iter()
        .filter(|w| w.arrived >= from && w.arrived < to)
        .collect();
    let count = |fate: Fate| arrived.iter().filter(|w| w.fate == fate).count() as u64;
    let mut depths: Vec<usize> = arrivals
        .iter()
        .filter(|a| a.arrived >= from && a.arrived < to)
        .map(|a| a.waiting)
        .collect();
    depths.sort_unstable();
    let worker_time = to.saturating_sub(from).as_secs_f64() * config.workers as f64;
    ServerFigures {
        busy_share: busy.as_secs_f64() / worker_time,
        wasted_share: if busy.is_zero() {
            0.0
        } else {
            wasted.as_secs_f64() / busy.as_secs_f64()
        },
        busy_s: busy.as_secs_f64(),
        wasted_s: wasted.as_secs_f64(),
        served: count(Fate::Served),
        wasted: count(Fate::Wasted),
        dropped: count(Fate::Dropped),
        shed: count(Fate::Shed),
        never_started: (depths.len() as u64).saturating_sub(arrived.len() as u64),
        queue_p50: depths.get(depths.len() / 2).copied().unwrap_or(0),
        queue_max: depths.last().copied().unwrap_or(0),
    }
}

/// One cell in a line.
pub fn line(c: &Cell, config: &Config) -> String {
    format!(
        "goodput {:.0}/s ({:.0}% of capacity), ok p99 {:.0} ms, refused {:.0}%, timed out {:.0}%, wasted {:.0}% of work, {:.2} attempts/call",
        c.goodput_per_s,
        c.goodput_per_s / config.capacity() * 100.0,
        c.ok_latency.p99_ms,
        share(c.refused, c.calls),
        share(c.timed_out, c.calls),
        c.server.wasted_share * 100.0,
        c.attempts_per_call,
    )
}

pub fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64 * 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn config() -> Config {
        crate::Args::parse_from(["overload"]).config().unwrap()
    }

    #[test]
    fn wasted_work_is_the_late_part_of_the_busy_time_inside_the_window() {
        let c = config();
        let ms = Duration::from_millis;
        let w = |start: u64, fate: Fate| WorkRow {
            arrived: ms(start),
            deadline: None,
            started: Some(ms(start)),
            ended: Some(ms(start + 10)),
            waiting_ahead: start as usize,
            fate,
        };
        let work = [
            w(95, Fate::Served), // half inside the window
            w(200, Fate::Wasted),
            w(300, Fate::Served),
            w(995, Fate::Wasted), // half inside
        ];
        let arrivals: Vec<ArrivalRow> = [95, 200, 300, 995, 996]
            .into_iter()
            .map(|t| ArrivalRow {
                arrived: ms(t),
                waiting: t as usize,
            })
            .collect();
        let s = server_figures(&c, &work, &arrivals, ms(100), ms(1000));
        assert!((s.busy_s - 0.030).abs() < 1e-9, "{s:?}");
        assert!((s.wasted_s - 0.015).abs() < 1e-9, "{s:?}");
        assert!((s.wasted_share - 0.5).abs() < 1e-9);
        // Calls counted by arrival: the first arrived before the window.
        assert_eq!((s.served, s.wasted), (1, 2));
        assert_eq!(s.queue_max, 996);
        assert_eq!(s.never_started, 1, "996 arrived and was still waiting");
    }
}
