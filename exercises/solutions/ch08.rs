//! Chapter 8: a producer that stops when its stream is gone (the solution).
//!
//! Each of the producer's three waits, the pause between ticks, the room in
//! the reply budget and the room in the channel, also ends when the call is
//! over: the first two by a `select!` on `tx.closed()`, the send by failing.

use std::time::Duration;

use proto::streaming::v1::{CountdownRequest, Tick};
use streaming::budget::{Reply, Share};
use tokio::sync::mpsc;
use tonic::Status;

/// What a tick costs in the reply budget beyond its payload (as in the
/// chapter's service).
pub const TICK_OVERHEAD_BYTES: usize = 32;

// ANCHOR: count_down
/// Sends `count` ticks, `interval_ms` apart, each paid for from `share`
/// first, and returns how many ticks it made. Returns early once the call is
/// over, that is once the receiver of `tx` has been dropped.
pub async fn count_down(
    request: CountdownRequest,
    tx: mpsc::Sender<Reply<Result<Tick, Status>>>,
    share: Share,
) -> u32 {
    let interval = Duration::from_millis(request.interval_ms.into());
    let bytes = TICK_OVERHEAD_BYTES + request.payload_bytes as usize;
    let mut made = 0;
    for remaining in (0..request.count).rev() {
        if remaining + 1 < request.count && !interval.is_zero() {
            // A sleep does not end by itself when the receiver goes.
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = tx.closed() => return made,
            }
        }
        // Waits while the client holds as many unsent ticks as the budget
        // allows; a client that has gone will never free any.
        let permit = tokio::select! {
            permit = share.reserve(bytes) => permit,
            _ = tx.closed() => return made,
        };
        let tick = Tick {
            remaining,
            payload: vec![0u8; request.payload_bytes as usize],
        };
        made += 1;
        // Waits while the channel is full; fails, at once or mid-wait, when
        // the receiver is dropped.
        if tx.send((Ok(tick), Some(permit))).await.is_err() {
            return made;
        }
    }
    made
}
// ANCHOR_END: count_down
