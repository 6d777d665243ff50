//! A delay proxy: distance, made in user space.
//!
//! The kernels of these machines have no `netem`, so a delay cannot be put on
//! a link. The proxy puts it on the path instead: it accepts a connection,
//! dials the real server, and carries the bytes both ways, holding each chunk
//! until its one-way delay has passed. Because a TCP byte stream must never be
//! reordered, jitter can only push a chunk later than the one before it, never
//! ahead of it.
//!
//! What the proxy cannot do by itself, and what it does about it:
//! - The client's TCP handshake completes against the proxy at once. A real
//!   handshake costs a round trip before the client may send, so the first
//!   bytes towards the server leave no earlier than one RTT after the accept:
//!   the call pays for its handshake, only the client's `connect()` returns early.
//! - Each side's TCP talks to the proxy over loopback, so TCP's own
//!   congestion window never feels the delay; HTTP/2's flow-control windows
//!   do, because their WINDOW_UPDATE frames travel through the proxy too.
//!   The lab ([`crate::lab`]) gives real, separate network stacks.
//!
//! On command ([`Proxy::set`]) every connection can stall (bytes are held and
//! delivered on `Forward`) or fall into a blackhole (bytes, and the closing
//! of a connection, vanish; the sockets stay open, as a peer behind a dead
//! link or a frozen host would).

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::{Deserialize, Serialize};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{mpsc, watch},
    task::{JoinHandle, JoinSet},
    time::{Instant, sleep_until},
};

/// The largest chunk read at once; a chunk is the unit that is delayed.
pub const CHUNK_BYTES: usize = 16 * 1024;

/// Chunks held per direction of a connection (16 MiB at most): the proxy's
/// "link buffer". When it is full the proxy stops reading, and the sender's
/// TCP fills up as it would behind a slow link.
pub const HELD_CHUNKS: usize = 1024;

// ANCHOR: path
/// One path between clients and a server.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Path {
    /// One-way delay from the client to the server.
    pub to_server: Duration,
    /// One-way delay from the server back to the client.
    pub to_client: Duration,
    /// Each chunk's delay is drawn uniformly from `delay ± jitter` (never
    /// below zero, never ahead of the chunk before it).
    pub jitter: Duration,
    /// Bytes per second each way, or unlimited. All connections through the
    /// proxy share it, as they would share a link.
    pub rate: Option<u64>,
    /// The jitter's seed: the same seed draws the same delays.
    pub seed: u64,
}
// ANCHOR_END: path

impl Path {
    /// A symmetric path with this round-trip time, no jitter, no rate limit.
    pub fn rtt(rtt: Duration) -> Path {
        Path {
            to_server: rtt / 2,
            to_client: rtt / 2,
            jitter: Duration::ZERO,
            rate: None,
            seed: 1,
        }
    }

    pub fn round_trip(&self) -> Duration {
        self.to_server + self.to_client
    }
}

/// What the proxy does with the bytes it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    Forward,
    /// Hold every byte (delivered, in order, when forwarding resumes).
    Stall,
    /// Drop every byte and every close; keep the sockets open.
    Blackhole,
}

/// How much idle time the wire may make up for at once.
const BURST: Duration = Duration::from_millis(5);

/// One direction of the link, shared by every connection: its rate, and when
/// it is free to carry the next chunk.
#[derive(Debug)]
pub struct Wire {
    rate: u64,
    free_at: std::sync::Mutex<Instant>,
}

impl Wire {
    pub fn new(bytes_per_sec: u64) -> Arc<Wire> {
        Arc::new(Wire {
            rate: bytes_per_sec.max(1),
            free_at: std::sync::Mutex::new(Instant::now()),
        })
    }

    /// Books the wire for `len` bytes; returns when they have been sent.
    fn book(&self, len: usize) -> Instant {
        let mut free_at = self.free_at.lock().unwrap_or_else(|e| e.into_inner());
        // Tokio's timers wake up to a millisecond late. Time the wire was
        // idle because of that is credited back (up to BURST, like tbf's
        // bucket), or the link would run slower than its rate.
        let now = Instant::now();
        let start = (*free_at).max(now.checked_sub(BURST).unwrap_or(now));
        *free_at = start + Duration::from_secs_f64(len as f64 / self.rate as f64);
        *free_at
    }
}

/// A chunk seen arriving at the proxy (before any delay, stall or blackhole).
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    pub at: Instant,
    pub towards_server: bool,
    pub bytes: usize,
}

/// The chunks a proxy has seen, up to [`SEEN_LIMIT`].
pub type SeenLog = Arc<std::sync::Mutex<Vec<Seen>>>;

/// Enough for the keepalive timeline; a long transfer stops adding.
pub const SEEN_LIMIT: usize = 100_000;

/// One direction of one connection: its delay, jitter and rate.
#[derive(Debug, Clone)]
pub struct Direction {
    pub delay: Duration,
    pub jitter: Duration,
    pub wire: Option<Arc<Wire>>,
    /// No byte leaves before this (the handshake's round trip, see above).
    pub opens_at: Instant,
    pub rng: StdRng,
    /// Where arrivals are noted, and which way this direction goes.
    pub seen: Option<(SeenLog, bool)>,
}

impl Direction {
    /// When a chunk that arrived at `arrived` may be delivered.
    fn due(&mut self, arrived: Instant) -> Instant {
        let delay = if self.jitter.is_zero() {
            self.delay
        } else {
            let low = self.delay.saturating_sub(self.jitter);
            let high = self.delay + self.jitter;
            self.rng.random_range(low..=high)
        };
        arrived.max(self.opens_at) + delay
    }

    /// Notes a chunk of `bytes` arriving now, if this direction keeps a log.
    fn note(&self, bytes: usize) {
        let Some((log, towards_server)) = &self.seen else {
            return;
        };
        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() < SEEN_LIMIT && bytes > 0 {
            log.push(Seen {
                at: Instant::now(),
                towards_server: *towards_server,
                bytes,
            });
        }
    }
}

/// A chunk on its way: `None` is the sender's end of stream (FIN).
struct Held {
    due: Instant,
    bytes: Option<Vec<u8>>,
}

// ANCHOR: carry
/// Carries bytes from `from` to `to` through one direction of the path,
/// until `from` ends (then `to` is shut down) or either side fails.
pub async fn carry(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut direction: Direction,
    mut mode: watch::Receiver<Mode>,
) -> std::io::Result<()> {
    let (tx, mut rx) = mpsc::channel::<Held>(HELD_CHUNKS);
    let wire = direction.wire.clone();
    let read = async move {
        let mut last_due = Instant::now();
        loop {
            let mut buf = vec![0; CHUNK_BYTES];
            let n = from.read(&mut buf).await?;
            direction.note(n);
            // Jitter may delay a chunk, never let it overtake the one before.
            let due = direction.due(Instant::now()).max(last_due);
            last_due = due;
            buf.truncate(n);
            let bytes = (n > 0).then_some(buf);
            let end = bytes.is_none();
            if tx.send(Held { due, bytes }).await.is_err() || end {
                return std::io::Result::Ok(());
            }
        }
    };
    let write = async {
        while let Some(held) = rx.recv().await {
            sleep_until(held.due).await;
            let now = *mode.wait_for(|m| *m != Mode::Stall).await.map_err(gone)?;
            if now == Mode::Blackhole {
                continue;
            }
            let Some(bytes) = held.bytes else {
                to.shutdown().await?;
                break;
            };
            // A rate limit serialises chunks on the wire, after their delay.
            if let Some(wire) = &wire {
                sleep_until(wire.book(bytes.len())).await;
            }
            to.write_all(&bytes).await?;
        }
        std::io::Result::Ok(())
    };
    tokio::try_join!(read, write)?;
    // A blackhole swallows the close too: keep the socket until it is lifted.
    let _ = mode.wait_for(|m| *m != Mode::Blackhole).await;
    Ok(())
}
// ANCHOR_END: carry

fn gone(_: watch::error::RecvError) -> std::io::Error {
    std::io::Error::other("the proxy was stopped")
}

/// A running proxy. Dropping it stops it and closes its connections.
pub struct Proxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    accepted: Arc<AtomicU64>,
    seen: SeenLog,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Listens on `listen` and carries every connection to `upstream`.
    pub async fn start(
        listen: SocketAddr,
        upstream: SocketAddr,
        path: Path,
    ) -> anyhow::Result<Proxy> {
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("the proxy cannot listen on {listen}"))?;
        let addr = listener.local_addr()?;
        let (mode, _) = watch::channel(Mode::Forward);
        let accepted = Arc::new(AtomicU64::new(0));
        let seen = SeenLog::default();
        let shared = Shared {
            upstream,
            path,
            wires: path.rate.map(|rate| (Wire::new(rate), Wire::new(rate))),
            seen: seen.clone(),
        };
        let task = tokio::spawn(accept_loop(
            listener,
            shared,
            mode.clone(),
            accepted.clone(),
        ));
        Ok(Proxy {
            addr,
            mode,
            accepted,
            seen,
            task,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Forward, stall or blackhole every connection, open and future.
    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// The chunks seen arriving so far, both ways.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What every connection of one proxy shares.
#[derive(Clone)]
struct Shared {
    upstream: SocketAddr,
    path: Path,
    /// The wire towards the server and the one back.
    wires: Option<(Arc<Wire>, Arc<Wire>)>,
    seen: SeenLog,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Shared,
    mode: watch::Sender<Mode>,
    accepted: Arc<AtomicU64>,
) {
    accept_each(listener, "proxy", |client| {
        let n = accepted.fetch_add(1, Ordering::Relaxed);
        // One seed per connection, so a run draws the same delays again.
        let seed = shared.path.seed.wrapping_add(n);
        connection(client, shared.clone(), seed, mode.subscribe())
    })
    .await
}

/// Accepts connections on `listener` for as long as it runs, each served by
/// a task of its own that `serve` makes (chapter 18's middlebox uses it too).
/// The tasks are owned here, so aborting the task that runs this ends them all.
pub async fn accept_each<F, Fut>(listener: TcpListener, who: &str, mut serve: F)
where
    F: FnMut(TcpStream) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            next = listener.accept() => match next {
                Ok((client, _)) => {
                    connections.spawn(serve(client));
                }
                Err(error) => {
                    // Out of file descriptors, say: wait rather than spin.
                    tracing::warn!(%error, "the {who} cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next() => {}
        }
    }
}

async fn connection(client: TcpStream, shared: Shared, seed: u64, mode: watch::Receiver<Mode>) {
    let (upstream, path) = (shared.upstream, shared.path);
    let accepted_at = Instant::now();
    let server = match TcpStream::connect(upstream).await {
        Ok(server) => server,
        Err(error) => {
            tracing::warn!(%upstream, %error, "the proxy cannot reach the server; closing the client's connection");
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let direction = |towards_server: bool, opens_at| Direction {
        delay: if towards_server {
            path.to_server
        } else {
            path.to_client
        },
        jitter: path.jitter,
        wire: shared.wires.as_ref().map(|(up, down)| {
            if towards_server {
                up.clone()
            } else {
                down.clone()
            }
        }),
        opens_at,
        rng: StdRng::seed_from_u64(seed.wrapping_mul(2).wrapping_add(towards_server.into())),
        seen: Some((shared.seen.clone(), towards_server)),
    };
    // The client's first bytes leave one round trip after the accept: the
    // SYN, SYN-ACK exchange the loopback handshake skipped.
    let up = direction(true, accepted_at + path.round_trip());
    let down = direction(false, accepted_at);
    let result = tokio::try_join!(
        carry(client_read, server_write, up, mode.clone()),
        carry(server_read, client_write, down, mode),
    );
    if let Err(error) = result {
        tracing::debug!(%error, "a proxied connection ended with an error");
    }
}
