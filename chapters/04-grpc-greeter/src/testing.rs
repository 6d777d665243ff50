//! What the integration tests of this and later chapters share: a throwaway PKI,
//! a server on its own task that stops when the test lets go of it, a TLS
//! channel to it, and bounded waits. Behind the `testing` feature, so that it
//! (and `tempfile`) is built only for tests:
//!
//! ```toml
//! [dev-dependencies]
//! grpc-server = { workspace = true, features = ["testing"] }
//! ```
//!
//! Everything here panics instead of returning errors: a failed setup step is
//! a failed test, and the panic message says which step it was. [`raw`] holds
//! the clients of the hostile-client tests, [`scrape`] a strict reader of
//! `/metrics`, [`cli`] what the tests of a program's command line share.

pub mod cli;
pub mod raw;
pub mod scrape;

use std::{
    fmt::Debug,
    future::Future,
    net::SocketAddr,
    ops::Deref,
    path::Path,
    pin::Pin,
    process::{Child, Command, Stdio},
    sync::{Arc, atomic::Ordering},
    task::{Context, Poll},
    time::Duration,
};

use certs::{Pki, TlsArgs};
use tempfile::TempDir;
use tokio::{
    sync::oneshot,
    task::{JoinError, JoinHandle},
    time::{Instant, sleep, timeout},
};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

use crate::{Args, BoundServer, CallStats};

/// The bound on every wait. Far above anything a healthy run needs, even on a
/// loaded two-core machine that is also starting processes, yet short enough
/// that a hang is reported as a failure, not endured.
pub const WAIT: Duration = Duration::from_secs(20);

/// Awaits `fut`, failing the test if it takes longer than [`WAIT`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: no result within {WAIT:?}"))
}

/// Polls `done(subject)` until it holds, failing the test after [`WAIT`] with
/// `subject` printed. Servers update their counters on their own tasks, which a
/// test cannot await, so tests observe them by polling.
pub async fn wait_until<S: Debug + ?Sized>(what: &str, subject: &S, done: impl Fn(&S) -> bool) {
    let give_up = Instant::now() + WAIT;
    while !done(subject) {
        assert!(
            Instant::now() < give_up,
            "{what}: still not true after {WAIT:?}, {subject:?}"
        );
        sleep(Duration::from_millis(10)).await;
    }
}

/// A fresh development PKI in a temporary folder, deleted when this is dropped.
/// It derefs to its [`Pki`], for the paths of its files.
pub struct TempPki {
    pki: Pki,
    // Dropped last: the folder must outlive every use of the paths above.
    _dir: TempDir,
}

impl TempPki {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let pki = Pki::new(dir.path());
        pki.generate(false).expect("generate PKI");
        TempPki { pki, _dir: dir }
    }

    /// What a server needs to find its certificate, key and client CA here.
    pub fn tls_args(&self) -> TlsArgs {
        TlsArgs::in_dir(&self.pki.dir)
    }

    /// A gRPC server on a port the OS picks (`local_addr` says which), with no
    /// concurrency limit; tests change fields from there.
    pub fn server_args(&self, mtls: bool) -> Args {
        Args {
            addr: "127.0.0.1:0".parse().unwrap(),
            tls: self.tls_args(),
            mtls,
            concurrency_limit: None,
        }
    }

    /// The client certificate and key, for a channel to an mTLS server.
    pub fn client_identity(&self) -> Identity {
        Identity::from_pem(
            std::fs::read(self.pki.client_cert()).expect("read client.pem"),
            std::fs::read(self.pki.client_key()).expect("read client.key"),
        )
    }
}

impl Default for TempPki {
    fn default() -> Self {
        Self::new()
    }
}

impl Deref for TempPki {
    type Target = Pki;
    fn deref(&self) -> &Pki {
        &self.pki
    }
}

/// A server's `serve` running on its own task until this guard is dropped or
/// [`stop`](Serving::stop)ped: either starts its graceful shutdown, so no
/// server outlives its test for long.
pub struct Serving {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<anyhow::Result<()>>,
}

/// The `shutdown` future a [`Serving`] hands to `serve`: it resolves when the
/// guard is stopped or dropped.
pub struct Shutdown(oneshot::Receiver<()>);

impl Future for Shutdown {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Sent or dropped, it means the same: stop.
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

/// Spawns `serve(shutdown)`. Any server with a `serve(self, shutdown)` fits,
/// gRPC or REST: `spawn_until_dropped(|shutdown| server.serve(shutdown))`.
pub fn spawn_until_dropped<F, Fut>(serve: F) -> Serving
where
    F: FnOnce(Shutdown) -> Fut,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let (stop, stopped) = oneshot::channel();
    Serving {
        stop: Some(stop),
        task: tokio::spawn(serve(Shutdown(stopped))),
    }
}

impl Serving {
    /// Starts the graceful shutdown now. Fails the test if `serve` has already
    /// returned: a server that stopped before it was told to is a bug.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.send(()).expect("the server was already gone");
        }
    }

    /// Stops the server if that has not been done, and waits (unbounded: wrap
    /// it in [`within`]) for `serve` to return. The outer error is the task's
    /// (it panicked), the inner one `serve`'s.
    pub async fn join(mut self) -> Result<anyhow::Result<()>, JoinError> {
        self.stop.take();
        self.task.await
    }
}

/// A server of this workshop started for a test, gRPC or REST: where it
/// listens, its call counters, the PKI it was made with, and the task serving
/// it until the test stops or drops it. Tests add the clients they need in a
/// trait of their own.
pub struct TestServer {
    pub addr: SocketAddr,
    pub stats: Arc<CallStats>,
    pub serving: Serving,
    pub pki: TempPki,
}

impl TestServer {
    /// Any server with a `serve(self, shutdown)`, bound with `pki`'s files:
    /// `TestServer::start(pki, server.local_addr(), server.stats(), |s| server.serve(s))`.
    pub fn start<F, Fut>(pki: TempPki, addr: SocketAddr, stats: Arc<CallStats>, serve: F) -> Self
    where
        F: FnOnce(Shutdown) -> Fut,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        TestServer {
            addr,
            stats,
            serving: spawn_until_dropped(serve),
            pki,
        }
    }

    /// This chapter's gRPC server on a fresh PKI and a port the OS picks.
    pub async fn grpc(mtls: bool) -> Self {
        let pki = TempPki::new();
        let server = BoundServer::bind(&pki.server_args(mtls))
            .await
            .expect("bind");
        TestServer::start(pki, server.local_addr(), server.stats(), |shutdown| {
            server.serve(shutdown)
        })
    }

    /// Calls whose handler got past validation into its work: a request the
    /// server refused must leave this at 0.
    pub fn handlers_started(&self) -> u64 {
        self.stats.started.load(Ordering::Relaxed)
    }

    /// `path` on this server. The server certificate names 127.0.0.1, so
    /// TLS verification is real.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }
}

/// A TLS channel to `addr` that trusts only the CA in `ca` and, for mTLS,
/// presents `identity`; it connects before returning, within [`WAIT`]. The
/// server certificate is checked against the name `localhost`, one of the names
/// it carries, whatever address the channel dials.
pub async fn tls_channel(
    addr: SocketAddr,
    ca: &Path,
    identity: Option<Identity>,
) -> Result<Channel, tonic::transport::Error> {
    let ca = Certificate::from_pem(std::fs::read(ca).expect("read the CA certificate"));
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(ca)
        .domain_name("localhost");
    if let Some(identity) = identity {
        tls = tls.identity(identity);
    }
    let endpoint = Channel::from_shared(format!("https://{addr}"))
        .expect("an https URI")
        .tls_config(tls)?
        .connect_timeout(WAIT);
    within("connect", endpoint.connect()).await
}

/// A program a test started as a child process, killed when the test ends,
/// passed or failed: a server left running would hold its port and outlive
/// the test run.
pub struct KillOnDrop(Child);

impl KillOnDrop {
    /// Spawns `command` with its output discarded: a test learns what it
    /// needs from the ready file and from calls, and the logs would only
    /// interleave with the test's own output.
    pub fn spawn(command: &mut Command) -> std::io::Result<Self> {
        command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(KillOnDrop)
    }

    /// The text of the ready file at `path`, once the program has written it,
    /// within `limit`. Fails at once if the program exits first, instead of
    /// waiting out the limit for a file that will never come.
    pub fn wait_for_ready_file(&mut self, path: &Path, limit: Duration) -> anyhow::Result<String> {
        program::ready_file::wait(path, limit, || Ok(self.0.try_wait()?.is_none()))
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
