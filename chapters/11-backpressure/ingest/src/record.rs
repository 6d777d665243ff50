//! Everything the server does, on one monotonic clock, written as typed CSV
//! rows when the server stops (one per message in `messages.csv`, one per
//! timeline sample in `timeline.csv`, one per budget change in `budget.csv`)
//! and its parameters and totals in `server.json`. Chapters 11 and 12 read
//! them back through the same types.

use std::{sync::Mutex, time::Duration};

use harness::{
    RunMeta,
    records::{Growing, ms},
};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// One message's path through the server: a row of `messages.csv`. Times
/// are from the server's start. The two spans a reader wants most, queue
/// residence and service, are stored with it, so nobody recomputes them
/// differently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageRow {
    pub stream: u64,
    pub seq: u64,
    /// How long the handler waited for a reservation before asking for it.
    #[serde(rename = "admission_wait_ms", with = "ms")]
    pub admission_wait: Duration,
    #[serde(rename = "enqueued_ms", with = "ms")]
    pub enqueued: Duration,
    #[serde(rename = "dequeued_ms", with = "ms")]
    pub dequeued: Duration,
    /// Service starts as soon as the worker dequeues.
    #[serde(rename = "service_end_ms", with = "ms")]
    pub service_end: Duration,
    /// Enqueue to dequeue: the time spent waiting in the queue.
    #[serde(rename = "queue_ms", with = "ms")]
    pub queue: Duration,
    /// Dequeue to service end.
    #[serde(rename = "service_ms", with = "ms")]
    pub service: Duration,
    pub worker: usize,
}

impl MessageRow {
    /// Enqueue to dequeue: the time spent waiting in the queue.
    pub fn queue_residence(&self) -> Duration {
        self.queue
    }
}

/// The server's state at one instant: a row of `timeline.csv`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    #[serde(rename = "at_ms", with = "ms")]
    pub at: Duration,
    /// Messages in the queue.
    pub queued: usize,
    /// Queued plus reserved (`Q + R`); equal to `queued` when unbounded.
    pub pending: usize,
    /// The logical budget `B` (0 when unbounded).
    pub budget: usize,
    pub received: u64,
    pub processed: u64,
    /// Resident memory of the whole server process, KiB.
    pub rss_kib: u64,
}

/// Collects rows from the handler, the workers and the sampler.
#[derive(Debug)]
pub struct Recorder {
    pub clock: Instant,
    messages: Mutex<Vec<MessageRow>>,
    samples: Mutex<Vec<Sample>>,
    /// `timeline.csv` growing as the samples are taken, for a live view.
    growing: Mutex<Option<Growing<Sample>>>,
    /// Time the workers sat idle although a message was waiting, summed.
    idle_with_backlog: Mutex<Duration>,
}

impl Recorder {
    pub fn new(clock: Instant) -> Recorder {
        Recorder {
            clock,
            messages: Mutex::default(),
            samples: Mutex::default(),
            growing: Mutex::default(),
            idle_with_backlog: Mutex::default(),
        }
    }

    pub fn since_start(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.clock)
    }

    pub fn message(&self, row: MessageRow) {
        self.messages.lock().expect("recorder lock").push(row);
    }

    pub fn sample(&self, sample: Sample) {
        if let Some(growing) = &*self.growing.lock().expect("recorder lock") {
            growing.push(&sample);
        }
        self.samples.lock().expect("recorder lock").push(sample);
    }

    /// From now on, each sample is also written to `path` as it is taken.
    pub fn grow_timeline(&self, path: &std::path::Path) -> anyhow::Result<()> {
        *self.growing.lock().expect("recorder lock") = Some(Growing::create(path)?);
        Ok(())
    }

    /// Closes the growing timeline, before the whole one is written.
    pub fn finish_timeline(&self) -> anyhow::Result<()> {
        let growing = self.growing.lock().expect("recorder lock").take();
        growing.map_or(Ok(()), Growing::finish)
    }

    pub fn idle_with_backlog(&self, idle: Duration) {
        *self.idle_with_backlog.lock().expect("recorder lock") += idle;
    }

    pub fn messages(&self) -> Vec<MessageRow> {
        self.messages.lock().expect("recorder lock").clone()
    }

    pub fn samples(&self) -> Vec<Sample> {
        self.samples.lock().expect("recorder lock").clone()
    }

    pub fn idle_with_backlog_total(&self) -> Duration {
        *self.idle_with_backlog.lock().expect("recorder lock")
    }

    /// Over the messages served so far: their handlers' summed wait for a
    /// place, and the workers' summed service time.
    pub fn wait_and_service_totals(&self) -> (Duration, Duration) {
        let messages = self.messages.lock().expect("recorder lock");
        messages
            .iter()
            .fold((Duration::ZERO, Duration::ZERO), |(w, s), m| {
                (w + m.admission_wait, s + m.service)
            })
    }
}

/// A budget change: a row of `budget.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetRow {
    #[serde(rename = "at_ms", with = "ms")]
    pub at: Duration,
    pub from: usize,
    pub to: usize,
    pub reason: String,
}

impl BudgetRow {
    pub fn of(changes: &[(Duration, crate::admission::BudgetChange)]) -> Vec<BudgetRow> {
        changes
            .iter()
            .map(|(at, c)| BudgetRow {
                at: *at,
                from: c.from,
                to: c.to,
                reason: c.reason.clone(),
            })
            .collect()
    }
}

/// `server.json`: the server's settings and totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerSummary {
    pub meta: RunMeta,
    /// The queue policy, as the server ran it (`Reserve { capacity: 32, budget: 8 }`).
    pub policy: String,
    pub plan: String,
    pub workers: usize,
    pub sample_every_ms: f64,
    /// When the first call arrived (the plan's zero), ms after the server's
    /// start; `None` if no call came.
    pub epoch_ms: Option<f64>,
    pub processed: usize,
    pub max_queued: Option<usize>,
    pub max_pending: Option<usize>,
    pub rss_kib_first: Option<u64>,
    pub rss_kib_max: Option<u64>,
    pub idle_with_backlog_ms: f64,
}

/// The file names a server run leaves in its record folder.
pub const MESSAGES: &str = "messages.csv";
pub const TIMELINE: &str = "timeline.csv";
pub const BUDGET: &str = "budget.csv";
pub const SERVER: &str = "server.json";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_columns_are_stable() {
        let ms = Duration::from_millis;
        let row = MessageRow {
            stream: 1,
            seq: 7,
            admission_wait: ms(2),
            enqueued: ms(100),
            dequeued: ms(130),
            service_end: ms(170),
            queue: ms(30),
            service: ms(40),
            worker: 0,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("messages.csv");
        harness::records::write_csv(&path, std::slice::from_ref(&row)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(
                "stream,seq,admission_wait_ms,enqueued_ms,dequeued_ms,service_end_ms,queue_ms,service_ms,worker"
            )
        );
        assert_eq!(
            lines.next(),
            Some("1,7,2.000,100.000,130.000,170.000,30.000,40.000,0")
        );
        let sample = Sample {
            at: ms(50),
            queued: 3,
            pending: 4,
            budget: 8,
            received: 10,
            processed: 6,
            rss_kib: 2048,
        };
        assert_eq!(
            harness::records::read_csv::<MessageRow>(&path).unwrap(),
            [row]
        );
        let path = dir.path().join("timeline.csv");
        harness::records::write_csv(&path, &[sample]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap().lines().nth(1),
            Some("50.000,3,4,8,10,6,2048")
        );
    }
}
