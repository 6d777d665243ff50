//! What the streaming service counts: open streams, live tasks, and bytes.
//!
//! A stream can end three ways: the server finishes it, the client finishes
//! it, or it is cancelled half-way (the client resets it, the connection goes,
//! the deadline passes). The first two are normal. The third is where resources
//! leak if the code is careless, so the service counts what it holds:
//!
//! - **open calls**: chapter 4's [`CallStats`], unchanged. A guard is held for
//!   the whole life of a stream; when the stream ends early its destructor logs
//!   and counts it.
//! - **live tasks**: the tasks a handler spawned to produce its replies. Those
//!   are *not* dropped when a call is cancelled (only the handler's own future
//!   is), so each holds a [`TaskGuard`] and the count shows whether any outlived
//!   its call.
//! - **bytes**: two [`Meter`]s, for messages handed to tonic and messages taken
//!   from it, which chapter 8's flow-control demo reads.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use grpc_server::{CallGuard, CallStats};
use tokio::{sync::mpsc, time::Sleep};
use tokio_stream::Stream;

/// The bytes a message occupies inside HTTP/2 DATA frames: its protobuf
/// encoding plus gRPC's 5-byte prefix (chapter 2). This is what flow-control
/// windows count, so the meters count it too.
pub fn wire_bytes(message: &impl prost::Message) -> u64 {
    message.encoded_len() as u64 + 5
}

/// The streaming service's counters, shared by every call.
#[derive(Debug, Default)]
pub struct StreamStats {
    /// Streams: started, completed, ended early, open now.
    pub calls: Arc<CallStats>,
    /// Producer tasks alive right now.
    pub tasks: AtomicU64,
    /// Messages the handlers handed to tonic (replies).
    pub sent: Meter,
    /// Messages the handlers took from tonic (requests).
    pub received: Meter,
}

impl StreamStats {
    pub fn open_streams(&self) -> u64 {
        self.calls.in_flight()
    }
    pub fn live_tasks(&self) -> u64 {
        self.tasks.load(Ordering::Relaxed)
    }
    /// Counts a producer task as alive until the returned guard is dropped,
    /// which happens however the task ends.
    pub fn task(self: &Arc<Self>) -> TaskGuard {
        self.tasks.fetch_add(1, Ordering::Relaxed);
        TaskGuard(self.clone())
    }
}

/// Held by a producer task for its whole life; see [`StreamStats::task`].
#[must_use = "the task counts as alive only while the guard is held"]
pub struct TaskGuard(Arc<StreamStats>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.tasks.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts the messages and bytes passing one point, and, when it is used to
/// send into a channel, how often and how long those sends had to wait.
#[derive(Debug, Default)]
pub struct Meter {
    bytes: AtomicU64,
    messages: AtomicU64,
    /// Completed sends through [`Meter::send`].
    sends: AtomicU64,
    /// Of those, the ones that found the channel full and had to wait.
    blocked_sends: AtomicU64,
    waits: Mutex<Waits>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Waits {
    last: Duration,
    longest: Duration,
    /// When the send now waiting started, if one is waiting.
    since: Option<Instant>,
}

impl Meter {
    /// Counts one message of `bytes` wire bytes; returns the new byte total.
    pub fn record(&self, bytes: u64) -> u64 {
        self.messages.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Sends `item` into `tx`, noting whether the send had to wait and for how
    /// long. A full channel is detected with `try_send`, without a clock, so
    /// tests can rely on the count of blocked sends.
    ///
    /// Only completed sends are counted: a send abandoned mid-wait (its future
    /// dropped) shows up in `waiting_for` while it waits, and nowhere after.
    pub async fn send<T>(&self, tx: &mpsc::Sender<T>, item: T) -> Result<(), T> {
        let item = match tx.try_send(item) {
            Ok(()) => {
                self.sends.fetch_add(1, Ordering::Relaxed);
                self.waits.lock().unwrap().last = Duration::ZERO;
                return Ok(());
            }
            Err(mpsc::error::TrySendError::Closed(item)) => return Err(item),
            Err(mpsc::error::TrySendError::Full(item)) => item,
        };
        let started = Instant::now();
        self.waits.lock().unwrap().since = Some(started);
        // Clears `since` even if this future is dropped mid-wait.
        let _waiting = ClearOnDrop(&self.waits);
        tx.send(item).await.map_err(|e| e.0)?;
        let waited = started.elapsed();
        self.sends.fetch_add(1, Ordering::Relaxed);
        self.blocked_sends.fetch_add(1, Ordering::Relaxed);
        let mut waits = self.waits.lock().unwrap();
        waits.last = waited;
        waits.longest = waits.longest.max(waited);
        Ok(())
    }

    pub fn snapshot(&self) -> MeterSnapshot {
        let waits = *self.waits.lock().unwrap();
        MeterSnapshot {
            bytes: self.bytes(),
            messages: self.messages.load(Ordering::Relaxed),
            sends: self.sends.load(Ordering::Relaxed),
            blocked_sends: self.blocked_sends.load(Ordering::Relaxed),
            last_wait: waits.last,
            longest_wait: waits.longest,
            waiting_for: waits.since.map(|since| since.elapsed()),
        }
    }
}

struct ClearOnDrop<'a>(&'a Mutex<Waits>);

impl Drop for ClearOnDrop<'_> {
    fn drop(&mut self) {
        self.0.lock().unwrap().since = None;
    }
}

/// A [`Meter`]'s counts at one moment.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MeterSnapshot {
    pub bytes: u64,
    pub messages: u64,
    pub sends: u64,
    pub blocked_sends: u64,
    /// How long the latest completed send waited (zero if it did not).
    pub last_wait: Duration,
    pub longest_wait: Duration,
    /// Set while a send is waiting: how long it has waited so far.
    pub waiting_for: Option<Duration>,
}

// ANCHOR: metered
/// The stream a handler returns to tonic, wrapped. It
///
/// - counts every message when tonic takes it;
/// - enforces the call's deadline. tonic's server applies `grpc-timeout` only
///   until the handler returns, which for a streaming reply is at once, so
///   without this a stream would run past its deadline. At the deadline it
///   ends the stream with DEADLINE_EXCEEDED and drops the producer's channel;
/// - finishes the call's guard when tonic has taken the end of the stream (or
///   an error the server chose). If hyper drops the stream first (the client
///   reset it, the connection closed) or the deadline passed, the guard is
///   dropped unfinished and the call counts as ended early.
pub struct Metered<S> {
    inner: Option<S>,
    stats: Arc<StreamStats>,
    call: Option<CallGuard>,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<S> Metered<S> {
    pub fn new(
        inner: S,
        stats: Arc<StreamStats>,
        call: CallGuard,
        timeout: Option<Duration>,
    ) -> Self {
        Metered {
            inner: Some(inner),
            stats,
            call: Some(call),
            deadline: timeout.map(|t| Box::pin(tokio::time::sleep(t))),
        }
    }
}

impl<S, T> Stream for Metered<S>
where
    S: Stream<Item = Result<T, tonic::Status>> + Unpin,
    T: prost::Message,
{
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let expired = self
            .deadline
            .as_mut()
            .is_some_and(|deadline| deadline.as_mut().poll(cx).is_ready());
        if expired {
            self.deadline = None;
            // Dropping the receiver is what tells the producer task to stop.
            self.inner = None;
            let status =
                tonic::Status::deadline_exceeded("deadline passed; the server ended the stream");
            return Poll::Ready(Some(Err(status)));
        }
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let next = Pin::new(inner).poll_next(cx);
        match &next {
            Poll::Ready(Some(Ok(message))) => {
                self.stats.sent.record(wire_bytes(message));
            }
            // The end of the stream, or an error status the server chose to
            // send: either way the call ended as the server meant it to.
            Poll::Ready(None | Some(Err(_))) => {
                if let Some(call) = self.call.take() {
                    call.finish();
                }
            }
            Poll::Pending => {}
        }
        next
    }
}
// ANCHOR_END: metered

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_send_into_a_full_channel_counts_as_blocked() {
        let meter = Meter::default();
        let (tx, mut rx) = mpsc::channel::<u32>(1);
        meter.send(&tx, 1).await.unwrap();
        assert_eq!(meter.snapshot().blocked_sends, 0);

        let (sent, received) = tokio::join!(meter.send(&tx, 2), async {
            tokio::task::yield_now().await;
            (rx.recv().await, rx.recv().await)
        });
        sent.unwrap();
        assert_eq!(received, (Some(1), Some(2)));
        let snap = meter.snapshot();
        assert_eq!((snap.sends, snap.blocked_sends), (2, 1));
        assert_eq!(snap.waiting_for, None);

        drop(rx);
        assert_eq!(meter.send(&tx, 3).await, Err(3));
    }

    #[test]
    fn task_guards_count_live_tasks() {
        let stats = Arc::new(StreamStats::default());
        let a = stats.task();
        let b = stats.task();
        assert_eq!(stats.live_tasks(), 2);
        drop(a);
        drop(b);
        assert_eq!(stats.live_tasks(), 0);
    }
}
