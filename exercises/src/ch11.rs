//! Chapter 11: reserve before receive.
//!
//! `admit` moves a call's messages from its stream into the worker's queue.
//! The gate's budget is meant to bound the messages the server holds, but
//! this version asks the stream for a message first and only then waits for
//! a place: with the budget full it still holds one message more than the
//! budget allows, and reads it off the connection, so flow control never sees
//! the server is full. Make it wait for a place before it takes a message.
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch11`.

use std::sync::Arc;

use ingest::admission::{Gate, Reservation};
use tokio::sync::mpsc;
use tokio_stream::{Stream, StreamExt};

/// A message in the queue, with the place under the budget that it holds
/// until the worker takes it out (dropping the reservation).
pub type Queued<M> = (M, Reservation);

// ANCHOR: admit
/// Moves every message of `incoming` into `queue`, and returns how many it
/// moved. Ends with the stream, or when the worker has gone (`queue` closed).
pub async fn admit<M, S>(
    mut incoming: S,
    gate: Arc<Gate>,
    queue: mpsc::UnboundedSender<Queued<M>>,
) -> usize
where
    S: Stream<Item = M> + Unpin,
{
    let mut admitted = 0;
    while let Some(message) = incoming.next().await {
        // A worker that has gone frees no place: stop waiting for one.
        let place = tokio::select! {
            place = gate.reserve() => place,
            _ = queue.closed() => break,
        };
        if queue.send((message, place)).is_err() {
            break;
        }
        admitted += 1;
    }
    admitted
}
// ANCHOR_END: admit
