//! Chapter 8: a producer that stops when its stream is gone.
//!
//! `count_down` is the task a `Countdown` handler spawns: it makes the ticks
//! and sends them into the channel whose receiver tonic turns into the reply
//! stream. When the client gives up, hyper drops that stream, and with it the
//! receiver, but nothing drops the task. This version never looks: it ignores
//! a failed send, and it sleeps between ticks and waits for room in the reply
//! budget without watching the channel, so a cancelled call goes on ticking,
//! into the void, until `count` runs out. Make it return as soon as the call
//! is over, including while it waits.
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch08`.

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
            tokio::time::sleep(interval).await;
        }
        // Waits while the client holds as many unsent ticks as the budget allows.
        let permit = share.reserve(bytes).await;
        let tick = Tick {
            remaining,
            payload: vec![0u8; request.payload_bytes as usize],
        };
        made += 1;
        // Waits while the channel is full. A tick nobody will read is dropped.
        let _ = tx.send((Ok(tick), Some(permit))).await;
    }
    made
}
// ANCHOR_END: count_down
