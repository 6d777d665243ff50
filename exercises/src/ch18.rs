//! Chapter 18: the server's side of gRFC A8, counting ping strikes.
//!
//! h2 answers every PING a client sends, however often: nothing in it counts
//! them. `Strikes` is the count a gRPC server keeps per connection (grpc-go's
//! `handlePing`), told of each PING and of each HEADERS or DATA the server
//! sends. This version records each ping and answers every one with a PING
//! ACK: no strike is ever counted, so a client that pings every 200 ms is
//! answered for ever. Make it keep A8's rule. A ping less than `min_time`
//! after the last one is a strike; with no call open and
//! `permit_without_calls` false, a ping less than [`NO_CALLS_MIN_TIME`] (two
//! hours) after the last one is. The first ping has no last one and is never
//! a strike. HEADERS or DATA sent since the last ping forgive the next ping
//! and every strike before it. The strike that takes the count over
//! `max_strikes`, and every one after, is answered with GOAWAY.
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch18`.

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
        let _ = (self.policy, self.last_ping, self.reset, open_calls); // not used yet
        self.last_ping = Some(now);
        Verdict::Pong
    }

    /// The strikes counted since the last forgiven ping.
    pub fn strikes(&self) -> u32 {
        self.strikes
    }
}
// ANCHOR_END: strikes
