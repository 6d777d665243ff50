//! A TCP listener that hands out connections only after their TLS handshake.
//!
//! Accepting never waits for anything but the next connection: each handshake
//! runs in a task of its own, so one slow or hostile client cannot hold up
//! anyone else's. A failed handshake is logged with its cause (the most useful
//! line in this chapter's exercises) and never reaches the server.

use std::{
    collections::BTreeMap,
    io,
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use rustls::{ServerConfig, server::Acceptor};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{mpsc, oneshot},
    time::{Instant, timeout, timeout_at},
};
use tokio_rustls::{LazyConfigAcceptor, server::TlsStream};
use tracing::{debug, warn};

// ANCHOR: limits
/// A client gets this long from connecting to send its ClientHello, the
/// handshake's first message. A real client sends it at once, in its first
/// packet; a connection that sends nothing, or a byte at a time, is what a
/// slowloris attack is made of, and it is let go early.
pub const CLIENT_HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// ... and this long, from connecting, to finish the whole handshake.
/// Without a bound, a peer that connects and says nothing would hold a task
/// and a socket forever.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// At most this many handshakes are in progress at once. Past it, a new
/// connection does not wait: the *oldest* handshake still in progress is
/// dropped to make room, as it is the one least likely to belong to a client
/// that will ever finish (a real handshake takes a round trip or two). Each
/// one in progress costs a task, a socket and a few KiB of TLS state.
pub const MAX_PENDING_HANDSHAKES: usize = 1024;
// ANCHOR_END: limits

/// The three limits above, in one value: [`TlsListener::with_limits`] changes
/// them (tests use small ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandshakeLimits {
    pub client_hello: Duration,
    pub total: Duration,
    pub max_pending: usize,
}

impl Default for HandshakeLimits {
    fn default() -> Self {
        HandshakeLimits {
            client_hello: CLIENT_HELLO_TIMEOUT,
            total: HANDSHAKE_TIMEOUT,
            max_pending: MAX_PENDING_HANDSHAKES,
        }
    }
}

pub struct TlsListener {
    tcp: TcpListener,
    config: Arc<ServerConfig>,
    limits: HandshakeLimits,
}

/// A server that cannot listen: on which address, why, and, once the program
/// says so ([`ListenError::name_setting`]), which of its settings moves it.
#[derive(Debug)]
pub struct ListenError {
    pub addr: SocketAddr,
    pub error: io::Error,
    /// Such as `--grpc-addr or GRPC_ADDR`: only the program knows its flags.
    pub setting: Option<&'static str>,
}

impl ListenError {
    /// Names `setting` in the message of `error`, if it is a [`ListenError`].
    pub fn name_setting(mut error: anyhow::Error, setting: &'static str) -> anyhow::Error {
        if let Some(listen) = error.downcast_mut::<ListenError>() {
            listen.setting = Some(setting);
        }
        error
    }
}

impl std::fmt::Display for ListenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            addr,
            error,
            setting,
        } = self;
        write!(f, "cannot listen on {addr}: {error}")?;
        let elsewhere = match setting {
            Some(setting) => format!("or move this server with {setting}"),
            None => "or choose another address".to_string(),
        };
        match error.kind() {
            io::ErrorKind::AddrInUse => write!(
                f,
                " (another process is listening there, perhaps an earlier run of \
                 the workshop; stop it, {elsewhere})"
            ),
            io::ErrorKind::PermissionDenied => write!(
                f,
                " (ports below 1024 need privileges; choose a higher port{})",
                setting.map_or(String::new(), |s| format!(" with {s}"))
            ),
            _ => Ok(()),
        }
    }
}

// The io::Error is part of the message above, so it is not a source too:
// printed as a chain, it would say "Address already in use" twice.
impl std::error::Error for ListenError {}

impl TlsListener {
    /// Binds `addr`. The error ([`ListenError`]) names the address, and says
    /// what a busy port usually means on a reader's machine.
    pub async fn bind(addr: SocketAddr, config: ServerConfig) -> anyhow::Result<Self> {
        let tcp = TcpListener::bind(addr).await.map_err(|error| ListenError {
            addr,
            error,
            setting: None,
        })?;
        Ok(TlsListener {
            tcp,
            config: Arc::new(config),
            limits: HandshakeLimits::default(),
        })
    }

    /// Replaces the handshake limits.
    pub fn with_limits(mut self, limits: HandshakeLimits) -> Self {
        self.limits = limits;
        self
    }

    pub fn local_addr(&self) -> anyhow::Result<SocketAddr> {
        self.tcp
            .local_addr()
            .context("listener has no local address")
    }

    // ANCHOR: incoming
    /// Starts accepting. Each established TLS stream arrives on the returned
    /// channel; dropping the receiver stops the accept loop.
    pub fn incoming(self) -> mpsc::Receiver<TlsStream<TcpStream>> {
        let (tx, rx) = mpsc::channel(16);
        let pending = Arc::new(Pending::new(self.limits.max_pending));
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = tx.closed() => return,
                    accepted = self.tcp.accept() => accepted,
                };
                let (tcp, peer) = match accepted {
                    Ok(pair) => pair,
                    Err(e) => {
                        // Usually "too many open files": back off instead of spinning.
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                // Small request/response messages must not wait for Nagle's algorithm.
                let _ = tcp.set_nodelay(true);
                // Never waits: at the limit, the oldest handshake is told to go.
                let (id, evicted) = pending.admit();
                let (config, limits) = (self.config.clone(), self.limits);
                let (tx, pending) = (tx.clone(), pending.clone());
                tokio::spawn(async move {
                    let outcome = tokio::select! {
                        outcome = handshake(tcp, config, limits) => outcome,
                        _ = evicted => Err(format!(
                            "TLS handshake dropped: {} handshakes in progress and this was the oldest",
                            limits.max_pending
                        )),
                    };
                    pending.finished(id);
                    match outcome {
                        Ok(tls) => {
                            debug!(%peer, "TLS handshake complete");
                            let _ = tx.send(tls).await;
                        }
                        Err(why) => warn!(%peer, "{why}"),
                    }
                });
            }
        });
        rx
    }
    // ANCHOR_END: incoming
}

// ANCHOR: handshake
/// One handshake, in two steps with their own deadlines: read the
/// ClientHello (cheap: no cryptography yet), then complete the handshake.
async fn handshake(
    tcp: TcpStream,
    config: Arc<ServerConfig>,
    limits: HandshakeLimits,
) -> Result<TlsStream<TcpStream>, String> {
    let deadline = Instant::now() + limits.total;
    let hello = timeout(
        limits.client_hello,
        LazyConfigAcceptor::new(Acceptor::default(), tcp),
    )
    .await
    .map_err(|_| {
        format!(
            "TLS handshake timed out: no ClientHello within {:?}",
            limits.client_hello
        )
    })?
    .map_err(|e| format!("TLS handshake failed: {e}"))?;
    timeout_at(deadline, hello.into_stream(config))
        .await
        .map_err(|_| format!("TLS handshake timed out after {:?}", limits.total))?
        .map_err(|e| format!("TLS handshake failed: {e}"))
}
// ANCHOR_END: handshake

/// The handshakes in progress, oldest first, each with the means to stop it.
struct Pending {
    max: usize,
    next_id: AtomicU64,
    /// Dropping a sender tells its handshake to give up.
    in_progress: Mutex<BTreeMap<u64, oneshot::Sender<()>>>,
}

impl Pending {
    fn new(max: usize) -> Self {
        Pending {
            max: max.max(1),
            next_id: AtomicU64::new(0),
            in_progress: Mutex::new(BTreeMap::new()),
        }
    }

    /// Registers a new handshake, making room by dropping the oldest when at
    /// the limit. The receiver resolves if this one is dropped in turn.
    fn admit(&self) -> (u64, oneshot::Receiver<()>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (stop, stopped) = oneshot::channel();
        // A plain mutex: held for a map operation, never across an await.
        let mut in_progress = self.in_progress.lock().unwrap();
        while in_progress.len() >= self.max {
            in_progress.pop_first();
        }
        in_progress.insert(id, stop);
        (id, stopped)
    }

    fn finished(&self, id: u64) {
        self.in_progress.lock().unwrap().remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_limit_the_oldest_handshake_is_dropped() {
        let pending = Pending::new(2);
        let (a, mut stop_a) = pending.admit();
        let (_b, mut stop_b) = pending.admit();
        assert!(
            stop_a
                .try_recv()
                .is_err_and(|e| e == oneshot::error::TryRecvError::Empty)
        );
        let (_c, _stop_c) = pending.admit();
        // The oldest, a, was told to go; b was not.
        assert_eq!(stop_a.try_recv(), Err(oneshot::error::TryRecvError::Closed));
        assert_eq!(stop_b.try_recv(), Err(oneshot::error::TryRecvError::Empty));
        // A finished handshake frees its place without disturbing anyone.
        pending.finished(a);
        let (_d, _stop_d) = pending.admit();
        assert_eq!(stop_b.try_recv(), Err(oneshot::error::TryRecvError::Closed));
    }
}
