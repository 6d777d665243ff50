//! A middlebox: the machine on the path that forgets a quiet connection.
//!
//! A TCP connection costs its two ends nothing while it is quiet: no packet
//! crosses, and both kernels keep it open for ever. The boxes between them
//! are not so patient. A NAT, a firewall or a cloud load balancer keeps an
//! entry per flow and throws it away once the flow has been quiet for a
//! while (an AWS Network Load Balancer: 350 s). Neither end is told. Only
//! the next packet finds out, and what it finds depends on the box: most
//! drop it without a word, so the sender waits for an answer that never
//! comes; an AWS NLB answers it with a RST, so the sender learns at
//! once. Keepalive exists because of these boxes: something must cross
//! before the box's timer runs out.
//!
//! This relay plays such a box on loopback: one flow per accepted
//! connection, the same idle timer, and both endings ([`OnIdle`]). What
//! counts as activity is the box's choice too. A box at the TCP level counts
//! every packet; a proxy that speaks HTTP/2 counts requests, and answers or
//! swallows PING frames itself, so a client's keepalive pings reach no server
//! and keep nothing alive ([`Policy::eat_pings`]).
//!
//! What a relay cannot do like the real box, and what it does instead:
//! - It cannot lose a packet: it holds two TCP connections, and its kernel
//!   acknowledges every byte a peer sends. A forgotten flow's bytes are read
//!   and thrown away. The sender learns nothing, as behind the real box, but
//!   its TCP never retransmits, so the socket does not fail by itself after
//!   the retransmission timeout (some 15 minutes on Linux): only an
//!   application's deadline or its keepalive can notice.
//! - It cannot see TCP's own keepalive probes: they carry no byte, and the
//!   relay's kernel answers them. Through this relay TCP keepalive neither
//!   keeps a flow alive nor finds out that it is gone; keepalive above TCP
//!   (HTTP/2 PINGs) meets the box as it would the real one.
//! - It cannot send a RST for a flow it has already closed. So it keeps a
//!   forgotten flow's sockets open, and closes one with a zero linger, which
//!   makes the kernel send RST instead of FIN, when its peer sends again.

use std::{
    io,
    net::SocketAddr,
    ops::ControlFlow,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tokio::{
    io::{AsyncWriteExt, Interest, Ready},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
    time::{Instant, sleep_until},
};

use crate::frames::{self, Scanner};

/// The largest chunk read from a peer at once.
pub const CHUNK_BYTES: usize = 16 * 1024;

/// What the box does to a flow it has forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum OnIdle {
    /// Throw away whatever either peer sends later, and their closes too:
    /// no FIN, no RST, no answer at all.
    Drop,
    /// Answer the next bytes (or FIN) a peer sends with a RST, as an AWS NLB
    /// does to traffic on a flow it no longer tracks.
    Reset,
}

/// How the box treats every flow through it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// A flow is forgotten once no byte has passed either way for this
    /// long; `None` never forgets.
    pub idle: Option<Duration>,
    pub on_idle: OnIdle,
    /// Remove HTTP/2 PING frames (and their ACKs) both ways, as a proxy that
    /// answers or ignores them itself. An eaten PING is not activity.
    pub eat_pings: bool,
}

/// What a middlebox has done so far, over all its flows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Connections accepted.
    pub flows: u64,
    /// Flows forgotten for being idle.
    pub expired: u64,
    /// RSTs the box sent on its own, to peers of forgotten flows (a RST
    /// passed on from one peer to the other is not counted).
    pub resets: u64,
    /// PING frames passed on, either way, ACKs included.
    pub pings_passed: u64,
    /// PING frames removed, either way, ACKs included.
    pub pings_eaten: u64,
    /// Bytes that arrived for a forgotten flow and went nowhere.
    pub bytes_lost: u64,
}

#[derive(Debug, Default)]
struct Counters {
    flows: AtomicU64,
    expired: AtomicU64,
    resets: AtomicU64,
    pings_passed: AtomicU64,
    pings_eaten: AtomicU64,
    bytes_lost: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> Counts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Counts {
            flows: get(&self.flows),
            expired: get(&self.expired),
            resets: get(&self.resets),
            pings_passed: get(&self.pings_passed),
            pings_eaten: get(&self.pings_eaten),
            bytes_lost: get(&self.bytes_lost),
        }
    }
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// A running middlebox. Dropping it stops it and closes all its flows.
pub struct Middlebox {
    addr: SocketAddr,
    counters: Arc<Counters>,
    task: JoinHandle<()>,
}

impl Middlebox {
    /// Listens on `listen` and relays every connection to `upstream`.
    pub async fn start(
        listen: SocketAddr,
        upstream: SocketAddr,
        policy: Policy,
    ) -> anyhow::Result<Middlebox> {
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("the middlebox cannot listen on {listen}"))?;
        let addr = listener.local_addr()?;
        // Each flow would dial the box again, and that flow the box again...
        anyhow::ensure!(
            upstream != addr,
            "the middlebox on {addr} cannot be its own upstream"
        );
        let counters = Arc::new(Counters::default());
        let task = tokio::spawn(accept_loop(listener, upstream, policy, counters.clone()));
        Ok(Middlebox {
            addr,
            counters,
            task,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn counts(&self) -> Counts {
        self.counters.snapshot()
    }
}

impl Drop for Middlebox {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    policy: Policy,
    counters: Arc<Counters>,
) {
    network::proxy::accept_each(listener, "middlebox", |client| {
        add(&counters.flows, 1);
        flow(client, upstream, policy, counters.clone())
    })
    .await
}

async fn flow(client: TcpStream, upstream: SocketAddr, policy: Policy, counters: Arc<Counters>) {
    let server = match TcpStream::connect(upstream).await {
        Ok(server) => server,
        Err(error) => {
            tracing::warn!(%upstream, %error, "the middlebox cannot reach the server; closing the client's connection");
            return;
        }
    };
    // Nagle's algorithm would hold a small write back until the last one is
    // acknowledged: a delay the real box does not add.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    Flow {
        ends: [
            End::new(client, Scanner::from_client()),
            End::new(server, Scanner::from_server()),
        ],
        policy,
        counters,
        last_activity: Instant::now(),
        expired: false,
    }
    .run()
    .await;
}

/// One peer of a flow, and what it has sent that is not yet passed on.
struct End {
    /// `None` once the box has let go of it (a RST, or the peer's error).
    socket: Option<TcpStream>,
    /// Follows the peer's HTTP/2 frames, to find its PINGs.
    scanner: Scanner,
    /// Whether the peer may still send (no end of stream, no error yet).
    reading: bool,
    /// Bytes from this peer still to be written to the other. The box reads
    /// no more from a peer until they are: the other peer's TCP window, not
    /// the box, holds a sender back.
    pending: Vec<u8>,
    /// The peer's end of stream arrived while the flow was alive: pass it on
    /// once `pending` has been written.
    close_to_pass: bool,
}

impl End {
    fn new(socket: TcpStream, scanner: Scanner) -> End {
        End {
            socket: Some(socket),
            scanner,
            reading: true,
            pending: Vec::new(),
            close_to_pass: false,
        }
    }
}

/// What woke the flow up.
enum Event {
    /// A peer's socket (0: client, 1: server) can be read or written.
    Ready(usize, io::Result<Ready>),
    /// No byte has passed for the idle timeout.
    Quiet,
}

/// One connection through the box: two peers and one idle timer. A single
/// task serves both directions so that the box can close a peer's whole
/// socket (both directions of it) the moment that peer sends too late.
struct Flow {
    ends: [End; 2],
    policy: Policy,
    counters: Arc<Counters>,
    last_activity: Instant,
    expired: bool,
}

impl Flow {
    async fn run(mut self) {
        let mut buf = vec![0; CHUNK_BYTES];
        loop {
            if self.pass_closes().await.is_break() {
                return;
            }
            let interest = [self.interest(0), self.interest(1)];
            // Nothing more can be read or written: both peers have closed,
            // or been reset. An idle timer alone keeps nothing open.
            if interest == [None, None] {
                return;
            }
            let event = tokio::select! {
                ready = wait(self.ends[0].socket.as_ref(), interest[0]) => Event::Ready(0, ready),
                ready = wait(self.ends[1].socket.as_ref(), interest[1]) => Event::Ready(1, ready),
                () = until(self.deadline()) => Event::Quiet,
            };
            let step = match event {
                Event::Quiet => self.expire(),
                Event::Ready(i, Ok(ready)) => self.on_ready(i, ready, &mut buf),
                Event::Ready(i, Err(error)) => self.on_error(i, error),
            };
            if step.is_break() {
                return;
            }
        }
    }

    /// When the flow is forgotten unless a byte passes first. Activity moves
    /// it later; the timer is set again on every turn of the loop.
    fn deadline(&self) -> Option<Instant> {
        let idle = self.policy.idle.filter(|_| !self.expired)?;
        // Too far to represent is never.
        self.last_activity.checked_add(idle)
    }

    /// The box throws the flow's entry away. Neither peer is told: only
    /// what they send from now on finds out.
    fn expire(&mut self) -> ControlFlow<()> {
        self.expired = true;
        add(&self.counters.expired, 1);
        ControlFlow::Continue(())
    }

    /// Read from peer `i` once it has nothing left to pass on; write to it
    /// while the other peer does.
    fn interest(&self, i: usize) -> Option<Interest> {
        match (self.wants_read(i), self.wants_write(i)) {
            (true, true) => Some(Interest::READABLE | Interest::WRITABLE),
            (true, false) => Some(Interest::READABLE),
            (false, true) => Some(Interest::WRITABLE),
            (false, false) => None,
        }
    }

    fn wants_read(&self, i: usize) -> bool {
        let end = &self.ends[i];
        end.socket.is_some() && end.reading && end.pending.is_empty()
    }

    fn wants_write(&self, i: usize) -> bool {
        self.ends[i].socket.is_some() && !self.ends[1 - i].pending.is_empty()
    }

    fn on_ready(&mut self, i: usize, ready: Ready, buf: &mut [u8]) -> ControlFlow<()> {
        if ready.is_readable() && self.wants_read(i) {
            let Some(socket) = &self.ends[i].socket else {
                return ControlFlow::Continue(());
            };
            match socket.try_read(buf) {
                Ok(0) => self.on_close(i),
                Ok(n) => self.on_bytes(i, &buf[..n]),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return self.on_error(i, error),
            }
        }
        if ready.is_writable() && self.wants_write(i) {
            let Some(socket) = &self.ends[i].socket else {
                return ControlFlow::Continue(());
            };
            match socket.try_write(&self.ends[1 - i].pending) {
                Ok(0) => return self.on_error(i, io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.ends[1 - i].pending.drain(..n);
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return self.on_error(i, error),
            }
        }
        ControlFlow::Continue(())
    }

    /// Bytes from peer `i`.
    fn on_bytes(&mut self, i: usize, bytes: &[u8]) {
        if self.expired {
            self.too_late(i, bytes.len());
            return;
        }
        let end = &mut self.ends[i];
        let before = end.pending.len();
        if self.policy.eat_pings {
            let frames = end
                .scanner
                .filter(bytes, &mut end.pending, |f| f.kind == frames::PING);
            add(&self.counters.pings_eaten, pings(&frames));
        } else {
            let frames = end.scanner.observe(bytes);
            end.pending.extend_from_slice(bytes);
            add(&self.counters.pings_passed, pings(&frames));
        }
        // Only bytes passed on are activity. A proxy that answers PINGs
        // itself counts requests, not pings: a connection that carries
        // nothing but PINGs is idle to it.
        if end.pending.len() > before {
            self.last_activity = Instant::now();
        }
    }

    /// Peer `i` ended its stream (FIN).
    fn on_close(&mut self, i: usize) {
        self.ends[i].reading = false;
        if self.expired {
            // A FIN is a packet too: it finds the flow gone.
            self.too_late(i, 0);
        } else {
            self.ends[i].close_to_pass = true;
        }
    }

    // ANCHOR: too_late
    /// Peer `i` sent `n` bytes, or its FIN, after the flow was forgotten.
    fn too_late(&mut self, i: usize, n: usize) {
        add(&self.counters.bytes_lost, n as u64);
        match self.policy.on_idle {
            // Read and thrown away; the other peer never hears of it, and
            // this one waits for an answer that will not come.
            OnIdle::Drop => {}
            // This peer learns at once; the other still knows nothing.
            OnIdle::Reset => {
                self.reset(i);
                add(&self.counters.resets, 1);
            }
        }
    }

    /// Closes peer `i`'s socket so that the kernel sends RST, not FIN.
    fn reset(&mut self, i: usize) {
        if let Some(socket) = self.ends[i].socket.take() {
            // Should this fail, the close is a FIN: still an ending.
            if let Err(error) = socket.set_zero_linger() {
                tracing::debug!(%error, "the middlebox cannot set a zero linger");
            }
            // Closing a socket whose linger is zero aborts the connection.
            drop(socket);
        }
        self.let_go(i);
    }
    // ANCHOR_END: too_late

    /// Forgets peer `i`: nothing more is read from it or written to it.
    fn let_go(&mut self, i: usize) {
        self.ends[i].socket = None;
        self.ends[i].reading = false;
        self.ends[i].close_to_pass = false;
        self.ends[1 - i].pending.clear();
    }

    /// Peer `i`'s socket failed: most often the peer reset it.
    fn on_error(&mut self, i: usize, error: io::Error) -> ControlFlow<()> {
        tracing::debug!(%error, peer = i, "a flow through the middlebox failed");
        self.let_go(i);
        if self.expired {
            // Nothing is passed on for a forgotten flow.
            return ControlFlow::Continue(());
        }
        // A box that still knows the flow passes a RST on, as it passes FINs.
        self.reset(1 - i);
        ControlFlow::Break(())
    }

    /// Passes on each end of stream that arrived while the flow was alive,
    /// after the bytes that came before it: the other peer's socket is shut
    /// down for writing, as a plain relay does.
    async fn pass_closes(&mut self) -> ControlFlow<()> {
        for i in 0..2 {
            let end = &mut self.ends[i];
            if !end.close_to_pass || !end.pending.is_empty() {
                continue;
            }
            end.close_to_pass = false;
            if let Some(socket) = self.ends[1 - i].socket.as_mut()
                && let Err(error) = socket.shutdown().await
            {
                return self.on_error(1 - i, error);
            }
        }
        ControlFlow::Continue(())
    }
}

fn pings(frames: &[frames::Frame]) -> u64 {
    frames.iter().filter(|f| f.kind == frames::PING).count() as u64
}

/// Waits until `socket` is ready for `interest`; for ever without either.
async fn wait(socket: Option<&TcpStream>, interest: Option<Interest>) -> io::Result<Ready> {
    match (socket, interest) {
        (Some(socket), Some(interest)) => socket.ready(interest).await,
        _ => std::future::pending().await,
    }
}

/// Sleeps until `deadline`; for ever without one.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
