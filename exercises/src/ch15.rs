//! Chapter 15: a delay line that keeps a byte stream in order.
//!
//! The delay proxy stamps each chunk it reads with the time it may leave.
//! This version adds the chunk's delay to the time it arrived, and nothing
//! else. Two rules are missing: a chunk must not overtake the one before it
//! (jitter gives each chunk a different delay, and TCP bytes cannot be
//! reordered), and nothing may leave before the connection is open for
//! sending (`opens_at`, one round trip after the accept, for the TCP
//! handshake the proxy's loopback accept skipped).
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch15`.

use std::time::Duration;

use tokio::time::Instant;

// ANCHOR: due
/// When a chunk that arrived at `arrived` may leave: `delay` is its one-way
/// delay (jitter included), `opens_at` the first moment anything may leave
/// on this connection, and `previous` when the chunk before it leaves.
pub fn due(arrived: Instant, delay: Duration, opens_at: Instant, previous: Instant) -> Instant {
    let _ = (opens_at, previous); // not used yet
    arrived + delay
}
// ANCHOR_END: due
