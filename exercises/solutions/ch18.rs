//! Chapter 18: the server's side of gRFC A8, counting ping strikes (the
//! solution).
//!
//! grpc-go's `handlePing` (internal/transport/http2_server.go) as a state
//! machine: its `lastPingAt`, `pingStrikes` and `resetPingStrikes`, which
//! its writer sets when it writes HEADERS or DATA. The chapter's IO layer
//! calls it as it reads each PING and writes each frame.

use tokio::time::Instant;

pub use crate::given::ch18::{NO_CALLS_MIN_TIME, PingPolicy, Verdict};

// ANCHOR: strikes
/// One connection's pings, as its server counts them against its policy.
#[derive(Debug)]
pub struct Strikes {
    policy: PingPolicy,
    /// When the last PING arrived; `None` before the first.
    last_ping: Option<Instant>,
    strikes: u32,
    /// HEADERS or DATA went out since the last PING.
    reset: bool,
}

impl Strikes {
    pub fn new(policy: PingPolicy) -> Strikes {
        Strikes {
            policy,
            last_ping: None,
            strikes: 0,
            reset: false,
        }
    }

    /// The server sent HEADERS or DATA: the next ping is forgiven.
    pub fn on_headers_or_data(&mut self) {
        self.reset = true;
    }

    /// A PING (not an ACK) arrived at `now` with `open_calls` calls open.
    pub fn on_ping(&mut self, now: Instant, open_calls: usize) -> Verdict {
        // Whatever follows, this ping is the last one the next is measured from.
        let last = self.last_ping.replace(now);
        if std::mem::take(&mut self.reset) {
            // The server has answered since the last ping: it is being used.
            self.strikes = 0;
            return Verdict::Pong;
        }
        let min_time = if open_calls == 0 && !self.policy.permit_without_calls {
            NO_CALLS_MIN_TIME
        } else {
            self.policy.min_time
        };
        // The first ping has nothing to be too close to.
        if last.is_some_and(|last| now.saturating_duration_since(last) < min_time) {
            self.strikes = self.strikes.saturating_add(1);
        }
        if self.strikes > self.policy.max_strikes {
            Verdict::GoAway
        } else {
            Verdict::Pong
        }
    }

    /// The strikes counted since the last forgiven ping.
    pub fn strikes(&self) -> u32 {
        self.strikes
    }
}
// ANCHOR_END: strikes
