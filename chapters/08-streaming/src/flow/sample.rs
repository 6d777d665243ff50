//! The samples: the state of the flow at one moment, the running peak of
//! bytes in flight, and the sampler that takes one every `report_every`
//! while the demo waits for something else.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use tokio::time::Instant;

use super::{Config, units::ms};
use crate::stats::MeterSnapshot;

/// The state of the flow at one moment.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub elapsed: Duration,
    /// The sender's meter: bytes handed to tonic, sends, waits.
    pub sent: MeterSnapshot,
    /// Bytes the reader has taken from tonic.
    pub consumed: u64,
    /// What happened at this moment, if it is not a regular sample.
    pub note: &'static str,
}

impl Sample {
    pub fn in_flight(&self) -> u64 {
        self.sent.bytes.saturating_sub(self.consumed)
    }

    pub const HEADER: &'static str =
        "     t    sent KiB  consumed KiB  in flight KiB  blocked sends  sender's latest send";

    pub fn line(&self) -> String {
        let latest = match self.sent.waiting_for {
            Some(w) => format!("waiting, {} so far", ms(w)),
            None if self.sent.last_wait.is_zero() => "did not wait".to_string(),
            None => format!("waited {}", ms(self.sent.last_wait)),
        };
        let note = if self.note.is_empty() {
            String::new()
        } else {
            format!("  <- {}", self.note)
        };
        format!(
            "{:>6.2}  {:>10.1}  {:>12.1}  {:>13.1}  {:>13}  {latest}{note}",
            self.elapsed.as_secs_f64(),
            self.sent.bytes as f64 / 1024.0,
            self.consumed as f64 / 1024.0,
            self.in_flight() as f64 / 1024.0,
            format!("{} of {}", self.sent.blocked_sends, self.sent.sends),
        )
    }

    pub const CSV_HEADER: &'static str =
        "t_s,sent_bytes,consumed_bytes,in_flight_bytes,sends,blocked_sends,last_wait_ms,waiting_ms";

    pub fn csv(&self) -> String {
        format!(
            "{:.3},{},{},{},{},{},{:.3},{}",
            self.elapsed.as_secs_f64(),
            self.sent.bytes,
            self.consumed,
            self.in_flight(),
            self.sent.sends,
            self.sent.blocked_sends,
            self.sent.last_wait.as_secs_f64() * 1000.0,
            self.sent
                .waiting_for
                .map(|w| format!("{:.3}", w.as_secs_f64() * 1000.0))
                .unwrap_or_default(),
        )
    }
}

/// The running maximum of bytes in flight. The maximum is reached just after
/// the sender hands over a message, or just before the reader takes one, so
/// whichever side runs in the client observes it there; samples do too.
#[derive(Default)]
pub(super) struct Peak(AtomicU64);

impl Peak {
    pub(super) fn observe(&self, sent: u64, consumed: u64) {
        self.0
            .fetch_max(sent.saturating_sub(consumed), Ordering::Relaxed);
    }

    pub(super) fn max(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Takes a [`Sample`] every `report_every`, while the demo waits for something.
pub(super) struct Sampler<'a, F, G> {
    ticker: tokio::time::Interval,
    take: F,
    peak: &'a Peak,
    samples: Vec<Sample>,
    on_sample: &'a mut G,
}

impl<'a, F: Fn() -> Sample, G: FnMut(&Sample)> Sampler<'a, F, G> {
    pub(super) fn new(
        config: &Config,
        started: Instant,
        take: F,
        peak: &'a Peak,
        on_sample: &'a mut G,
    ) -> Self {
        let mut ticker =
            tokio::time::interval_at(started + config.report_every, config.report_every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        Sampler {
            ticker,
            take,
            peak,
            samples: Vec::new(),
            on_sample,
        }
    }

    /// Samples on every tick until `until` resolves; returns its output.
    pub(super) async fn until<T>(&mut self, until: impl Future<Output = T>) -> T {
        tokio::pin!(until);
        loop {
            tokio::select! {
                out = &mut until => return out,
                _ = self.ticker.tick() => { self.note(""); }
            }
        }
    }

    pub(super) fn note(&mut self, note: &'static str) -> Sample {
        let sample = Sample {
            note,
            ..(self.take)()
        };
        self.peak.observe(sample.sent.bytes, sample.consumed);
        (self.on_sample)(&sample);
        self.samples.push(sample);
        if !note.is_empty() {
            // The next regular sample is a full period after this one.
            self.ticker.reset();
        }
        sample
    }

    /// Takes the last sample, once everything is over; returns every sample
    /// and the most bytes that were in flight at any moment.
    pub(super) fn finish(mut self) -> (Vec<Sample>, u64) {
        self.note("done");
        (self.samples, self.peak.max())
    }
}
