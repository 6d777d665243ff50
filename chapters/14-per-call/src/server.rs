//! The server under test, and the process it runs in.
//!
//! [`serve_process`] is what the child process runs (a [`ServeArm`] child of
//! the experiment, through chapter 11's harness): it builds the arm's
//! runtime, serves the echo on a free loopback port (plaintext HTTP/2: the
//! price under study is the call machinery, not encryption, which chapter 10
//! measured), and the same echo as REST on two more ports ([`crate::rest`]),
//! says where it listens and what it really runs on
//! ([`ServerInfo`]), then answers every [`Stats`] question with a
//! [`Snapshot`]. It exits when its stdin closes, so it never outlives the
//! experiment. `per_call serve` ([`crate::remote`]) runs the same [`bind`]
//! on ports of its own choosing and answers over HTTP instead.

use std::{
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::Context;
use harness::{child::Role, pod::Throttling};
use program::proc::{self, Pid};
use proto::{
    greeter::v1::{HelloReply, HelloRequest, greeter_server},
    streaming::v1::{Chunk, CountdownRequest, Tick, UploadSummary, streamer_server},
};
use serde::{Deserialize, Serialize};
use tokio_stream::{Stream, StreamExt, wrappers::TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

use crate::{
    arm::{Arm, Handler, WORKER_THREAD_NAME},
    rest::{self, Connections, Http, RestAddrs},
};

/// What the handlers count.
#[derive(Debug, Default)]
pub struct Counts {
    pub unary_calls: AtomicU64,
    pub messages: AtomicU64,
    pub spawned: AtomicU64,
    /// REST requests answered, over either HTTP.
    pub rest_requests: AtomicU64,
    /// The REST ports' connections, HTTP/1.1 and HTTP/2 together (a ramp
    /// uses one of them).
    pub connections: Connections,
}

/// The echo, both ways. Cloning shares the counts.
#[derive(Debug, Clone)]
pub struct Echo {
    pub handler: Handler,
    pub counts: Arc<Counts>,
}

// ANCHOR: spawn_or_inline
impl Echo {
    /// Runs `work` where this arm says: right here, or in a task of its own
    /// that this task then waits for (a spawn, a schedule, a poll and a
    /// wake-up on the way back: the hand-off the `spawn` arms pay per unit).
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Status> {
        match self.handler {
            Handler::Inline => Ok(work()),
            Handler::Spawn => {
                self.counts.spawned.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move { work() })
                    .await
                    .map_err(|e| Status::internal(format!("handler task failed: {e}")))
            }
        }
    }
}
// ANCHOR_END: spawn_or_inline

#[tonic::async_trait]
impl greeter_server::Greeter for Echo {
    /// Echoes the name back: no validation, no timer, no logging, so that
    /// what is left is the price of the call itself.
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        self.counts.unary_calls.fetch_add(1, Ordering::Relaxed);
        let name = request.into_inner().name;
        let reply = self.run(move || HelloReply { message: name }).await?;
        Ok(Response::new(reply))
    }
}

pub type Replies<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl streamer_server::Streamer for Echo {
    type CountdownStream = Replies<Tick>;
    type EchoStream = Replies<Chunk>;

    async fn countdown(
        &self,
        _: Request<CountdownRequest>,
    ) -> Result<Response<Self::CountdownStream>, Status> {
        Err(Status::unimplemented("chapter 14's server only echoes"))
    }

    async fn upload(
        &self,
        _: Request<Streaming<Chunk>>,
    ) -> Result<Response<UploadSummary>, Status> {
        Err(Status::unimplemented("chapter 14's server only echoes"))
    }

    // ANCHOR: echo
    /// Every message comes back as it arrives. The reply stream is the
    /// request stream, mapped: no channel, no task of our own per stream, so
    /// the inline arm handles each message inside the task that reads it.
    async fn echo(
        &self,
        request: Request<Streaming<Chunk>>,
    ) -> Result<Response<Self::EchoStream>, Status> {
        let echo = self.clone();
        let replies = request.into_inner().then(move |next| {
            let echo = echo.clone();
            async move {
                let chunk = next?;
                echo.counts.messages.fetch_add(1, Ordering::Relaxed);
                echo.run(move || chunk).await
            }
        });
        Ok(Response::new(Box::pin(replies)))
    }
    // ANCHOR_END: echo
}

/// The first line the server process prints: where it listens, and the
/// configuration it actually runs on, read from the runtime and from /proc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub addr: SocketAddr,
    /// The same echo as REST, one port per HTTP version.
    #[serde(default)]
    pub rest: RestAddrs,
    pub pid: u32,
    pub arm: String,
    /// `Handle::metrics().num_workers()`, asked of the running runtime.
    pub workers: usize,
    /// Threads named [`WORKER_THREAD_NAME`] in /proc/self/task.
    pub named_worker_threads: usize,
    /// Every thread of the process: workers, the main thread, the control thread.
    pub threads: usize,
    /// The CPUs the kernel lets this process run on (`Cpus_allowed_list`).
    pub cpus_allowed: String,
    /// The CPU quota of the server's own cgroup, in CPUs, as it read it from
    /// the inside; none: no quota.
    #[serde(default)]
    pub quota_cpus: Option<f64>,
}

/// Running totals of the server process; the experiment takes differences.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub unary_calls: u64,
    pub messages: u64,
    pub spawned: u64,
    /// CPU time of every thread of the process (/proc/self/task/*/schedstat).
    pub cpu_ns: u64,
    /// Voluntary and involuntary context switches of every thread.
    pub context_switches: u64,
    /// Times a runtime worker parked (went to sleep for lack of work).
    pub parks: u64,
    /// Time the runtime's workers spent polling tasks.
    pub busy_ns: u64,
    pub rest_requests: u64,
    /// REST connections accepted so far.
    pub connections: u64,
    /// REST connections open now (a level, not a total: `since` keeps it).
    pub open_connections: u64,
    /// REST connections that ended with an error.
    pub failed_connections: u64,
    pub accept_errors: u64,
    /// Connections the kernel turned away from a full listen queue, in the
    /// server's network namespace ([`listen_overflows`]).
    #[serde(default)]
    pub listen_overflows: u64,
    /// The server's cgroup's throttling counts, read from the inside; none
    /// when its group has no CPU quota.
    #[serde(default)]
    pub throttling: Option<Throttling>,
}

impl Snapshot {
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        Snapshot {
            unary_calls: self.unary_calls - earlier.unary_calls,
            messages: self.messages - earlier.messages,
            spawned: self.spawned - earlier.spawned,
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            context_switches: self
                .context_switches
                .saturating_sub(earlier.context_switches),
            parks: self.parks - earlier.parks,
            busy_ns: self.busy_ns - earlier.busy_ns,
            rest_requests: self.rest_requests - earlier.rest_requests,
            connections: self.connections - earlier.connections,
            open_connections: self.open_connections,
            failed_connections: self.failed_connections - earlier.failed_connections,
            accept_errors: self.accept_errors - earlier.accept_errors,
            listen_overflows: self
                .listen_overflows
                .saturating_sub(earlier.listen_overflows),
            throttling: self
                .throttling
                .zip(earlier.throttling)
                .map(|(now, then)| now.since(&then)),
        }
    }
}

pub fn snapshot(counts: &Counts, runtime: &tokio::runtime::Handle) -> Snapshot {
    let metrics = runtime.metrics();
    let workers = 0..metrics.num_workers();
    Snapshot {
        unary_calls: counts.unary_calls.load(Ordering::Relaxed),
        messages: counts.messages.load(Ordering::Relaxed),
        spawned: counts.spawned.load(Ordering::Relaxed),
        cpu_ns: proc::cpu_ns(Pid::This),
        context_switches: proc::context_switches(Pid::This),
        parks: workers.clone().map(|w| metrics.worker_park_count(w)).sum(),
        busy_ns: workers
            .map(|w| metrics.worker_total_busy_duration(w).as_nanos() as u64)
            .sum(),
        rest_requests: counts.rest_requests.load(Ordering::Relaxed),
        connections: counts.connections.accepted.load(Ordering::Relaxed),
        open_connections: counts.connections.open.load(Ordering::Relaxed),
        failed_connections: counts.connections.failed.load(Ordering::Relaxed),
        accept_errors: counts.connections.accept_errors.load(Ordering::Relaxed),
        listen_overflows: listen_overflows(),
        throttling: harness::pod::own_limits()
            .ok()
            .and_then(|(stat, quota)| quota.map(|_| stat)),
    }
}

// ANCHOR: listen_overflows
/// Connections the kernel turned away because a listen queue was full
/// (`TcpExt: ListenOverflows` in /proc/net/netstat), in this process's
/// network namespace: on a machine (or in a pod) running only this server,
/// the server's. 0 where unreadable.
pub fn listen_overflows() -> u64 {
    let text = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let mut lines = text.lines();
    // The file holds pairs of lines: names, then values, each prefixed `TcpExt:`.
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        if names.starts_with("TcpExt:") {
            return names
                .split_whitespace()
                .zip(values.split_whitespace())
                .find(|(name, _)| *name == "ListenOverflows")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
        }
    }
    0
}
// ANCHOR_END: listen_overflows

/// The server's configuration, as the experiment hands it over: which arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeArm {
    pub arm: Arm,
}

/// The one question the experiment asks a running server: its totals so far.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats;

impl Role for ServeArm {
    const COMMAND: &'static [&'static str] = &["--serve-child"];
    type Ready = ServerInfo;
    type Ask = Stats;
    type Answer = Snapshot;
}

/// This process's thread names, once the runtime's workers have named
/// themselves (a thread takes its name as it starts; tokio starts them
/// when the runtime is built, but they may not have run yet). Waits at most
/// 5 s; a runtime that does not match is caught by the experiment's check.
fn worker_threads_named(arm: Arm) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let names = proc::thread_names(Pid::This);
        let named = names.iter().filter(|n| *n == WORKER_THREAD_NAME).count();
        let expected = match arm.flavour {
            crate::Flavour::CurrentThread => 0,
            crate::Flavour::MultiThread(n) => n,
        };
        if named >= expected || std::time::Instant::now() > deadline {
            return names;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Where a server listens: gRPC, and REST over each HTTP version.
#[derive(Debug, Clone, Copy)]
pub struct Listen {
    pub grpc: SocketAddr,
    pub h1: SocketAddr,
    pub h2: SocketAddr,
}

impl Listen {
    /// Free loopback ports: a server the experiment starts itself.
    pub const LOOPBACK: Listen = Listen {
        grpc: SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0),
        h1: SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0),
        h2: SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0),
    };
}

/// The gRPC server, bound, run until its `stop` future ends.
pub type Serving =
    std::pin::Pin<Box<dyn Future<Output = Result<(), tonic::transport::Error>> + Send>>;

/// Binds the echo's three ports and starts its REST side on the current
/// runtime; returns where it listens and the gRPC server, to be driven.
pub async fn bind(
    echo: Echo,
    on: Listen,
    stop: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<(SocketAddr, RestAddrs, Serving)> {
    let listen = |addr: SocketAddr| async move {
        tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))
    };
    let listener = listen(on.grpc).await?;
    let addr = listener.local_addr()?;
    // `serve_with_incoming` ignores tonic's `tcp_nodelay` setting (on by
    // default with `serve`), so it is set here: with Nagle's algorithm on,
    // small replies wait for the client's ACKs and the arms measure that.
    let incoming = TcpListenerStream::new(listener)
        .map(|accepted| accepted.and_then(|stream| stream.set_nodelay(true).map(|()| stream)));
    let grpc = tonic::transport::Server::builder()
        .add_service(greeter_server::GreeterServer::new(echo.clone()))
        .add_service(streamer_server::StreamerServer::new(echo.clone()))
        .serve_with_incoming_shutdown(incoming, stop);
    // The REST echo: its own ports, the same runtime, the same handler arm.
    let (h1, h2) = (listen(on.h1).await?, listen(on.h2).await?);
    let rest = RestAddrs {
        h1: h1.local_addr()?,
        h2: h2.local_addr()?,
    };
    let counts = echo.counts.clone();
    let router = rest::router(echo);
    tokio::spawn(rest::serve(h1, Http::H1, router.clone(), counts.clone()));
    tokio::spawn(rest::serve(h2, Http::H2, router, counts));
    Ok((addr, rest, Box::pin(grpc)))
}

// ANCHOR: serve_process
/// What the server runs on, read from the runtime and from /proc; call it
/// once every thread the process will have is started.
pub fn info(
    arm: Arm,
    runtime: &tokio::runtime::Runtime,
    addr: SocketAddr,
    rest: RestAddrs,
) -> ServerInfo {
    let names = worker_threads_named(arm);
    ServerInfo {
        addr,
        rest,
        pid: std::process::id(),
        arm: arm.to_string(),
        workers: runtime.metrics().num_workers(),
        named_worker_threads: names.iter().filter(|n| *n == WORKER_THREAD_NAME).count(),
        threads: names.len(),
        cpus_allowed: proc::cpus_allowed(),
        quota_cpus: harness::pod::own_limits()
            .ok()
            .and_then(|(_, quota)| quota)
            .map(|(quota, period)| quota as f64 / period as f64),
    }
}

/// The server process: `per_call --serve-child`. Blocks until stdin closes.
pub fn serve_process() -> anyhow::Result<()> {
    let ServeArm { arm } = harness::child::config()?;
    let runtime = arm.runtime().context("cannot build the runtime")?;
    let echo = Echo {
        handler: arm.handler,
        counts: Arc::default(),
    };
    let counts = echo.counts.clone();
    let (addr, rest, grpc) =
        runtime.block_on(bind(echo, Listen::LOOPBACK, std::future::pending()))?;
    // The harness's control thread answers the questions; it is not a
    // runtime thread, and it is started before the threads are counted, so
    // the count includes it.
    let handle = runtime.handle().clone();
    let link = harness::child::answer::<ServeArm>(move |Stats| snapshot(&counts, &handle))?;
    link.ready(&info(arm, &runtime, addr, rest))?;
    // On a current-thread runtime, this thread is the runtime's only worker.
    runtime.block_on(grpc)?;
    Ok(())
}
// ANCHOR_END: serve_process
