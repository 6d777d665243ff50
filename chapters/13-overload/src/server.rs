//! The server under overload: a fixed pool of workers behind a queue, and the
//! rules that decide what happens to a call the workers cannot take yet.
//!
//! [`Pool`] runs the rules of [`crate::core`]: `workers` tasks, each doing one call at a time for
//! `service` (a sleep stands in for the work; it uses no CPU, so the machine's
//! two cores stay free for gRPC itself). [`OverloadGreeter`] puts the pool
//! behind the Greeter's `SayHello` on a real tonic server.
//!
//! Like a thread pool, a worker does not notice that a caller has given up:
//! once a call is in the queue, it is worked on when its turn comes, unless
//! the rules say to check the deadline first. That is what makes waiting
//! expensive, and what the deadline check saves.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use proto::greeter::v1::{
    HelloReply, HelloRequest,
    greeter_server::{Greeter, GreeterServer},
};
use serde::{Deserialize, Serialize};
use tokio::{
    sync::{Notify, oneshot},
    task::JoinSet,
    time::{Instant, sleep_until},
};
use tonic::{Code, Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::core::{Core, Job, Pushback};
pub use crate::core::{Order, Rules};

/// How one call ended inside the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fate {
    /// Worked on, and done before its deadline.
    Served,
    /// Worked on, but done after its caller had given up: wasted work.
    Wasted,
    /// Thrown away unworked, its deadline too close or past.
    Dropped,
    /// Refused at the door: no worker and no place in the queue.
    Shed,
}

/// One call's story inside the server. `started` and `ended` are the worker's
/// time: set for Served and Wasted only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Work {
    pub arrived: Instant,
    pub deadline: Option<Instant>,
    pub started: Option<Instant>,
    pub ended: Option<Instant>,
    /// Calls already waiting when this one arrived.
    pub waiting_ahead: usize,
    pub fate: Fate,
}

/// The answer a worker gives the waiting handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Done {
    Served,
    Dropped,
}

type Reply = (oneshot::Sender<Done>, usize);

/// A call refused at the door, and what its caller is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// When to come back: [`Pushback`].
    pub retry_after: Duration,
    pub workers: usize,
    pub queue: usize,
}

/// The core, run by `workers` tasks.
pub struct Pool {
    core: Mutex<Core<Reply>>,
    pushback: Mutex<Pushback>,
    wake: Notify,
    records: Mutex<Vec<Work>>,
    /// Every arrival, with the number of calls already waiting.
    arrivals: Mutex<Vec<(Instant, usize)>>,
    workers: Mutex<JoinSet<()>>,
}

impl Pool {
    /// Starts the workers; [`Pool::stop`] ends them.
    pub fn start(rules: Rules) -> Arc<Pool> {
        let pool = Arc::new(Pool {
            core: Mutex::new(Core::new(rules)),
            pushback: Mutex::new(Pushback::new(&rules, Instant::now())),
            wake: Notify::new(),
            records: Mutex::new(Vec::new()),
            arrivals: Mutex::new(Vec::new()),
            workers: Mutex::new(JoinSet::new()),
        });
        let mut workers = pool.workers.lock().unwrap();
        for _ in 0..rules.workers.max(1) {
            workers.spawn(worker(pool.clone()));
        }
        drop(workers);
        pool
    }

    /// Ends the workers, mid-call or not.
    pub fn stop(&self) {
        self.workers.lock().unwrap().abort_all();
    }

    /// Hands a call to the pool. `Err` means shed.
    pub fn submit(
        &self,
        arrived: Instant,
        deadline: Option<Instant>,
    ) -> Result<oneshot::Receiver<Done>, Refused> {
        let (tx, rx) = oneshot::channel();
        let mut core = self.core.lock().unwrap();
        let waiting = core.waiting();
        self.arrivals.lock().unwrap().push((arrived, waiting));
        let job = Job {
            arrived,
            deadline,
            reply: (tx, waiting),
        };
        let rules = *core.rules();
        match core.arrive(job) {
            Ok(_) => {
                drop(core);
                self.wake.notify_one();
                Ok(rx)
            }
            Err(job) => {
                drop(core);
                self.record(Work {
                    arrived: job.arrived,
                    deadline: job.deadline,
                    started: None,
                    ended: None,
                    waiting_ahead: waiting,
                    fate: Fate::Shed,
                });
                Err(Refused {
                    retry_after: self.pushback.lock().unwrap().refused(arrived),
                    workers: rules.workers,
                    queue: rules.queue,
                })
            }
        }
    }

    fn record(&self, work: Work) {
        self.records.lock().unwrap().push(work);
    }

    /// Every arrival so far: when, and how many calls were waiting.
    pub fn arrivals(&self) -> Vec<(Instant, usize)> {
        self.arrivals.lock().unwrap().clone()
    }

    /// Every call's story so far (calls still waiting have none yet).
    pub fn records(&self) -> Vec<Work> {
        self.records.lock().unwrap().clone()
    }

    /// How many calls have met each fate so far.
    pub fn fates(&self) -> [(Fate, usize); 4] {
        let records = self.records.lock().unwrap();
        [Fate::Served, Fate::Wasted, Fate::Dropped, Fate::Shed]
            .map(|fate| (fate, records.iter().filter(|w| w.fate == fate).count()))
    }

    /// Changes the work each call takes, from the next call a worker starts.
    pub fn set_service(&self, service: Duration) {
        self.core.lock().unwrap().set_service(service);
    }

    /// Calls being worked on and waiting, right now.
    pub fn load(&self) -> (usize, usize) {
        let core = self.core.lock().unwrap();
        (core.busy(), core.waiting())
    }
}

// ANCHOR: worker
/// One worker: take a call, work on it for `service`, answer, repeat.
///
/// Back-to-back calls are timed from the previous call's planned end, not
/// from when tokio woke the worker: the timer has 1 ms ticks, and waking a
/// little late on every call would shave ~10% off a 10 ms service.
async fn worker(pool: Arc<Pool>) {
    let mut free_at = Instant::now();
    loop {
        let (taken, service) = {
            let mut core = pool.core.lock().unwrap();
            (core.take(Instant::now()), core.rules().service)
        };
        for job in taken.dropped {
            let (reply, waiting_ahead) = job.reply;
            pool.record(Work {
                arrived: job.arrived,
                deadline: job.deadline,
                started: None,
                ended: None,
                waiting_ahead,
                fate: Fate::Dropped,
            });
            let _ = reply.send(Done::Dropped);
        }
        let Some(job) = taken.job else {
            // Nothing to do: wait for the next arrival (a permit is stored if
            // it came between the take and this line, so none is missed).
            pool.wake.notified().await;
            continue;
        };
        if taken.waiting > 0 {
            // More work waiting: make sure another idle worker looks at it.
            pool.wake.notify_one();
        }
        let started = free_at.max(job.arrived);
        let ended = started + service;
        free_at = ended;
        sleep_until(ended).await; // the work: it does not look at the caller
        pool.core.lock().unwrap().finish();
        // Judged by the clock, not the plan: a reply that leaves after the
        // deadline is wasted, however close it came.
        let late = job.deadline.is_some_and(|d| Instant::now() > d);
        let (reply, waiting_ahead) = job.reply;
        pool.record(Work {
            arrived: job.arrived,
            deadline: job.deadline,
            started: Some(started),
            ended: Some(ended),
            waiting_ahead,
            fate: if late { Fate::Wasted } else { Fate::Served },
        });
        // The handler may be gone (its caller gave up): the answer goes nowhere.
        let _ = reply.send(Done::Served);
    }
}
// ANCHOR_END: worker

/// The Greeter's `SayHello`, answered by the pool.
#[derive(Clone)]
pub struct OverloadGreeter {
    pool: Arc<Pool>,
}

impl OverloadGreeter {
    pub fn new(pool: Arc<Pool>) -> OverloadGreeter {
        OverloadGreeter { pool }
    }
}

// ANCHOR: handler
#[tonic::async_trait]
impl Greeter for OverloadGreeter {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let arrived = Instant::now();
        // The caller's deadline travels with the call, as grpc-timeout.
        let deadline = grpc_server::lifetime::grpc_timeout(request.metadata()).map(|t| arrived + t);
        let done = self.pool.submit(arrived, deadline).map_err(refusal)?;
        match done.await {
            Ok(Done::Served) => Ok(Response::new(HelloReply {
                message: grpc_server::greeting(&request.get_ref().name),
            })),
            Ok(Done::Dropped) => Err(Status::deadline_exceeded(
                "dropped unworked: the deadline would pass before the work ended",
            )),
            Err(_) => Err(Status::unavailable("the server is stopping")),
        }
    }
}
// ANCHOR_END: handler

/// The domain of this server's `ErrorInfo` reasons.
pub const ERROR_DOMAIN: &str = "overload.workshop.example";

// ANCHOR: refusal
/// RESOURCE_EXHAUSTED, with details a program can act on (`google.rpc`
/// messages in `grpc-status-details-bin`): `RetryInfo` says when to come
/// back, `ErrorInfo` names the reason and the limits that were hit.
pub fn refusal(refused: Refused) -> Status {
    let mut details = ErrorDetails::with_retry_info(Some(refused.retry_after));
    details.set_error_info(
        "OVERLOADED",
        ERROR_DOMAIN,
        HashMap::from([
            ("workers".to_string(), refused.workers.to_string()),
            ("queue".to_string(), refused.queue.to_string()),
        ]),
    );
    Status::with_error_details(
        Code::ResourceExhausted,
        "overloaded: every worker busy and the queue full",
        details,
    )
}
// ANCHOR_END: refusal

/// A running server: one pool of workers, behind gRPC (plaintext HTTP/2) on
/// one loopback port and REST ([`crate::rest`]) on another, both chosen by
/// the system.
pub struct Running {
    pub addr: SocketAddr,
    pub rest_addr: SocketAddr,
    pub pool: Arc<Pool>,
    tasks: [tokio::task::JoinHandle<()>; 2],
}

/// HTTP/2 streams one connection may have open. Explicit, so that no hidden
/// limit (hyper's own default is 200) queues calls on the client's side.
pub const MAX_CONCURRENT_STREAMS: u32 = 10_000;

impl Running {
    /// Starts the pool, a tonic server and a REST server for it on 127.0.0.1.
    pub async fn start(rules: Rules) -> anyhow::Result<Running> {
        let pool = Pool::start(rules);
        // TCP_NODELAY: without it, Nagle's algorithm and delayed ACKs hold
        // some small replies back for ~40 ms, which would read as queueing.
        let incoming = tonic::transport::server::TcpIncoming::bind(([127, 0, 0, 1], 0).into())?
            .with_nodelay(Some(true));
        let addr = incoming.local_addr()?;
        let service = GreeterServer::new(OverloadGreeter::new(pool.clone()));
        let grpc = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
                // A deadline that passes while the call waits is
                // DEADLINE_EXCEEDED, as chapter 4's server answers it.
                .layer(grpc_server::spec_codes::SpecCodesLayer)
                .add_service(service)
                .serve_with_incoming(incoming)
                .await;
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let rest_addr = listener.local_addr()?;
        let rest = tokio::spawn(crate::rest::serve(
            listener,
            crate::rest::router(pool.clone()),
        ));
        Ok(Running {
            addr,
            rest_addr,
            pool,
            tasks: [grpc, rest],
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The REST resource's URL.
    pub fn greetings_url(&self) -> String {
        format!("http://{}/v1/greetings", self.rest_addr)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Aborting the accept loops leaves connections already accepted
        // running in their own tasks; stopping the pool ends their calls.
        for task in &self.tasks {
            task.abort();
        }
        self.pool.stop();
    }
}
