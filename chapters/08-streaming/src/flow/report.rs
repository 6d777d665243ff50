//! What one run measured, and how it reads: the [`Report`], how the call
//! ended, and the summary printed under the samples.

use std::{fmt::Write as _, time::Duration};

use super::{
    Config, Sample, kib, library_margin, size,
    units::{ms, signed_kib},
};

/// How the call ended.
#[derive(Clone, Debug)]
pub enum Ending {
    /// Upload: the sender closed its side and the reader took everything.
    Drained {
        after: Duration,
        server_chunks: u64,
        server_bytes: u64,
    },
    /// The client cancelled the call (a download always ends so; an upload
    /// when draining took longer than `drain_limit`). `cleaned_up_after` is
    /// how long the server took to have no open stream and no live task.
    Cancelled { cleaned_up_after: Option<Duration> },
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct Report {
    pub config: Config,
    pub samples: Vec<Sample>,
    /// The sample taken when the sender stopped sending.
    pub at_stop: Sample,
    /// The largest number of bytes in flight at any moment.
    pub peak_in_flight: u64,
    pub ending: Ending,
    /// The server's counters at the very end.
    pub server_open_streams: u64,
    pub server_live_tasks: u64,
}

impl Report {
    /// The last sample, taken when everything was over.
    pub fn last(&self) -> &Sample {
        self.samples.last().unwrap_or(&self.at_stop)
    }

    /// The sender's and the reader's average rates, in bytes per second, over
    /// the second half of the sending time, long after the window filled.
    pub fn late_rates(&self) -> Option<(f64, f64)> {
        let half = self.at_stop.elapsed / 2;
        let from = self.samples.iter().find(|s| s.elapsed >= half)?;
        let span = self
            .at_stop
            .elapsed
            .checked_sub(from.elapsed)?
            .as_secs_f64();
        (span > 0.0).then(|| {
            (
                (self.at_stop.sent.bytes - from.sent.bytes) as f64 / span,
                (self.at_stop.consumed - from.consumed) as f64 / span,
            )
        })
    }

    pub fn summary(&self) -> String {
        let c = &self.config;
        let s = &self.last().sent;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "sender: stopped after {:.2} s; {} messages ({}) handed to tonic; {} of {} sends found the queue full and waited, the longest {}",
            self.at_stop.elapsed.as_secs_f64(),
            s.messages,
            size(s.bytes),
            s.blocked_sends,
            s.sends,
            ms(s.longest_wait),
        );
        if let Some((send, read)) = self.late_rates() {
            let _ = writeln!(
                out,
                "rates over the second half of the sending time: sender {}/s, reader {}/s",
                size(send as u64),
                size(read as u64),
            );
        }
        let window = c.effective_window();
        let margin = library_margin(c.message_wire());
        let _ = writeln!(
            out,
            "peak in flight: {} = window {} + {}",
            kib(self.peak_in_flight),
            kib(window),
            signed_kib(self.peak_in_flight as i64 - window as i64),
        );
        let _ = writeln!(
            out,
            "bound: window + library buffers = {} + {} = {} (messages of {} on the wire)",
            kib(window),
            kib(margin),
            kib(c.bound()),
            kib(c.message_wire()),
        );
        match &self.ending {
            Ending::Drained {
                after,
                server_chunks,
                server_bytes,
            } => {
                let _ = writeln!(
                    out,
                    "end: the sender closed its side; the reader needed {:.2} s more to take the {} still in flight",
                    after.as_secs_f64(),
                    kib(self.at_stop.in_flight()),
                );
                let _ = writeln!(
                    out,
                    "server's UploadSummary: {server_chunks} chunks, {} of data (sent: {} chunks, {} of data)",
                    size(*server_bytes),
                    s.messages,
                    size(s.messages * u64::from(c.message_bytes)),
                );
            }
            Ending::Cancelled { cleaned_up_after } => {
                let _ = writeln!(
                    out,
                    "end: the client cancelled the call (RST_STREAM) with {} in flight, which was discarded",
                    kib(self.at_stop.in_flight()),
                );
                let _ = match cleaned_up_after {
                    Some(t) => writeln!(
                        out,
                        "server: no open stream and no live task {} after the cancel",
                        ms(*t),
                    ),
                    None => writeln!(out, "server: still holding a stream or task at the end!"),
                };
            }
        }
        let _ = write!(
            out,
            "server counters at the end: {} open streams, {} live producer tasks",
            self.server_open_streams, self.server_live_tasks,
        );
        out
    }
}
