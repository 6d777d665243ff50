//! The `Ingest` handler, its queue, and the worker behind it.

use std::{
    sync::{
        Arc, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use proto::ingest::v1::{Payload, Summary, ingest_server::Ingest};
use tokio::{
    sync::{Mutex, Notify, mpsc, watch},
    task::JoinHandle,
    time::Instant,
};
use tonic::{Request, Response, Status, Streaming};

use crate::{
    admission::{Gate, Reservation},
    plan::ServicePlan,
    record::{MessageRow, Recorder, Sample},
};

/// Where pending messages wait for the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Policy {
    /// An unbounded channel: the handler takes every message the stream offers.
    Unbounded,
    /// A channel of `capacity` (K) under a logical budget (B <= K); the handler
    /// reserves a place *before* it asks the stream for the next message.
    Reserve { capacity: usize, budget: usize },
}

/// A message on its way to the worker. Its reservation (if any) is released
/// when the worker takes it out of the queue: from then on it is being served,
/// no longer pending.
struct Job {
    stream: Arc<StreamState>,
    seq: u64,
    /// The message's bytes: what a real queue holds, and what makes an
    /// unbounded queue cost memory.
    data: Vec<u8>,
    admission_wait: Duration,
    enqueued: Instant,
    reservation: Option<Reservation>,
}

/// Per call: how many of its messages the worker has finished.
#[derive(Default)]
struct StreamState {
    id: u64,
    processed: AtomicU64,
    progress: Notify,
}

enum Queue {
    Unbounded(mpsc::UnboundedSender<Job>),
    Bounded {
        tx: mpsc::Sender<Job>,
        gate: Arc<Gate>,
    },
}

impl Queue {
    /// Resolves once every worker has stopped (the receiving side is gone).
    async fn closed(&self) {
        match self {
            Queue::Unbounded(tx) => tx.closed().await,
            Queue::Bounded { tx, .. } => tx.closed().await,
        }
    }
}

#[derive(Default)]
struct Totals {
    received: AtomicU64,
    enqueued: AtomicU64,
    dequeued: AtomicU64,
    processed: AtomicU64,
}

/// The state every call shares: one queue, its workers, the recorder.
pub struct Ingestor {
    queue: Queue,
    plan: ServicePlan,
    recorder: Arc<Recorder>,
    totals: Totals,
    next_stream: AtomicU64,
    /// The plan's zero: when the first call arrived.
    epoch: OnceLock<Instant>,
    stop: watch::Sender<bool>,
    tasks: std::sync::Mutex<Vec<JoinHandle<()>>>,
    /// Ingest calls that have ended, and a wake-up for whoever counts them.
    pub calls_done: watch::Sender<u64>,
}

impl Ingestor {
    /// Starts `workers` workers and a sampler that records the queue every
    /// `sample_every`.
    pub fn start(
        policy: Policy,
        plan: ServicePlan,
        workers: usize,
        sample_every: Duration,
    ) -> Arc<Ingestor> {
        let recorder = Arc::new(Recorder::new(Instant::now()));
        let (queue, rx) = match policy {
            Policy::Unbounded => {
                let (tx, rx) = mpsc::unbounded_channel();
                (Queue::Unbounded(tx), Receiver::Unbounded(rx))
            }
            Policy::Reserve { capacity, budget } => {
                let (tx, rx) = mpsc::channel(capacity.max(1));
                let gate = Gate::with_ceiling(budget, capacity);
                (Queue::Bounded { tx, gate }, Receiver::Bounded(rx))
            }
        };
        let (stop, _) = watch::channel(false);
        let ingestor = Arc::new(Ingestor {
            queue,
            plan,
            recorder,
            totals: Totals::default(),
            next_stream: AtomicU64::new(0),
            epoch: OnceLock::new(),
            stop,
            tasks: std::sync::Mutex::default(),
            calls_done: watch::channel(0).0,
        });
        let rx = Arc::new(Mutex::new(rx));
        let mut tasks = Vec::new();
        for worker in 0..workers.max(1) {
            tasks.push(tokio::spawn(ingestor.clone().work(worker, rx.clone())));
        }
        tasks.push(tokio::spawn(ingestor.clone().sample(sample_every)));
        *ingestor.tasks.lock().expect("tasks lock") = tasks;
        ingestor
    }

    pub fn recorder(&self) -> &Arc<Recorder> {
        &self.recorder
    }

    /// The admission gate, for a controller that changes the budget.
    pub fn gate(&self) -> Option<&Arc<Gate>> {
        match &self.queue {
            Queue::Bounded { gate, .. } => Some(gate),
            Queue::Unbounded(_) => None,
        }
    }

    /// When the first call arrived (the service plan's zero), if one has.
    pub fn epoch(&self) -> Option<Instant> {
        self.epoch.get().copied()
    }

    /// Stops the workers and the sampler: each finishes the message in hand,
    /// and calls still streaming end with UNAVAILABLE.
    pub async fn stop(&self) {
        self.stop.send_replace(true);
        let tasks = std::mem::take(&mut *self.tasks.lock().expect("tasks lock"));
        for task in tasks {
            let _ = task.await;
        }
    }

    fn queued(&self) -> usize {
        let enqueued = self.totals.enqueued.load(Ordering::Relaxed);
        enqueued.saturating_sub(self.totals.dequeued.load(Ordering::Relaxed)) as usize
    }

    /// One sample of the queue, now.
    pub fn sample_now(&self) -> Sample {
        let queued = self.queued();
        Sample {
            at: self.recorder.since_start(Instant::now()),
            queued,
            pending: self.gate().map_or(queued, |g| g.pending()),
            budget: self.gate().map_or(0, |g| g.budget()),
            received: self.totals.received.load(Ordering::Relaxed),
            processed: self.totals.processed.load(Ordering::Relaxed),
            rss_kib: program::proc::rss_kib(program::proc::Pid::This),
        }
    }

    async fn sample(self: Arc<Self>, every: Duration) {
        let mut stop = self.stop.subscribe();
        let mut tick = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = tick.tick() => self.recorder.sample(self.sample_now()),
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }

    // ANCHOR: worker
    /// Serves messages one at a time: the service time is the plan's at the
    /// moment service starts, spent asleep (a stand-in for real work that
    /// makes the slowdown exactly repeatable).
    async fn work(self: Arc<Self>, worker: usize, rx: Arc<Mutex<Receiver>>) {
        let mut stop = self.stop.subscribe();
        let mut free_since = Instant::now();
        loop {
            let job = tokio::select! {
                job = async { rx.lock().await.recv().await } => job,
                _ = stop.wait_for(|s| *s) => None,
            };
            let Some(job) = job else { return };
            let dequeued = Instant::now();
            let n = self.totals.dequeued.fetch_add(1, Ordering::Relaxed);
            if job.enqueued < free_since {
                // The message was already waiting when this worker became free.
                self.recorder.idle_with_backlog(dequeued - free_since);
            }
            let epoch = *self.epoch.get_or_init(|| dequeued);
            let Job {
                stream,
                seq,
                data,
                admission_wait,
                enqueued,
                reservation,
            } = job;
            drop(reservation); // dequeued: being served, no longer pending
            self.plan
                .wait(self.plan.service_time(dequeued - epoch, n))
                .await;
            drop(data); // processed
            free_since = Instant::now();
            let at = |t| self.recorder.since_start(t);
            self.recorder.message(MessageRow {
                stream: stream.id,
                seq,
                admission_wait,
                enqueued: at(enqueued),
                dequeued: at(dequeued),
                service_end: at(free_since),
                queue: dequeued - enqueued,
                service: free_since - dequeued,
                worker,
            });
            self.totals.processed.fetch_add(1, Ordering::Relaxed);
            stream.processed.fetch_add(1, Ordering::Relaxed);
            stream.progress.notify_waiters();
        }
    }
    // ANCHOR_END: worker
}

/// The workers' end of the queue.
enum Receiver {
    Unbounded(mpsc::UnboundedReceiver<Job>),
    Bounded(mpsc::Receiver<Job>),
}

impl Receiver {
    async fn recv(&mut self) -> Option<Job> {
        match self {
            Receiver::Unbounded(rx) => rx.recv().await,
            Receiver::Bounded(rx) => rx.recv().await,
        }
    }
}

fn worker_gone() -> Status {
    Status::unavailable(
        "the ingest worker stopped (server shutting down); messages not yet processed were discarded",
    )
}

/// The tonic service: a handle on the shared [`Ingestor`].
#[derive(Clone)]
pub struct IngestService(pub Arc<Ingestor>);

#[tonic::async_trait]
impl Ingest for IngestService {
    async fn ingest(
        &self,
        request: Request<Streaming<Payload>>,
    ) -> Result<Response<Summary>, Status> {
        // Counted on the way out however the call ends, including when the
        // client cancels and tonic drops this future mid-await.
        let _done = CallDone(&self.0.calls_done);
        self.0
            .clone()
            .receive(request.into_inner())
            .await
            .map(Response::new)
    }
}

/// Adds one to `calls_done` when dropped.
struct CallDone<'a>(&'a watch::Sender<u64>);

impl Drop for CallDone<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n += 1);
    }
}

impl Ingestor {
    // ANCHOR: receive
    async fn receive(self: Arc<Self>, mut stream: Streaming<Payload>) -> Result<Summary, Status> {
        self.epoch.get_or_init(Instant::now);
        let state = Arc::new(StreamState {
            id: self.next_stream.fetch_add(1, Ordering::Relaxed),
            ..StreamState::default()
        });
        let (mut received, mut bytes) = (0u64, 0u64);
        loop {
            let waiting_since = Instant::now();
            // Reserve before receive: with no room under the budget, the
            // handler does not ask the stream for another message. Unread
            // bytes stay in HTTP/2's window, and once it is full the client's
            // sends block: the waiting moves upstream instead of into memory.
            let place = match &self.queue {
                Queue::Unbounded(_) => None,
                Queue::Bounded { tx, gate } => tokio::select! {
                    reserved = async { (gate.reserve().await, tx.reserve().await) } => match reserved {
                        (reservation, Ok(permit)) => Some((reservation, permit)),
                        (_, Err(_)) => return Err(worker_gone()),
                    },
                    _ = self.queue.closed() => return Err(worker_gone()),
                },
            };
            let admission_wait = waiting_since.elapsed();
            let next = tokio::select! {
                next = stream.message() => next?,
                _ = self.queue.closed() => return Err(worker_gone()),
            };
            // End of stream: an unused reservation is dropped, freeing its place.
            let Some(payload) = next else { break };
            received += 1;
            bytes += payload.data.len() as u64;
            let Payload { seq, data } = payload;
            self.totals.received.fetch_add(1, Ordering::Relaxed);
            self.totals.enqueued.fetch_add(1, Ordering::Relaxed);
            let job = |reservation| Job {
                stream: state.clone(),
                seq,
                data,
                admission_wait,
                enqueued: Instant::now(),
                reservation,
            };
            match (place, &self.queue) {
                (Some((reservation, permit)), _) => permit.send(job(Some(reservation))),
                (None, Queue::Unbounded(tx)) => tx.send(job(None)).map_err(|_| worker_gone())?,
                (None, Queue::Bounded { .. }) => unreachable!("a bounded queue always reserves"),
            }
        }
        // ... then wait until the worker has processed this call's messages,
        // ANCHOR_END: receive
        // since the summary reports what was processed (or stop if it stops).
        loop {
            let progress = state.progress.notified();
            tokio::pin!(progress);
            progress.as_mut().enable();
            if state.processed.load(Ordering::Relaxed) == received {
                break;
            }
            tokio::select! {
                _ = progress => {}
                _ = self.queue.closed() => return Err(worker_gone()),
            }
        }
        Ok(Summary {
            received,
            processed: received,
            bytes_received: bytes,
        })
    }
}
