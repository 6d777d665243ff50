//! The server under test, and the process it runs in.
//!
//! [`serve_process`] is what the child process runs: it builds the arm's
//! runtime, serves the echo on a free loopback port (plaintext HTTP/2: the
//! price under study is the call machinery, not encryption, which chapter 10
//! measured), prints one [`ServerInfo`] line, then answers every `stats` line
//! on its stdin with a [`Snapshot`]. It exits when its stdin closes, so it
//! never outlives the experiment. [`ServerProcess`] is the experiment's side.

use std::{
    io::{BufRead, BufReader, Write},
    net::SocketAddr,
    path::Path,
    pin::Pin,
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::{Context, bail};
use program::proc::{self, Pid};
use proto::{
    greeter::v1::{HelloReply, HelloRequest, greeter_server},
    streaming::v1::{Chunk, CountdownRequest, Tick, UploadSummary, streamer_server},
};
use serde::{Deserialize, Serialize};
use tokio_stream::{Stream, StreamExt, wrappers::TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

use crate::arm::{Arm, Handler, WORKER_THREAD_NAME};

/// What the handlers count.
#[derive(Debug, Default)]
pub struct Counts {
    pub unary_calls: AtomicU64,
    pub messages: AtomicU64,
    pub spawned: AtomicU64,
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
    async fn run<T: Send + 'static>(
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

// ANCHOR: unary
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
// ANCHOR_END: unary

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
        }
    }
}

fn snapshot(counts: &Counts, runtime: &tokio::runtime::Handle) -> Snapshot {
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
    }
}

// ANCHOR: serve_process
/// The server process: `per_call --serve ARM`. Blocks until stdin closes.
pub fn serve_process(arm: Arm) -> anyhow::Result<()> {
    let runtime = arm.runtime().context("cannot build the runtime")?;
    let counts = Arc::new(Counts::default());
    let echo = Echo {
        handler: arm.handler,
        counts: counts.clone(),
    };
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let addr = listener.local_addr()?;
    // `serve_with_incoming` ignores tonic's `tcp_nodelay` setting (on by
    // default with `serve`), so it is set here: with Nagle's algorithm on,
    // small replies wait for the client's ACKs and the arms measure that.
    let incoming = TcpListenerStream::new(listener)
        .map(|accepted| accepted.and_then(|stream| stream.set_nodelay(true).map(|()| stream)));
    let server = tonic::transport::Server::builder()
        .add_service(greeter_server::GreeterServer::new(echo.clone()))
        .add_service(streamer_server::StreamerServer::new(echo))
        .serve_with_incoming(incoming);

    // The control thread reads commands; it is not a runtime thread, and it
    // is named so that thread counts can tell it apart.
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name("per-call-ctl".into())
        .spawn(move || control(addr, arm, &counts, &handle))?;
    // On a current-thread runtime, this thread is the runtime's only worker.
    runtime.block_on(server)?;
    Ok(())
}
// ANCHOR_END: serve_process

fn control(addr: SocketAddr, arm: Arm, counts: &Counts, runtime: &tokio::runtime::Handle) {
    let names = proc::thread_names(Pid::This);
    let info = ServerInfo {
        addr,
        pid: std::process::id(),
        arm: arm.to_string(),
        workers: runtime.metrics().num_workers(),
        named_worker_threads: names.iter().filter(|n| *n == WORKER_THREAD_NAME).count(),
        threads: names.len(),
        cpus_allowed: proc::cpus_allowed(),
    };
    let mut out = std::io::stdout().lock();
    let say = |out: &mut std::io::StdoutLock, line: String| {
        writeln!(out, "{line}").and_then(|_| out.flush()).is_ok()
    };
    if !say(
        &mut out,
        serde_json::to_string(&info).expect("serializable"),
    ) {
        std::process::exit(1);
    }
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let reply = match line.trim() {
            "stats" => serde_json::to_string(&snapshot(counts, runtime)).expect("serializable"),
            other => format!("{{\"error\":\"unknown command `{other}`\"}}"),
        };
        if !say(&mut out, reply) {
            break;
        }
    }
    // stdin closed: the experiment is over (or gone). Leave at once.
    std::process::exit(0);
}

/// How the server process was placed.
#[derive(Debug, Clone, Serialize)]
pub struct Placement {
    /// `taskset -c 0` was used for the server, and the experiment moved itself to CPU 1.
    pub pinned: bool,
    pub note: String,
}

/// Pins the calling process (call it before any other thread exists, so that
/// every thread started later inherits it) to `cpu` with `taskset`.
pub fn pin_self(cpu: usize) -> anyhow::Result<()> {
    let status = Command::new("taskset")
        .args(["-pc", &cpu.to_string(), &std::process::id().to_string()])
        .stdout(Stdio::null())
        .status()
        .context("cannot run taskset")?;
    if !status.success() {
        bail!("taskset -pc {cpu} failed: {status}");
    }
    Ok(())
}

/// Whether `taskset` can be found on PATH.
pub fn have(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| Path::new(&dir).join(program).is_file())
    })
}

/// The experiment's handle on a running server process.
pub struct ServerProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pub info: ServerInfo,
}

impl ServerProcess {
    /// Starts `exe --serve ARM`, on CPU `cpu` when given (with taskset).
    pub fn start(exe: &Path, arm: Arm, cpu: Option<usize>) -> anyhow::Result<ServerProcess> {
        ServerProcess::start_wrapped(exe, arm, cpu, &[])
    }

    /// Like [`ServerProcess::start`], under a wrapper such as `strace -c -f -o FILE`.
    pub fn start_wrapped(
        exe: &Path,
        arm: Arm,
        cpu: Option<usize>,
        wrapper: &[String],
    ) -> anyhow::Result<ServerProcess> {
        let mut words: Vec<String> = Vec::new();
        if let Some(cpu) = cpu {
            words.extend(["taskset".into(), "-c".into(), cpu.to_string()]);
        }
        words.extend(wrapper.iter().cloned());
        words.push(exe.display().to_string());
        let mut command = Command::new(&words[0]);
        command.args(&words[1..]);
        command
            .args(["--serve", &arm.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start {}", exe.display()))?;
        let stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let info: ServerInfo = serde_json::from_str(&line).with_context(|| {
            format!("the server process did not say where it listens (it said {line:?})")
        })?;
        Ok(ServerProcess {
            child,
            stdin,
            stdout,
            info,
        })
    }

    pub fn snapshot(&mut self) -> anyhow::Result<Snapshot> {
        writeln!(self.stdin, "stats")?;
        self.stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        serde_json::from_str(&line)
            .with_context(|| format!("the server process sent {line:?} instead of its stats"))
    }

    /// Closes its stdin (it exits) and waits for it.
    pub fn stop(self) -> anyhow::Result<()> {
        let ServerProcess {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        child.wait()?;
        Ok(())
    }
}
