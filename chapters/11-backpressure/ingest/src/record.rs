//! Everything the server does, on one monotonic clock, written as CSV when the
//! server stops: one row per message, one row per timeline sample, one row per
//! budget change, and the run's parameters and totals as JSON.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    sync::Mutex,
    time::Duration,
};

use serde::Serialize;
use tokio::time::Instant;

/// One message's path through the server. Times are from the server's start.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageRow {
    pub stream: u64,
    pub seq: u64,
    /// How long the handler waited for a reservation before asking for it.
    pub admission_wait: Duration,
    pub enqueued: Duration,
    pub dequeued: Duration,
    /// Service starts as soon as the worker dequeues; it ends after `service`.
    pub service_end: Duration,
    pub worker: usize,
}

impl MessageRow {
    /// Enqueue to dequeue: the time spent waiting in the queue.
    pub fn queue_residence(&self) -> Duration {
        self.dequeued - self.enqueued
    }
}

/// The server's state at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
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
    /// Time the workers sat idle although a message was waiting, summed.
    idle_with_backlog: Mutex<Duration>,
}

impl Recorder {
    pub fn new(clock: Instant) -> Recorder {
        Recorder {
            clock,
            messages: Mutex::default(),
            samples: Mutex::default(),
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
        self.samples.lock().expect("recorder lock").push(sample);
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
}

/// The files one server run leaves behind.
pub struct RunFiles {
    pub messages: PathBuf,
    pub timeline: PathBuf,
    pub budget: PathBuf,
    pub run: PathBuf,
}

impl RunFiles {
    pub fn in_dir(dir: &Path) -> RunFiles {
        RunFiles {
            messages: dir.join("messages.csv"),
            timeline: dir.join("timeline.csv"),
            budget: dir.join("budget.csv"),
            run: dir.join("server.json"),
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

/// `stream,seq,admission_wait_ms,enqueued_ms,dequeued_ms,service_end_ms,queue_ms,service_ms,worker`
pub fn messages_csv(rows: &[MessageRow]) -> String {
    let mut out = String::from(
        "stream,seq,admission_wait_ms,enqueued_ms,dequeued_ms,service_end_ms,queue_ms,service_ms,worker\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{}",
            r.stream,
            r.seq,
            ms(r.admission_wait),
            ms(r.enqueued),
            ms(r.dequeued),
            ms(r.service_end),
            ms(r.queue_residence()),
            ms(r.service_end - r.dequeued),
            r.worker
        );
    }
    out
}

/// `at_ms,queued,pending,budget,received,processed,rss_kib`
pub fn timeline_csv(samples: &[Sample]) -> String {
    let mut out = String::from("at_ms,queued,pending,budget,received,processed,rss_kib\n");
    for s in samples {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{}",
            ms(s.at),
            s.queued,
            s.pending,
            s.budget,
            s.received,
            s.processed,
            s.rss_kib
        );
    }
    out
}

/// `at_ms,from,to,reason`
pub fn budget_csv(changes: &[(Duration, crate::admission::BudgetChange)]) -> String {
    let mut out = String::from("at_ms,from,to,reason\n");
    for (at, c) in changes {
        let _ = writeln!(
            out,
            "{},{},{},{}",
            ms(*at),
            c.from,
            c.to,
            c.reason.replace(',', ";")
        );
    }
    out
}

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
            worker: 0,
        };
        let text = messages_csv(&[row]);
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
            timeline_csv(&[sample]).lines().nth(1),
            Some("50.000,3,4,8,10,6,2048")
        );
    }
}
