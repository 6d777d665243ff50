//! The three processes of the chain: frontend -> middle -> leaf.
//!
//! Each is started by the experiment from its own executable (`chain
//! --hop-child`), told its part as one typed value on stdin, and asked at the
//! end for what it counted, second by second. The frontend and the middle
//! pass each call on through their [`Retrier`]; the leaf works on it with
//! chapter 13's pool: `workers` slots of `service` each, a FIFO queue of
//! `queue` places, refusal (RESOURCE_EXHAUSTED) beyond that. The leaf's
//! capacity is emulated (a sleep stands in for the work), so the storm does
//! not depend on the machine's cores.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context;
use grpc_server::lifetime::grpc_timeout;
use harness::child::Role;
use overload::server::{Done, Order, Pool, Rules, refusal};
use proto::greeter::v1::{
    HelloReply, HelloRequest,
    greeter_server::{Greeter, GreeterServer},
};
use serde::{Deserialize, Serialize};
use tokio::{sync::oneshot, time::Instant};
use tonic::{Request, Response, Status, transport::Endpoint};

use crate::hop::{Policy, Retrier, Second, Tally, gone, now_us, user_gives_up};

/// The leaf's capacity, and the trigger that halves it for a while.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Leaf {
    pub workers: usize,
    pub service: Duration,
    pub queue: usize,
    /// From the run's start: when each call's work doubles, and for how long.
    pub trigger_at: Duration,
    pub trigger_for: Duration,
}

impl Leaf {
    /// Calls per second the leaf completes, outside the trigger.
    pub fn capacity(&self) -> f64 {
        self.workers as f64 / self.service.as_secs_f64()
    }
}

/// Which process, and what it passes calls on to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Part {
    /// The frontend or the middle: calls `next` under `policy`.
    Pass {
        next: SocketAddr,
        policy: Policy,
    },
    Leaf(Leaf),
}

/// One process of the chain: `chain --hop-child`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hop {
    pub part: Part,
    /// Whether it takes the deadline a call arrives with (`grpc-timeout`)
    /// as its own, and stops working on a call whose caller has gone.
    pub propagate: bool,
    /// The run's start, microseconds since the Unix epoch: second 0 of the
    /// counts.
    pub t0_us: u64,
    pub seed: u64,
}

/// Asks a hop for its counts so far.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Counts;

impl Role for Hop {
    const COMMAND: &'static [&'static str] = &["--hop-child"];
    type Ready = SocketAddr;
    type Ask = Counts;
    type Answer = Vec<Second>;
}

// ANCHOR: pass
/// The frontend and the middle: each call is passed on to the next hop.
struct PassOn {
    next: Arc<Retrier>,
    propagate: bool,
    tally: Arc<Tally>,
}

#[tonic::async_trait]
impl Greeter for PassOn {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let gives_up = user_gives_up(request.metadata());
        self.tally.count(|s| s.received += 1);
        let next = self.next.clone();
        let passed = if self.propagate {
            // Inside the handler: when the caller resets the stream, tonic
            // drops this future, and with it the attempt in flight downstream,
            // which resets the next hop's stream in turn (tests/hop.rs).
            let deadline = grpc_timeout(request.metadata()).map(|t| Instant::now() + t);
            next.call(gives_up, deadline).await
        } else {
            // Handed to a task of its own, as a thread pool would take it:
            // the retries go on after the caller has gone.
            let (tx, rx) = oneshot::channel();
            let tally = self.tally.clone();
            tokio::spawn(async move {
                if tx.send(next.call(gives_up, None).await).is_err() {
                    tally.count(|s| s.orphaned += 1);
                }
            });
            rx.await.unwrap_or_else(|_| {
                Err(Status::internal("the call's task ended without an answer"))
            })
        };
        passed?;
        self.tally.count(|s| s.answered_ok += 1);
        Ok(Response::new(HelloReply {
            message: "hello through the chain".into(),
        }))
    }
}
// ANCHOR_END: pass

// ANCHOR: leaf
/// The leaf: chapter 13's pool of workers. A worker does not notice that a
/// caller has gone; with `propagate` it drops a call whose deadline has
/// passed before starting it, without it it works on everything it queued.
struct Work {
    pool: Arc<Pool>,
    propagate: bool,
    tally: Arc<Tally>,
}

#[tonic::async_trait]
impl Greeter for Work {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let gives_up = user_gives_up(request.metadata());
        self.tally.count(|s| s.received += 1);
        let arrived = Instant::now();
        let deadline = match self.propagate {
            true => grpc_timeout(request.metadata()).map(|t| arrived + t),
            false => None,
        };
        let done = self.pool.submit(arrived, deadline).map_err(|refused| {
            self.tally.count(|s| s.shed += 1);
            refusal(refused)
        })?;
        // Counted by a task of its own: the work ends whether or not this
        // handler is still waiting for it.
        let (tx, rx) = oneshot::channel();
        let tally = self.tally.clone();
        tokio::spawn(async move {
            let done = done.await;
            let served = matches!(done, Ok(Done::Served));
            let dropped = matches!(done, Ok(Done::Dropped));
            let nobody = tx.send(done).is_err();
            tally.count(|s| {
                s.worked += u64::from(served);
                s.worked_late += u64::from(served && gone(gives_up));
                s.orphaned += u64::from(served && nobody);
                s.dropped += u64::from(dropped);
            });
        });
        match rx.await {
            Ok(Ok(Done::Served)) => {
                self.tally.count(|s| s.answered_ok += 1);
                Ok(Response::new(HelloReply {
                    message: "hello from the leaf".into(),
                }))
            }
            Ok(Ok(Done::Dropped)) => Err(Status::deadline_exceeded(
                "dropped unworked: the deadline passed in the queue",
            )),
            _ => Err(Status::unavailable("the leaf is stopping")),
        }
    }
}
// ANCHOR_END: leaf

/// The leaf's trigger: each call's work doubles at `trigger_at` for
/// `trigger_for`, which halves what the workers complete per second.
async fn trigger(pool: Arc<Pool>, leaf: Leaf, t0_us: u64) {
    let at = |offset: Duration| {
        let target = t0_us + offset.as_micros() as u64;
        Instant::now() + Duration::from_micros(target.saturating_sub(now_us()))
    };
    let (start, end) = (at(leaf.trigger_at), at(leaf.trigger_at + leaf.trigger_for));
    tokio::time::sleep_until(start).await;
    pool.set_service(leaf.service * 2);
    tokio::time::sleep_until(end).await;
    pool.set_service(leaf.service);
}

/// The process: serves its part on a loopback port, says where, and answers
/// [`Counts`] until its stdin closes.
pub fn hop_process() -> anyhow::Result<()> {
    let hop: Hop = harness::child::config()?;
    let runtime = tokio::runtime::Runtime::new().context("cannot build the runtime")?;
    let tally = Arc::new(Tally::new(hop.t0_us));
    let counts = tally.clone();
    let link = harness::child::answer::<Hop>(move |Counts| counts.seconds())?;
    runtime.block_on(async {
        let incoming = tonic::transport::server::TcpIncoming::bind(([127, 0, 0, 1], 0).into())
            .map_err(|e| anyhow::anyhow!("cannot listen: {e}"))?
            .with_nodelay(Some(true));
        let addr = incoming.local_addr()?;
        let mut server = tonic::transport::Server::builder()
            .max_concurrent_streams(overload::server::MAX_CONCURRENT_STREAMS);
        let serve = match hop.part {
            Part::Pass { next, policy, .. } => {
                let channel = Endpoint::from_shared(format!("http://{next}"))?
                    .tcp_nodelay(true)
                    .connect()
                    .await
                    .with_context(|| format!("cannot reach the next hop at {next}"))?;
                let service = PassOn {
                    next: Arc::new(Retrier::new(channel, policy, hop.seed, tally.clone())),
                    propagate: hop.propagate,
                    tally,
                };
                tokio::spawn(
                    server
                        .add_service(GreeterServer::new(service))
                        .serve_with_incoming(incoming),
                )
            }
            Part::Leaf(leaf) => {
                let pool = Pool::start(Rules {
                    workers: leaf.workers,
                    queue: leaf.queue,
                    order: Order::Fifo,
                    drop_expired: hop.propagate,
                    service: leaf.service,
                    margin: Duration::ZERO,
                });
                tokio::spawn(trigger(pool.clone(), leaf, hop.t0_us));
                let service = Work {
                    pool,
                    propagate: hop.propagate,
                    tally,
                };
                tokio::spawn(
                    server
                        .add_service(GreeterServer::new(service))
                        .serve_with_incoming(incoming),
                )
            }
        };
        link.ready(&addr)?;
        // Serves until the experiment closes stdin, which ends the process.
        serve.await??;
        anyhow::Ok(())
    })
}
