//! When a slot's send may start: never before it is due, and as soon after
//! as the machine allows.
//!
//! Tokio's timer works at millisecond granularity (its documentation says
//! so): `sleep_until` rounds the deadline up to a millisecond tick, and the
//! task must still be scheduled after that, so a generator that waits with
//! it starts its sends about a millisecond late. Against a unary call that
//! takes a fraction of a millisecond, that error is larger than the effect
//! being measured (`loadgen calibrate` shows both timers side by side).
//!
//! [`Timer::Precise`] keeps the schedule on a thread of its own. The thread
//! asks the kernel for a high-resolution sleep that ends shortly before the
//! due time (with its timer slack lowered from Linux's default 50 µs, which
//! would otherwise let the kernel wake it that much later to coalesce
//! wake-ups), and spins the last stretch, giving its core away
//! (`yield_now`) whenever another thread is ready to run, so that the sends
//! keep the core at high rates, where the thread spins most of the time.
//! Handing a slot to the async side costs time too, mostly waking a parked
//! runtime thread, so the thread hands each slot over a little early and
//! the send's own task waits out the rest ([`Due::wait`]). At high rates
//! it does not: the runtime is seldom parked, and tasks waiting on its
//! threads would take CPU from the sends.
//!
//! [`Timer::Tokio`] remains for tests in virtual time (`tokio::time::pause`),
//! which a thread of real time cannot follow, and for comparison.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    thread,
    time::Duration,
};

use serde::{Deserialize, Serialize};
use tokio::{
    sync::mpsc,
    time::{Instant, sleep_until},
};

use crate::schedule::{Slot, Slots};

/// How the generator waits for each slot's due time.
#[derive(
    clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Timer {
    /// A timing thread: high-resolution sleep, then a short spin
    // Real time only: under a paused test clock a send's task would wait
    // for a due time that never comes.
    #[default]
    Precise,
    /// Tokio's timer (1 ms resolution; follows a paused test clock)
    Tokio,
}

impl std::fmt::Display for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Timer::Precise => "precise",
            Timer::Tokio => "tokio",
        })
    }
}

/// The slots of a run as they come due, in order.
pub struct Ticks<'a> {
    start: Instant,
    source: Source<'a>,
}

enum Source<'a> {
    Tokio(Slots<'a>),
    Thread {
        ticks: mpsc::UnboundedReceiver<Tick>,
        handoff: Arc<AtomicU64>,
    },
}

/// A slot handed over by the timing thread, and when it was handed over.
struct Tick {
    slot: Slot,
    sent: std::time::Instant,
}

/// A slot about to come due: [`Due::wait`] returns at its due time.
pub struct Due {
    pub slot: Slot,
    at: Instant,
    /// From the timing thread: when it handed the slot over, and where the
    /// hand-over time is reported.
    handed: Option<(std::time::Instant, Arc<AtomicU64>)>,
}

impl Timer {
    /// Starts the clock for `slots`, due at `start + slot.due`.
    pub fn ticks<'a>(self, start: Instant, slots: impl Into<Slots<'a>>) -> Ticks<'a> {
        let slots = slots.into();
        let source = match self {
            Timer::Tokio => Source::Tokio(slots),
            Timer::Precise => {
                let (tx, ticks) = mpsc::unbounded_channel();
                let handoff = Arc::new(AtomicU64::new(0));
                let clock = Clock {
                    start: start.into_std(),
                    slots: slots.into_owned(),
                    handoff: handoff.clone(),
                };
                thread::Builder::new()
                    .name("loadgen-timer".into())
                    .spawn(move || {
                        clock.keep_time(&tx);
                        TIMING_CPU_NS.fetch_add(program::proc::thread_cpu_ns(), Ordering::Relaxed);
                    })
                    .expect("the OS starts a thread");
                Source::Thread { ticks, handoff }
            }
        };
        Ticks { start, source }
    }
}

impl Ticks<'_> {
    /// The next slot, shortly before it is due (at its due time with
    /// [`Timer::Tokio`]); `None` after the last. A slot whose time has passed
    /// (the caller was busy) comes at once.
    pub async fn next(&mut self) -> Option<Due> {
        match &mut self.source {
            Source::Tokio(slots) => {
                let slot = slots.next()?;
                let at = self.start + slot.due;
                sleep_until(at).await;
                Some(Due {
                    slot,
                    at,
                    handed: None,
                })
            }
            Source::Thread { ticks, handoff } => {
                let Tick { slot, sent } = ticks.recv().await?;
                Some(Due {
                    slot,
                    at: self.start + slot.due,
                    handed: Some((sent, handoff.clone())),
                })
            }
        }
    }
}

impl Due {
    // ANCHOR: wait
    /// Returns at the slot's due time, never before. Run it where the send
    /// will run (in the send's own task): waking a parked runtime thread is
    /// most of the hand-over time, so it is measured here, and the timing
    /// thread hands each later slot over early by twice its average. Until the due
    /// time the task yields, so other tasks on its thread keep running.
    pub async fn wait(self) -> Slot {
        if let Some((sent, handoff)) = self.handed {
            let took = sent.elapsed().min(MAX_LEAD).as_nanos() as u64;
            let old = handoff.load(Ordering::Relaxed);
            handoff.store((old * 7 + took) / 8, Ordering::Relaxed);
            while Instant::now() < self.at {
                tokio::task::yield_now().await;
            }
        }
        self.slot
    }
    // ANCHOR_END: wait
}

/// CPU time spent by every timing thread of this process that has ended, in
/// nanoseconds. A thread adds its own when its schedule ends, before the last
/// [`Ticks::next`] returns `None`.
static TIMING_CPU_NS: AtomicU64 = AtomicU64::new(0);

/// The CPU time the precise timer's threads have spent so far, all of it
/// sleeping or spinning to keep time: subtracted from the process's CPU time,
/// what is left is the sends' (chapter 14 does that).
pub fn timing_cpu_ns() -> u64 {
    TIMING_CPU_NS.load(Ordering::Relaxed)
}

/// The spin before a due time is never shorter than this, nor longer than
/// `MAX_SPIN`; in between it is twice the sleeps' recent oversleep.
const MIN_SPIN: Duration = Duration::from_micros(50);
const MAX_SPIN: Duration = Duration::from_micros(1000);
/// The most a slot is handed over early, and so the longest a send's task
/// waits for its due time.
const MAX_LEAD: Duration = Duration::from_micros(300);

/// What the timing thread keeps: the schedule, and the async side's recent
/// hand-over time (ns), which it writes and this thread reads.
struct Clock {
    start: std::time::Instant,
    slots: Slots<'static>,
    handoff: Arc<AtomicU64>,
}

impl Clock {
    // ANCHOR: keep_time
    /// Hands each slot to `due` a little before it is due, by twice the
    /// recent hand-over time (the send's task waits out the rest, in
    /// [`Due::wait`]), or at its due time where slots come close together.
    /// Ends after the last slot, or as soon as nobody listens.
    fn keep_time(self, due: &mpsc::UnboundedSender<Tick>) {
        #[cfg(target_os = "linux")]
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1)); // 1 ns
        // How late the kernel wakes this thread, averaged: the spin covers it.
        let mut oversleep = Duration::from_micros(50);
        let mut previous = Duration::ZERO;
        for slot in self.slots {
            let spin = (oversleep * 2).clamp(MIN_SPIN, MAX_SPIN);
            // Twice the average, so that most hand-overs fit in it; none where
            // slots come closer together than four spins. There the sends'
            // tasks would spend the gaps waiting on the runtime's threads, on
            // the CPU that the sends themselves need, and a runtime that busy
            // is seldom parked, so handing a slot over takes little time.
            let dense = slot.due.saturating_sub(previous) < spin * 4;
            previous = slot.due;
            let lead = if dense {
                Duration::ZERO
            } else {
                (Duration::from_nanos(self.handoff.load(Ordering::Relaxed)) * 2).min(MAX_LEAD)
            };
            let at = (self.start + slot.due)
                .checked_sub(lead)
                .unwrap_or(self.start);
            let now = std::time::Instant::now();
            if at > now + spin {
                let wake = at - spin;
                thread::sleep(wake - now);
                let late = std::time::Instant::now().saturating_duration_since(wake);
                oversleep = (oversleep * 7 + late) / 8;
            }
            while std::time::Instant::now() < at {
                thread::yield_now();
            }
            let sent = std::time::Instant::now();
            if due.send(Tick { slot, sent }).is_err() {
                return; // the run is over
            }
        }
    }
    // ANCHOR_END: keep_time
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Schedule;

    /// In real time: every slot arrives once, in order, and none before it is due.
    #[tokio::test]
    async fn precise_ticks_come_in_order_and_never_early() {
        let schedule = Schedule::constant(2000.0, Duration::from_millis(100));
        let spent_before = timing_cpu_ns();
        let start = Instant::now();
        let mut ticks = Timer::Precise.ticks(start, &schedule);
        let mut seen = Vec::new();
        while let Some(due) = ticks.next().await {
            let slot = due.wait().await;
            let now = Instant::now();
            assert!(now >= start + slot.due, "slot {} early", slot.index);
            seen.push(slot.index);
        }
        assert_eq!(seen, (0..schedule.count()).collect::<Vec<_>>());
        assert!(
            timing_cpu_ns() > spent_before,
            "the ended thread's CPU time is counted"
        );
    }

    /// Nobody listening ends the thread at its next slot, not at the end of
    /// the schedule (30 s here).
    #[tokio::test]
    async fn a_dropped_clock_stops_its_thread() {
        let clock = Clock {
            start: std::time::Instant::now(),
            slots: Schedule::constant(2.0, Duration::from_secs(30)).into(),
            handoff: Arc::default(),
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let timer = thread::spawn(move || clock.keep_time(&tx));
        assert!(rx.recv().await.is_some());
        drop(rx);
        let joined = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::task::spawn_blocking(move || timer.join()),
        )
        .await;
        assert!(joined.is_ok(), "the timing thread kept going");
    }
}
