//! Noticing that a call ended before its reply was ready.
//!
//! In async Rust a server does not poll "is my client still there?": when hyper
//! learns that a call is over (an HTTP/2 RST_STREAM, a closed connection), or
//! the server's timer for the call's `grpc-timeout` runs out
//! ([`crate::spec_codes`]), the handler's future is dropped. Whatever the
//! handler was awaiting stops right there. A [`CallGuard`] held across those
//! awaits sees the drop, and so the server can log and count the calls that
//! ended early. Work that never awaits (a long CPU loop) would not
//! be stopped this way; it would need to check for itself.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use tonic::{codegen::http, metadata::MetadataMap};
use tracing::{debug, info};

/// Counters for one service's calls. Tests read them; so does chapter 10.
#[derive(Debug, Default)]
pub struct CallStats {
    /// Calls that reached the slow part of the handler.
    pub started: AtomicU64,
    /// Calls whose reply was ready.
    pub completed: AtomicU64,
    /// Calls that ended (cancel, deadline, disconnect) before their reply was ready.
    pub ended_early: AtomicU64,
    /// Calls in the slow part right now.
    pub in_flight: AtomicU64,
}

impl CallStats {
    /// Marks the start of a call's work. `deadline`, when the caller sent one,
    /// lets the log say whether the deadline or the client ended the call.
    pub fn start(self: &Arc<Self>, what: &'static str, deadline: Option<Duration>) -> CallGuard {
        self.started.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        CallGuard {
            stats: self.clone(),
            what,
            started,
            deadline: deadline.map(|d| started + d),
            done: false,
        }
    }

    pub fn ended_early(&self) -> u64 {
        self.ended_early.load(Ordering::Relaxed)
    }
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }
}

/// Held while a call works; see the module documentation.
#[must_use = "dropping the guard at once would count the call as ended early"]
pub struct CallGuard {
    stats: Arc<CallStats>,
    what: &'static str,
    started: Instant,
    deadline: Option<Instant>,
    done: bool,
}

impl CallGuard {
    /// The reply is ready; the call did not end early.
    pub fn finish(mut self) {
        self.done = true;
        self.stats.completed.fetch_add(1, Ordering::Relaxed);
        debug!(
            call = self.what,
            elapsed_ms = self.started.elapsed().as_millis() as u64,
            "reply ready"
        );
    }
}

// ANCHOR: guard_drop
impl Drop for CallGuard {
    fn drop(&mut self) {
        self.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
        if self.done {
            return;
        }
        self.stats.ended_early.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let ran_ms = ms(now - self.started);
        match self.deadline {
            Some(deadline) if now >= deadline => info!(
                call = self.what,
                ran_ms,
                noticed_after_deadline_ms = ms(now - deadline),
                "deadline passed; work stopped"
            ),
            Some(deadline) => info!(
                call = self.what,
                ran_ms,
                deadline_left_ms = ms(deadline - now),
                "client cancelled before its deadline; work stopped"
            ),
            None => info!(call = self.what, ran_ms, "client went away; work stopped"),
        }
    }
}
// ANCHOR_END: guard_drop

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 10_000.0).round() / 10.0
}

/// The time the caller allowed for this call, from its `grpc-timeout` header
/// (`<up to 8 digits><unit>`, with unit H, M, S, m, u or n). Measured from when
/// the server read the header, so it is a little generous: the request spent
/// some of the caller's time on the way here.
pub fn grpc_timeout(metadata: &MetadataMap) -> Option<Duration> {
    let value = metadata.get("grpc-timeout")?.to_str().ok()?;
    parse_grpc_timeout(value)
}

/// [`grpc_timeout`], read from a request's HTTP headers, for a tower layer
/// that sees the request before tonic has made metadata of them. It accepts
/// exactly what tonic's own timer accepts, so the two agree on every call.
pub fn grpc_timeout_header(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    parse_grpc_timeout(value)
}

fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_grpc_timeout_unit() {
        assert_eq!(parse_grpc_timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_grpc_timeout("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse_grpc_timeout("1S"), Some(Duration::from_secs(1)));
        assert_eq!(parse_grpc_timeout("499m"), Some(Duration::from_millis(499)));
        assert_eq!(parse_grpc_timeout("250u"), Some(Duration::from_micros(250)));
        assert_eq!(
            parse_grpc_timeout("99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
    }

    #[test]
    fn rejects_malformed_grpc_timeouts() {
        for bad in ["", "m", "5", "5x", "-5m", "123456789m", "1.5S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn counts_finished_and_dropped_calls() {
        let stats = Arc::new(CallStats::default());
        stats.start("test", None).finish();
        drop(stats.start("test", Some(Duration::from_secs(60))));
        drop(stats.start("test", Some(Duration::ZERO)));
        assert_eq!(stats.completed(), 1);
        assert_eq!(stats.ended_early(), 2);
        assert_eq!(stats.in_flight(), 0);
        assert_eq!(stats.started.load(Ordering::Relaxed), 3);
    }
}
