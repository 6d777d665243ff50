//! One replica of the greeter: chapter 4's service with a latency of its own,
//! a health service, an optional maximum connection age, and the two ways a
//! server can go away: drained (the rolling restart's way) or killed.
//!
//! Each replica runs on a runtime of its own, on a thread of its own. That
//! is what makes [`Replica::kill`] honest: dropping the runtime drops every
//! task it ran, so every socket the replica held is closed at once, without
//! a GOAWAY or a last frame, exactly as the kernel closes the sockets of a
//! process that was killed.

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::Context;
use grpc_server::{
    CallStats, Greeter, connection::with_preface_deadline, server::PREFACE_TIMEOUT,
    spec_codes::SpecCodesLayer,
};
use proto::greeter::v1::{
    HelloReply, HelloRequest,
    greeter_server::{self, GreeterServer},
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::{Deserialize, Serialize};
use tokio::{sync::oneshot, time::Instant};
use tokio_stream::{StreamExt, wrappers::ReceiverStream};
use tonic::{Request, Response, Status, metadata::MetadataValue, transport::Server};

/// The response header that names the replica which answered: how a client
/// counts each replica's share without asking the servers.
pub const REPLICA_HEADER: &str = "fleet-replica";

/// The service every replica reports through health checks.
pub const SERVICE: &str = "greeter.v1.Greeter";

// ANCHOR: latency
/// What a replica adds to every call's own `delay_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Latency {
    /// Nothing: as fast as the greeter.
    None,
    /// The same extra time on every call: a replica on a slower machine.
    Fixed(Duration),
    /// A tail: grpc-java's hedging example delays 10% of calls by 2 s, 5% by
    /// 5 s and 1% by 10 s. Here a hundredth of that: 10% of calls take at
    /// least 20 ms, 5% at least 50 ms, 1% 100 ms. The draw is seeded.
    Tail { seed: u64 },
}

/// `(share of calls at least this slow, extra delay)`, slowest first.
pub const TAIL: [(f64, Duration); 3] = [
    (0.01, Duration::from_millis(100)),
    (0.05, Duration::from_millis(50)),
    (0.10, Duration::from_millis(20)),
];

/// The extra delay for a draw `u` in [0, 1).
pub fn tail_delay(u: f64) -> Duration {
    TAIL.iter()
        .find(|(share, _)| u < *share)
        .map_or(Duration::ZERO, |(_, delay)| *delay)
}
// ANCHOR_END: latency

/// How to start a replica.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// Its name, sent back with every answer ([`REPLICA_HEADER`]).
    pub name: String,
    pub addr: SocketAddr,
    pub latency: Latency,
    /// Close each connection this long after it opened (GOAWAY).
    pub max_age: Option<Duration>,
    /// Meant as: force it closed this long after the GOAWAY, if calls still
    /// hold it. tonic 0.14.9 does something else; see `age` below.
    pub age_grace: Option<Duration>,
    pub certs_dir: PathBuf,
}

impl Spec {
    pub fn new(name: &str, addr: SocketAddr, certs_dir: PathBuf) -> Spec {
        Spec {
            name: name.into(),
            addr,
            latency: Latency::None,
            max_age: None,
            age_grace: None,
            certs_dir,
        }
    }
}

/// Chapter 4's greeter, slowed down by the replica's latency, and signing its
/// answers with the replica's name.
struct Slowed {
    greeter: Greeter,
    latency: Latency,
    rng: Mutex<StdRng>,
    name: MetadataValue<tonic::metadata::Ascii>,
}

#[tonic::async_trait]
impl greeter_server::Greeter for Slowed {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let extra = match self.latency {
            Latency::None => Duration::ZERO,
            Latency::Fixed(extra) => extra,
            Latency::Tail { .. } => tail_delay(self.rng.lock().expect("not poisoned").random()),
        };
        // The extra time joins the call's own wait, so chapter 4's greeter
        // does the waiting: a cancelled call stops there and is counted.
        let (metadata, extensions, mut message) = request.into_parts();
        message.delay_ms = message.delay_ms.saturating_add(extra.as_millis() as u32);
        let request = Request::from_parts(metadata, extensions, message);
        let mut response = self.greeter.say_hello(request).await?;
        response
            .metadata_mut()
            .insert(REPLICA_HEADER, self.name.clone());
        Ok(response)
    }
}

/// When each step of a drain happened.
#[derive(Debug, Clone, Copy)]
pub struct Drained {
    /// Health checks started to answer NOT_SERVING.
    pub not_serving: Instant,
    /// The grace ended: GOAWAY to every connection, no new calls.
    pub goaway: Instant,
    /// The last connection closed (or the drain limit ran out: `forced`).
    pub closed: Instant,
    pub forced: bool,
}

enum Stop {
    Drain {
        grace: Duration,
        limit: Duration,
        done: oneshot::Sender<Drained>,
    },
    Kill,
}

/// A running replica. Dropping it kills it.
pub struct Replica {
    pub spec: Spec,
    pub addr: SocketAddr,
    stats: Arc<CallStats>,
    stop: Option<oneshot::Sender<Stop>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Replica {
    /// Binds `spec.addr` (port 0 picks one) and serves, reporting SERVING.
    pub async fn start(spec: Spec) -> anyhow::Result<Replica> {
        let (ready, listening) = oneshot::channel();
        let (stop, stopped) = oneshot::channel();
        let for_thread = spec.clone();
        let thread = std::thread::Builder::new()
            .name(format!("replica-{}", spec.name))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match runtime {
                    Ok(runtime) => runtime.block_on(serve(for_thread, ready, stopped)),
                    Err(e) => {
                        let _ = ready.send(Err(e.into()));
                    }
                }
                // The runtime is dropped here, and with it every connection
                // task: after a kill, that is what closes the sockets.
            })
            .context("cannot start a replica's thread")?;
        let (addr, stats) = listening
            .await
            .context("the replica's thread ended before it listened")??;
        Ok(Replica {
            spec,
            addr,
            stats,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The greeter's counters: calls started, completed, ended early.
    pub fn stats(&self) -> Arc<CallStats> {
        self.stats.clone()
    }

    // ANCHOR: drain
    /// The graceful way out: NOT_SERVING at once, so that clients watching
    /// health stop sending here; `grace` later, GOAWAY and no new calls; then
    /// wait for the calls in flight, at most `limit`.
    pub async fn drain(mut self, grace: Duration, limit: Duration) -> anyhow::Result<Drained> {
        let (done, drained) = oneshot::channel();
        self.send(Stop::Drain { grace, limit, done })?;
        let drained = drained
            .await
            .context("the replica stopped without draining")?;
        self.join();
        Ok(drained)
    }
    // ANCHOR_END: drain

    /// The abrupt way out: every socket closed now, calls in flight lost.
    /// Blocks for as long as the replica's runtime takes to drop its tasks
    /// (no waiting on anyone: a moment).
    pub fn kill(mut self) {
        let _ = self.send(Stop::Kill);
        self.join();
    }

    fn send(&mut self, stop: Stop) -> anyhow::Result<()> {
        let sender = self
            .stop
            .take()
            .context("the replica was already stopped")?;
        sender
            .send(stop)
            .map_err(|_| anyhow::anyhow!("the replica {} had already stopped", self.spec.name))
    }

    fn join(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.send(Stop::Kill);
        self.join();
    }
}

type Listening = anyhow::Result<(SocketAddr, Arc<CallStats>)>;

async fn serve(spec: Spec, ready: oneshot::Sender<Listening>, stopped: oneshot::Receiver<Stop>) {
    let bound = async {
        let tls = certs::server_config(&certs::TlsArgs::in_dir(&spec.certs_dir), false, &[b"h2"])?;
        let listener = certs::TlsListener::bind(spec.addr, tls).await?;
        let addr = listener.local_addr()?;
        anyhow::Ok((listener, addr))
    };
    let (listener, addr) = match bound.await {
        Ok(bound) => bound,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let greeter = Greeter::default();
    let stats = greeter.stats.clone();
    let slowed = Slowed {
        greeter,
        latency: spec.latency,
        rng: Mutex::new(StdRng::seed_from_u64(match spec.latency {
            Latency::Tail { seed } => seed,
            _ => 0,
        })),
        name: spec
            .name
            .parse()
            .unwrap_or_else(|_| MetadataValue::from_static("?")),
    };
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<GreeterServer<Slowed>>().await;

    // ANCHOR: age
    let mut builder = Server::builder();
    if let Some(age) = spec.max_age {
        // After `age`, the server sends GOAWAY: the client finishes its calls
        // there and opens a new connection, which a load balancer in front
        // may send to another replica. That is how connections spread over
        // a replica added later.
        builder = builder.max_connection_age(age);
    }
    if let Some(grace) = spec.age_grace {
        // In tonic 0.14.9, a grace replaces the GOAWAY instead of following
        // it: `connection_timeout_future` sleeps `age`, then `grace`, then
        // closes the connection outright (calls in flight fail); only
        // without a grace does it start a graceful shutdown at `age`.
        builder = builder.max_connection_age_grace(grace);
    }
    // ANCHOR_END: age
    let incoming = with_preface_deadline(ReceiverStream::new(listener.incoming()), PREFACE_TIMEOUT)
        .map(Ok::<_, std::io::Error>);

    let (goaway, go) = oneshot::channel::<()>();
    let serving = builder
        // A deadline that passes in the slow wait is DEADLINE_EXCEEDED, as
        // chapter 4's server answers it.
        .layer(SpecCodesLayer)
        .add_service(health_service)
        .add_service(GreeterServer::new(slowed))
        .serve_with_incoming_shutdown(incoming, async {
            let _ = go.await;
        });
    let _ = ready.send(Ok((addr, stats)));

    tokio::pin!(serving);
    let stop = tokio::select! {
        stop = stopped => stop.unwrap_or(Stop::Kill),
        result = &mut serving => {
            tracing::warn!(replica = spec.name, ?result, "replica stopped serving by itself");
            return;
        }
    };
    let Stop::Drain { grace, limit, done } = stop else {
        return; // killed: the runtime drops everything on return
    };
    // ANCHOR: sequence
    let not_serving = Instant::now();
    health.set_not_serving::<GreeterServer<Slowed>>().await;
    // Serving goes on through the grace: calls that clients still send here
    // (they have not heard yet) are answered, not refused.
    let ended_early = tokio::time::timeout(grace, &mut serving).await.is_ok();
    let goaway_at = Instant::now();
    let _ = goaway.send(());
    // A server that ended by itself during the grace has nothing to drain
    // (and a finished future must not be polled again).
    let forced = !ended_early && tokio::time::timeout(limit, &mut serving).await.is_err();
    // ANCHOR_END: sequence
    let _ = done.send(Drained {
        not_serving,
        goaway: goaway_at,
        closed: Instant::now(),
        forced,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_has_the_scaled_shares() {
        assert_eq!(tail_delay(0.0), Duration::from_millis(100));
        assert_eq!(tail_delay(0.03), Duration::from_millis(50));
        assert_eq!(tail_delay(0.07), Duration::from_millis(20));
        assert_eq!(tail_delay(0.5), Duration::ZERO);
        // Over a fine grid, the shares are 1%, 4% and 5%: 10% slow in all.
        let draws: Vec<Duration> = (0..10_000)
            .map(|i| tail_delay(i as f64 / 10_000.0))
            .collect();
        let at_least = |ms: u64| {
            draws
                .iter()
                .filter(|d| **d >= Duration::from_millis(ms))
                .count()
        };
        assert_eq!(
            (at_least(20), at_least(50), at_least(100)),
            (1000, 500, 100)
        );
    }
}
