//! `loadgen calibrate`: the generator against a call that does nothing.
//!
//! A send that starts after its due time is late for two reasons: the system
//! under test kept the generator waiting (a full stream, every place busy), or
//! the generator's own timer woke it late. Against a call that returns at
//! once only the second is left, so this run measures the instrument itself:
//! the floor under every lateness and every latency-from-due a chapter
//! reports, to be stated next to them.
//!
//! It drives [`run_bounded`] exactly as a real run does, spawning a task per
//! slot, so the CPU it reports per slot is the generator's own overhead. Each
//! rate runs once with each timer, one after the other, so the two are
//! compared on the same machine in the same minute.

use std::{sync::Arc, time::Duration};

use program::proc::{Pid, cpu_ns};
use serde::{Deserialize, Serialize};

use crate::{
    open_loop::{Counters, SlotRecord, WhenFull, run_bounded},
    pacing::Timer,
    schedule::Schedule,
    summary::{Percentiles, Summary},
};

/// Places for calls at once; a call that does nothing never needs many.
const MAX_IN_FLIGHT: usize = 64;

/// The generator at one rate, against a call that does nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub rate_per_s: f64,
    pub timer: Timer,
    pub slots: u64,
    /// From due to start, every slot: the generator's timing error.
    pub lateness: Percentiles,
    /// Slots that started more than 100 µs after they were due.
    pub late_over_100us: u64,
    /// CPU time of this whole process per slot, in microseconds.
    pub cpu_us_per_slot: f64,
}

impl Calibration {
    pub fn header() -> String {
        format!(
            "{:>8} {:>8} {:>7} {:>11} {:>11} {:>11} {:>16} {:>12}",
            "rate/s",
            "timer",
            "slots",
            "late p50",
            "late p99",
            "late max",
            "over 100 µs late",
            "CPU per slot"
        )
    }

    pub fn line(&self) -> String {
        let share = 100.0 * self.late_over_100us as f64 / self.slots.max(1) as f64;
        format!(
            "{:>8} {:>8} {:>7} {:>8.3} ms {:>8.3} ms {:>8.3} ms {:>7} ({:>5.1}%) {:>9.1} µs",
            self.rate_per_s,
            self.timer.to_string(),
            self.slots,
            self.lateness.p50_ms,
            self.lateness.p99_ms,
            self.lateness.max_ms,
            self.late_over_100us,
            share,
            self.cpu_us_per_slot,
        )
    }
}

/// One run per rate and timer, `duration` each, rates in the order given and
/// the timers in turn at each; returns each run's figures, and every slot's
/// record with `step` the run's position.
pub async fn calibrate(
    rates: &[f64],
    timers: &[Timer],
    duration: Duration,
    counters: Arc<Counters>,
) -> (Vec<Calibration>, Vec<SlotRecord>) {
    let (mut calibrations, mut all) = (Vec::new(), Vec::new());
    let runs = rates
        .iter()
        .flat_map(|&r| timers.iter().map(move |&t| (r, t)));
    for (step, (rate, timer)) in runs.enumerate() {
        let cpu_before = cpu_ns(Pid::This);
        let mut records = run_bounded(
            Schedule::constant(rate, duration),
            timer,
            MAX_IN_FLIGHT,
            WhenFull::Defer,
            Duration::from_secs(1),
            counters.clone(),
            |_| async { Ok(()) },
        )
        .await;
        let cpu = cpu_ns(Pid::This).saturating_sub(cpu_before);
        let summary = Summary::of(&records);
        let late_over_100us = records
            .iter()
            .filter_map(SlotRecord::lateness)
            .filter(|late| *late > Duration::from_micros(100))
            .count() as u64;
        let calibration = Calibration {
            rate_per_s: rate,
            timer,
            slots: summary.scheduled,
            lateness: summary.lateness,
            late_over_100us,
            cpu_us_per_slot: cpu as f64 / 1e3 / summary.scheduled.max(1) as f64,
        };
        calibrations.push(calibration);
        records.iter_mut().for_each(|r| r.step = step);
        all.append(&mut records);
    }
    (calibrations, all)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In virtual time the timer is exact: every slot is sent, none late.
    #[tokio::test(start_paused = true)]
    async fn every_slot_is_sent_once_and_counted() {
        let counters = Arc::new(Counters::default());
        let (calibrations, records) = calibrate(
            &[100.0, 1000.0],
            &[Timer::Tokio],
            Duration::from_secs(1),
            counters.clone(),
        )
        .await;
        let slots: Vec<u64> = calibrations.iter().map(|c| c.slots).collect();
        assert_eq!(slots, [100, 1000]);
        for (step, calibration) in calibrations.iter().enumerate() {
            let of_step = records.iter().filter(|r| r.step == step).count() as u64;
            assert_eq!(of_step, calibration.slots);
            assert_eq!(calibration.lateness.count, calibration.slots);
            assert_eq!(calibration.late_over_100us, 0);
        }
        assert_eq!(
            counters.line(),
            "due 1100 sent 1100 ok 1100 failed 0 skipped 0 shed 0 deferred 0"
        );
    }
}
