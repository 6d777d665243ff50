//! Two ways to keep a schedule when the system under test cannot keep up.
//!
//! - [`run_skipping`]: one sender, one send at a time. A slot that comes due
//!   while the previous send is still blocked is *skipped*: recorded, never
//!   sent later. This is the seed's rule for a single stream, where sends
//!   cannot overlap; catching up afterwards would turn a stall into a burst.
//! - [`run_bounded`]: independent calls, at most `max_in_flight` at once. A
//!   slot that finds them all busy is either *deferred* (waits for a free
//!   place, and its lateness is counted) or *shed* (recorded, never sent).
//!
//! Either way every slot of the schedule ends up in exactly one record, and a
//! call's latency is measured from when it was *due*, not from when it was
//! finally sent: waiting for a place is part of what the caller experienced.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use harness::records::{Growing, ms, opt_ms};
use serde::{Deserialize, Serialize};
use tokio::{
    sync::Semaphore,
    task::JoinSet,
    time::{Instant, timeout},
};

use crate::{
    pacing::Timer,
    schedule::{Slot, Slots},
};

/// What became of one slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Sent, and the send (or call) succeeded.
    Ok,
    /// Sent, and the send (or call) failed; `code` says how.
    Failed,
    /// Came due while the single sender was still blocked; never sent.
    Skipped,
    /// Found `max_in_flight` calls busy under [`WhenFull::Shed`]; never sent.
    Shed,
    /// Not sent because an earlier failure ended the run (a broken stream).
    Aborted,
    /// Still running when the run's drain limit ran out; cancelled.
    Unfinished,
}

/// One slot's story, and one row of `sends.csv`. Times are from the start of
/// the run, on one monotonic clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotRecord {
    pub index: u64,
    pub step: usize,
    /// When the schedule said the send should start.
    #[serde(rename = "due_ms", with = "ms")]
    pub due: Duration,
    /// When it did start, and when it finished: empty for a slot never sent.
    #[serde(rename = "started_ms", with = "opt_ms")]
    pub started: Option<Duration>,
    #[serde(rename = "ended_ms", with = "opt_ms")]
    pub ended: Option<Duration>,
    pub outcome: Outcome,
    /// Waited for a free place before it could start (bounded runs only).
    pub deferred: bool,
    /// Why a failed send failed (a gRPC code name, or the sender's words).
    pub code: Option<String>,
}

impl SlotRecord {
    fn not_sent(slot: Slot, outcome: Outcome) -> SlotRecord {
        SlotRecord {
            index: slot.index,
            step: slot.step,
            due: slot.due,
            started: None,
            ended: None,
            outcome,
            deferred: false,
            code: None,
        }
    }

    /// From due to done: what the caller experienced, waiting included.
    pub fn latency(&self) -> Option<Duration> {
        Some(self.ended? - self.due)
    }

    /// From the send's start to its end: how long the sender was blocked.
    pub fn send_duration(&self) -> Option<Duration> {
        Some(self.ended? - self.started?)
    }

    /// From due to start: the generator's own timing error, or a deferral.
    pub fn lateness(&self) -> Option<Duration> {
        Some(self.started? - self.due)
    }
}

/// Why one send failed. A `fatal` failure (the stream is gone) ends the run:
/// the slots left are recorded as [`Outcome::Aborted`] instead of being tried
/// against something that cannot work.
#[derive(Debug, Clone, PartialEq)]
pub struct SendError {
    pub code: String,
    pub fatal: bool,
}

/// Running totals, readable while the run goes on (for a progress line).
#[derive(Debug, Default)]
pub struct Counters {
    pub due: AtomicU64,
    pub sent: AtomicU64,
    pub ok: AtomicU64,
    pub failed: AtomicU64,
    pub skipped: AtomicU64,
    pub shed: AtomicU64,
    pub deferred: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// `due 800 sent 640 ok 640 failed 0 skipped 160 shed 0 deferred 0`
    pub fn line(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "due {} sent {} ok {} failed {} skipped {} shed {} deferred {}",
            get(&self.due),
            get(&self.sent),
            get(&self.ok),
            get(&self.failed),
            get(&self.skipped),
            get(&self.shed),
            get(&self.deferred)
        )
    }

    fn finished(&self, result: &Result<(), SendError>) {
        match result {
            Ok(()) => Counters::add(&self.ok),
            Err(_) => Counters::add(&self.failed),
        }
    }
}

// ANCHOR: skipping
/// One send at a time, at the scheduled times; slots that come due while a
/// send is blocked are skipped, never caught up. Each record is also written
/// to `growing`, if given, as the slot ends (a live view reads it).
pub async fn run_skipping<'a, F, Fut>(
    slots: impl Into<Slots<'a>>,
    timer: Timer,
    counters: &Counters,
    growing: Option<&Growing<SlotRecord>>,
    mut send: F,
) -> Vec<SlotRecord>
where
    F: FnMut(Slot) -> Fut,
    Fut: Future<Output = Result<(), SendError>>,
{
    let slots = slots.into();
    let start = Instant::now();
    let mut ticks = timer.ticks(start, slots.clone());
    let mut free_since = start;
    let mut records = Vec::with_capacity(slots.len());
    let keep = |records: &mut Vec<SlotRecord>, record: SlotRecord| {
        if let Some(growing) = growing {
            growing.push(&record);
        }
        records.push(record);
    };
    while let Some(due) = ticks.next().await {
        let slot = due.slot;
        Counters::add(&counters.due);
        // Due while the previous send was still blocked: skipped. Sending it
        // now would be catching up, a burst the schedule never asked for.
        if start + slot.due < free_since {
            Counters::add(&counters.skipped);
            keep(&mut records, SlotRecord::not_sent(slot, Outcome::Skipped));
            continue;
        }
        due.wait().await;
        let started = Instant::now();
        Counters::add(&counters.sent);
        let result = send(slot).await;
        free_since = Instant::now();
        counters.finished(&result);
        let broken = matches!(&result, Err(e) if e.fatal);
        keep(
            &mut records,
            SlotRecord {
                started: Some(started - start),
                ended: Some(free_since - start),
                ..record(slot, result)
            },
        );
        if broken {
            break;
        }
    }
    // After a fatal failure, the rest of the schedule is never tried.
    for slot in slots.skip(records.len()) {
        keep(&mut records, SlotRecord::not_sent(slot, Outcome::Aborted));
    }
    records
}
// ANCHOR_END: skipping

fn record(slot: Slot, result: Result<(), SendError>) -> SlotRecord {
    let (outcome, code) = match result {
        Ok(()) => (Outcome::Ok, None),
        Err(e) => (Outcome::Failed, Some(e.code)),
    };
    SlotRecord {
        outcome,
        code,
        ..SlotRecord::not_sent(slot, outcome)
    }
}

/// What a bounded run does with a slot that finds every place busy.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenFull {
    /// Wait for a free place; the wait counts in the call's latency
    Defer,
    /// Do not send it; count it as shed
    Shed,
}

/// Independent calls at the scheduled times, at most `max_in_flight` at once.
/// After the last slot, calls still running get `drain` to finish; the rest
/// are cancelled and recorded as [`Outcome::Unfinished`], so a run always ends.
pub async fn run_bounded<'a, F, Fut>(
    slots: impl Into<Slots<'a>>,
    timer: Timer,
    max_in_flight: usize,
    when_full: WhenFull,
    drain: Duration,
    counters: Arc<Counters>,
    call: F,
) -> Vec<SlotRecord>
where
    F: Fn(Slot) -> Fut,
    Fut: Future<Output = Result<(), SendError>> + Send + 'static,
{
    let slots = slots.into();
    let start = Instant::now();
    let mut ticks = timer.ticks(start, slots.clone());
    let places = Arc::new(Semaphore::new(max_in_flight.max(1)));
    let mut records = Vec::with_capacity(slots.len());
    let mut running = JoinSet::new();
    while let Some(due) = ticks.next().await {
        let slot = due.slot;
        Counters::add(&counters.due);
        let (place, deferred) = match places.clone().try_acquire_owned() {
            Ok(place) => (place, false),
            Err(_) if when_full == WhenFull::Shed => {
                Counters::add(&counters.shed);
                records.push(SlotRecord::not_sent(slot, Outcome::Shed));
                continue;
            }
            Err(_) => {
                Counters::add(&counters.deferred);
                let place = places.clone().acquire_owned().await.expect("never closed");
                (place, true)
            }
        };
        Counters::add(&counters.sent);
        let call = call(slot);
        let counters = counters.clone();
        running.spawn(async move {
            // The send starts in its own task, on whichever thread runs it:
            // a busy runtime's delay is part of the lateness.
            due.wait().await;
            let started = Instant::now() - start;
            let result = call.await;
            drop(place);
            counters.finished(&result);
            SlotRecord {
                started: Some(started),
                ended: Some(Instant::now() - start),
                deferred,
                ..record(slot, result)
            }
        });
        // Keep the set small: collect calls that are already done.
        while let Some(done) = running.try_join_next() {
            records.push(done.expect("calls do not panic"));
        }
    }
    let drained = timeout(drain, async {
        while let Some(done) = running.join_next().await {
            records.push(done.expect("calls do not panic"));
        }
    })
    .await;
    if drained.is_err() {
        running.abort_all();
        while let Some(done) = running.join_next().await {
            if let Ok(r) = done {
                records.push(r);
            }
        }
        let seen: std::collections::HashSet<u64> = records.iter().map(|r| r.index).collect();
        for slot in slots.filter(|s| !seen.contains(&s.index)) {
            records.push(SlotRecord::not_sent(slot, Outcome::Unfinished));
        }
    }
    records.sort_by_key(|r| r.index);
    records
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Schedule;
    use tokio::time::sleep;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// 10 slots 100 ms apart; the send of slot 2 blocks for 350 ms, so slots
    /// 3, 4 and 5 (due at 300, 400, 500 ms, before it ends at 550) are
    /// skipped, and slot 6 is sent on time, not early to catch up.
    #[tokio::test(start_paused = true)]
    async fn skipped_slots_are_never_caught_up() {
        let slots = Schedule::constant(10.0, Duration::from_secs(1)).slots();
        let counters = Counters::default();
        let records = run_skipping(&slots, Timer::Tokio, &counters, None, |slot| async move {
            sleep(if slot.index == 2 { ms(350) } else { ms(1) }).await;
            Ok(())
        })
        .await;
        let skipped: Vec<u64> = records
            .iter()
            .filter(|r| r.outcome == Outcome::Skipped)
            .map(|r| r.index)
            .collect();
        assert_eq!(skipped, [3, 4, 5]);
        assert_eq!(records[6].started, Some(ms(600)));
        assert_eq!(records[2].send_duration(), Some(ms(350)));
        assert_eq!(
            counters.line(),
            "due 10 sent 7 ok 7 failed 0 skipped 3 shed 0 deferred 0"
        );
    }

    /// Slots made as they come due (the schedule itself, not a list): those
    /// after the failure still get their record.
    #[tokio::test(start_paused = true)]
    async fn a_fatal_failure_aborts_the_rest() {
        let records = run_skipping(
            Schedule::constant(10.0, Duration::from_secs(1)),
            Timer::Tokio,
            &Counters::default(),
            None,
            |slot| async move {
                match slot.index {
                    4 => Err(SendError {
                        code: "stream closed".into(),
                        fatal: true,
                    }),
                    _ => Ok(()),
                }
            },
        )
        .await;
        assert_eq!(records.len(), 10);
        assert_eq!(records[4].outcome, Outcome::Failed);
        assert_eq!(records[4].code.as_deref(), Some("stream closed"));
        assert!(records[5..].iter().all(|r| r.outcome == Outcome::Aborted));
    }

    /// Calls take 250 ms, 2 places, a slot every 100 ms: at most 2 run at once.
    #[tokio::test(start_paused = true)]
    async fn bounded_runs_shed_or_defer_what_does_not_fit() {
        let slots = Schedule::constant(10.0, Duration::from_secs(1)).slots();
        for when_full in [WhenFull::Shed, WhenFull::Defer] {
            let counters = Arc::new(Counters::default());
            let records = run_bounded(
                &slots,
                Timer::Tokio,
                2,
                when_full,
                ms(5000),
                counters.clone(),
                |_| async {
                    sleep(ms(250)).await;
                    Ok(())
                },
            )
            .await;
            assert_eq!(records.len(), 10);
            let count = |o: Outcome| records.iter().filter(|r| r.outcome == o).count();
            if when_full == WhenFull::Shed {
                // 0 and 1 run; 2 is shed; 3 runs (0 ended at 250); 4 runs
                // (1 ended at 350); 5 is shed; and so on.
                assert_eq!(count(Outcome::Shed), 3, "{records:#?}");
                assert_eq!(count(Outcome::Ok), 7);
                assert!(records.iter().all(|r| !r.deferred));
            } else {
                assert_eq!(count(Outcome::Ok), 10);
                let deferred = records.iter().filter(|r| r.deferred).count() as u64;
                assert!(deferred >= 4, "{records:#?}");
                assert_eq!(deferred, counters.deferred.load(Ordering::Relaxed));
                // Waiting for a place is part of the latency.
                let last = records.last().unwrap();
                assert!(last.lateness().unwrap() > Duration::ZERO);
                assert!(last.latency().unwrap() >= last.lateness().unwrap() + ms(250));
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn calls_that_outlive_the_drain_limit_are_recorded_unfinished() {
        let records = run_bounded(
            Schedule::constant(10.0, Duration::from_millis(300)),
            Timer::Tokio,
            8,
            WhenFull::Shed,
            ms(100),
            Arc::new(Counters::default()),
            |slot| async move {
                sleep(if slot.index == 1 { ms(10_000) } else { ms(10) }).await;
                Ok(())
            },
        )
        .await;
        let outcomes: Vec<Outcome> = records.iter().map(|r| r.outcome).collect();
        assert_eq!(outcomes, [Outcome::Ok, Outcome::Unfinished, Outcome::Ok]);
    }

    /// Every slot of a ramp, made as it comes due, ends in exactly one
    /// record, in order and in its step, whatever became of it.
    #[tokio::test(start_paused = true)]
    async fn every_slot_of_a_ramp_gets_one_record() {
        let schedule = Schedule {
            steps: ["20/s:1s", "50/s:1s", "100/s:500ms"]
                .map(|s| s.parse().unwrap())
                .to_vec(),
        };
        let expected: Vec<(u64, usize, Duration)> = schedule
            .iter()
            .map(|slot| (slot.index, slot.step, slot.due))
            .collect();
        let shape = |records: &[SlotRecord]| -> Vec<(u64, usize, Duration)> {
            records.iter().map(|r| (r.index, r.step, r.due)).collect()
        };
        // A send blocks 35 ms: some slots of the faster steps are skipped.
        let counters = Counters::default();
        let records = run_skipping(&schedule, Timer::Tokio, &counters, None, |_| async {
            sleep(ms(35)).await;
            Ok(())
        })
        .await;
        assert_eq!(shape(&records), expected);
        assert!(records.iter().any(|r| r.outcome == Outcome::Skipped));
        assert_eq!(counters.due.load(Ordering::Relaxed), schedule.count());
        // At most 2 calls of 100 ms at once: some are shed, or deferred.
        for when_full in [WhenFull::Shed, WhenFull::Defer] {
            let counters = Arc::new(Counters::default());
            let records = run_bounded(
                &schedule,
                Timer::Tokio,
                2,
                when_full,
                ms(5000),
                counters.clone(),
                |_| async {
                    sleep(ms(100)).await;
                    Ok(())
                },
            )
            .await;
            assert_eq!(shape(&records), expected, "{when_full:?}");
            assert_eq!(counters.due.load(Ordering::Relaxed), schedule.count());
        }
    }
}
