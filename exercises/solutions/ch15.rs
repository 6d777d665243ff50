//! Chapter 15: a delay line that keeps a byte stream in order (the solution).
//!
//! A chunk leaves one delay after it could first have been sent, which is
//! when it arrived or, early in a connection, when the handshake's round
//! trip is over; and never before the chunk ahead of it. (The proxy's own
//! version is `Direction::due` and the `max(last_due)` in `carry`, in
//! `chapters/15-network/src/proxy.rs`.)

use std::time::Duration;

use tokio::time::Instant;

// ANCHOR: due
/// When a chunk that arrived at `arrived` may leave: `delay` is its one-way
/// delay (jitter included), `opens_at` the first moment anything may leave
/// on this connection, and `previous` when the chunk before it leaves.
pub fn due(arrived: Instant, delay: Duration, opens_at: Instant, previous: Instant) -> Instant {
    (arrived.max(opens_at) + delay).max(previous)
}
// ANCHOR_END: due
