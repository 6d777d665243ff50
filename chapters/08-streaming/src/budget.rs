//! What the Streamer may hold in replies that clients have not taken.
//!
//! HTTP/2 flow control stops the bytes on the wire once a reader stops
//! reading, but not what the server makes behind them. Each stalled stream
//! holds up to four replies: the one h2 could not send, the one hyper took
//! next, the one waiting in its channel and the one its producer made next.
//! For 1 MiB ticks that is 3 to 4 MiB a stream, and one connection may open
//! 256 streams. A client that opened them all and read
//! nothing took the server from 30 to 807 MiB.
//!
//! So every reply pays for itself before it is made: its producer reserves
//! the reply's size from two budgets, its connection's and the whole
//! server's, and waits while either is spent. The reservation travels with
//! the reply through the channel and is given back once the reply has left
//! (see [`Budgeted`]). A connection that stops reading then holds at most its
//! share, and all such connections together at most the server's.

use std::{
    collections::HashMap,
    net::SocketAddr,
    pin::Pin,
    sync::{Arc, Mutex, Weak},
    task::{Context, Poll, ready},
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_stream::Stream;

// ANCHOR: limits
/// Reply bytes the streams of one connection may hold. A stream holds up to
/// four replies: two leaving, one in its channel and one being made; so one
/// stream of full-size 1 MiB ticks never waits for room, several share it,
/// and streams of small messages never come near it.
pub const CONNECTION_REPLY_BYTES: usize = 8 * 1024 * 1024;

/// The same for every connection together: the most that clients who do not
/// read can take. A ninth stalled connection waits, and so do the streams of
/// others that need more; unary calls do not touch it.
pub const SERVER_REPLY_BYTES: usize = 64 * 1024 * 1024;
// ANCHOR_END: limits

/// The two budgets, shared by every stream of the service.
#[derive(Debug)]
pub struct ReplyBudget {
    server: Arc<Semaphore>,
    server_bytes: usize,
    connection_bytes: usize,
    /// Each connection's budget while any of its streams holds it, by the
    /// client's address (which no other open connection has).
    connections: Mutex<HashMap<SocketAddr, Weak<Semaphore>>>,
}

impl Default for ReplyBudget {
    fn default() -> Self {
        ReplyBudget::new(SERVER_REPLY_BYTES, CONNECTION_REPLY_BYTES)
    }
}

impl ReplyBudget {
    pub fn new(server_bytes: usize, connection_bytes: usize) -> Self {
        ReplyBudget {
            server: Arc::new(Semaphore::new(server_bytes)),
            server_bytes,
            connection_bytes,
            connections: Mutex::new(HashMap::new()),
        }
    }

    /// Budgets too large to ever be spent: the service as it was before it
    /// had them, for the slow-reader demo's comparison.
    pub fn unlimited() -> Self {
        ReplyBudget::new(Semaphore::MAX_PERMITS, Semaphore::MAX_PERMITS)
    }

    /// A stream's access to its connection's budget, found by the client's
    /// address, and to the server's. Without an address (an in-process
    /// transport) there is only the server's.
    pub fn share(&self, peer: Option<SocketAddr>) -> Share {
        let connection = peer.map(|peer| {
            // A plain mutex: a map lookup, never held across an await.
            let mut connections = self.connections.lock().unwrap();
            if let Some(budget) = connections.get(&peer).and_then(Weak::upgrade) {
                return budget;
            }
            // Forget connections whose streams have all ended.
            connections.retain(|_, budget| budget.strong_count() > 0);
            let budget = Arc::new(Semaphore::new(self.connection_bytes));
            connections.insert(peer, Arc::downgrade(&budget));
            budget
        });
        Share {
            server: self.server.clone(),
            connection,
            largest: self.connection_bytes.min(self.server_bytes),
        }
    }

    /// Reply bytes held right now, by every stream of every connection.
    pub fn held_bytes(&self) -> usize {
        self.server_bytes - self.server.available_permits()
    }
}

/// One stream's access to its connection's budget and the server's.
pub struct Share {
    server: Arc<Semaphore>,
    connection: Option<Arc<Semaphore>>,
    /// No reservation may be larger than a budget, or it would wait forever.
    largest: usize,
}

impl Share {
    /// Waits until `bytes` more may be held, and holds them until the permit
    /// is dropped. The connection's budget always comes first, then the
    /// server's, so two streams never each hold what the other waits for.
    pub async fn reserve(&self, bytes: usize) -> ReplyPermit {
        let bytes = bytes.clamp(1, self.largest) as u32;
        let connection = match &self.connection {
            Some(budget) => Some(acquire(budget, bytes).await),
            None => None,
        };
        ReplyPermit {
            _connection: connection,
            _server: acquire(&self.server, bytes).await,
        }
    }
}

async fn acquire(budget: &Arc<Semaphore>, bytes: u32) -> OwnedSemaphorePermit {
    budget
        .clone()
        .acquire_many_owned(bytes)
        .await
        .expect("reply budgets are never closed")
}

/// Bytes held in both budgets, given back when this is dropped.
pub struct ReplyPermit {
    _connection: Option<OwnedSemaphorePermit>,
    _server: OwnedSemaphorePermit,
}

/// What a producer puts in its channel: a reply and what it holds of the
/// budgets. An error status the server sends holds nothing.
pub type Reply<T> = (T, Option<ReplyPermit>);

// ANCHOR: budgeted
/// The producer's channel as tonic sees it: the replies without their
/// permits, each permit kept until tonic has asked for two more replies.
///
/// That is when the reply has left. hyper hands a reply to h2 once h2 has
/// room to send some of it, and asks for the next one at once; h2 keeps what
/// the window does not let out yet. So when tonic asks for reply N+2, hyper
/// has handed N+1 over, which it does only once h2 had room beyond all of N.
/// A stream whose reader stopped keeps its last two replies counted for as
/// long as h2 and hyper hold them, and the stream is dropped (with the
/// permits) when the call ends.
pub struct Budgeted<S> {
    inner: S,
    /// The permits of the two replies tonic took last, the older first.
    leaving: (Option<ReplyPermit>, Option<ReplyPermit>),
}

impl<S> Budgeted<S> {
    pub fn new(inner: S) -> Self {
        Budgeted {
            inner,
            leaving: (None, None),
        }
    }
}

impl<S, T> Stream for Budgeted<S>
where
    S: Stream<Item = Reply<T>> + Unpin,
{
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let next = ready!(Pin::new(&mut self.inner).poll_next(cx));
        Poll::Ready(next.map(|(reply, permit)| {
            // Shifting drops the permit of the reply before the last: it has
            // left.
            let newer = std::mem::replace(&mut self.leaving.1, permit);
            self.leaving.0 = newer;
            reply
        }))
    }
}
// ANCHOR_END: budgeted

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio_stream::StreamExt;

    fn peer(port: u16) -> Option<SocketAddr> {
        Some(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_waits_once_its_share_is_spent_and_others_do_not() {
        let budget = ReplyBudget::new(100, 30);
        let (one, two) = (budget.share(peer(1)), budget.share(peer(1)));
        let held = one.reserve(20).await;
        // The same connection's other stream cannot take 20 more...
        let blocked = tokio::time::timeout(Duration::from_secs(60), two.reserve(20)).await;
        assert!(
            blocked.is_err(),
            "a spent connection share let a stream through"
        );
        // ... another connection can, from the server's budget.
        let other = budget.share(peer(2)).reserve(20).await;
        assert_eq!(budget.held_bytes(), 40);
        // Dropping a permit gives its bytes back to both budgets.
        drop(held);
        let _again = two.reserve(20).await;
        drop(other);
        assert_eq!(budget.held_bytes(), 20);
    }

    #[tokio::test(start_paused = true)]
    async fn the_server_budget_bounds_all_connections_together() {
        let budget = ReplyBudget::new(50, 30);
        let shares: Vec<Share> = (1..=3).map(|port| budget.share(peer(port))).collect();
        let _first = shares[0].reserve(25).await;
        let _second = shares[1].reserve(25).await;
        let third = tokio::time::timeout(Duration::from_secs(60), shares[2].reserve(25)).await;
        assert!(third.is_err(), "the server budget let a third 25 through");
        assert_eq!(budget.held_bytes(), 50);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reservation_larger_than_a_budget_is_clamped_not_stuck_forever() {
        let budget = ReplyBudget::new(100, 30);
        let _held = budget.share(None).reserve(1_000).await;
        assert_eq!(budget.held_bytes(), 30);
    }

    #[test]
    fn connections_whose_streams_ended_are_forgotten() {
        let budget = ReplyBudget::default();
        for port in 1..=100 {
            drop(budget.share(peer(port)));
        }
        let _live = budget.share(peer(101));
        assert_eq!(budget.connections.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_reply_holds_its_bytes_until_two_more_are_taken_or_the_stream_goes() {
        let budget = ReplyBudget::new(100, 100);
        let share = budget.share(None);
        let mut replies = Vec::new();
        for (reply, bytes) in [("a", 10), ("b", 20), ("c", 30)] {
            replies.push((reply, Some(share.reserve(bytes).await)));
        }
        replies.push(("error", None));
        let mut stream = Budgeted::new(tokio_stream::iter(replies));
        assert_eq!(budget.held_bytes(), 60, "every reply is waiting");
        assert_eq!(stream.next().await, Some("a"));
        assert_eq!(stream.next().await, Some("b"));
        assert_eq!(budget.held_bytes(), 60, "`a` may still be in h2");
        assert_eq!(stream.next().await, Some("c"));
        assert_eq!(
            budget.held_bytes(),
            50,
            "`a` has left, `b` and `c` may not have"
        );
        assert_eq!(stream.next().await, Some("error"));
        assert_eq!(
            budget.held_bytes(),
            30,
            "`b` has left; an error holds nothing"
        );
        drop(stream);
        assert_eq!(
            budget.held_bytes(),
            0,
            "a dropped stream gives everything back"
        );
    }
}
