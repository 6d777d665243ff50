//! Chapter 11: reserve before receive (the solution).
//!
//! The place is reserved first; only then is the stream asked for a message.
//! At the end of the stream the reservation taken for a message that never
//! came is dropped, which gives its place back.

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
    loop {
        // A worker that has gone frees no place: stop waiting for one.
        let place = tokio::select! {
            place = gate.reserve() => place,
            _ = queue.closed() => break,
        };
        let Some(message) = incoming.next().await else {
            break;
        };
        if queue.send((message, place)).is_err() {
            break;
        }
        admitted += 1;
    }
    admitted
}
// ANCHOR_END: admit
