//! The server's side of gRFC A8: a client that pings too often earns a GOAWAY.
//!
//! A client's keepalive is a PING on an otherwise quiet connection. gRFC A8
//! lets the server decide how often that is acceptable, and the gRPC servers
//! of C, Java and Go enforce it: a client that pings too often is told
//! `GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings")` and loses its connection,
//! with every call on it. A tonic server cannot show that: hyper leaves PING
//! to h2, which answers every one and counts none. So this chapter puts the
//! rule in front of hyper, where chapter 4 put its preface deadline: an IO
//! wrapper ([`Enforced`]) that follows both directions' frames with
//! [`Scanner`] and, once the client has earned it, writes the GOAWAY itself,
//! closes the socket and tells hyper the client has gone.
//!
//! The rule is grpc-go's, read in `internal/transport/http2_server.go`,
//! `(*http2Server).handlePing` (constants `maxPingStrikes = 2` and
//! `defaultPingTimeout = 2 * time.Hour` beside it; `defaultKeepalivePolicyMinTime
//! = 5 * time.Minute` in `internal/transport/defaults.go`). For every PING
//! that is not an ACK:
//!
//! - if the server has sent HEADERS or DATA since the previous PING (the
//!   `resetPingStrikes` flag, set by those frames' `onWrite`), the strikes go
//!   back to 0 and this PING is not checked;
//! - else, with no active stream and `PermitWithoutStream` false, a PING
//!   sooner than 2 hours after the previous one is a strike;
//! - else a PING sooner than `MinTime` after the previous one is a strike;
//! - in every case the PING's time becomes the previous one (`lastPingAt`, set
//!   in a `defer`). It starts at Go's zero time, so the first PING is never a
//!   strike; here it starts as `None`.
//! - more strikes than `maxPingStrikes` put a `goAway{ENHANCE_YOUR_CALM,
//!   "too_many_pings", closeConn}`: the GOAWAY names the highest stream the
//!   client opened (`maxStreamID`, in `outgoingGoAwayHandler`) and the
//!   connection is closed.
//!
//! So with the defaults the fourth quick PING ends the connection. gRFC A8's
//! own "suggested algorithm" differs in two details: only a valid PING moves
//! its `last_valid_ping_time`, and a HEADERS or DATA frame sent resets the
//! strikes at once. grpc-go's version is the stricter one (a PING after a
//! strike is measured from the strike), and it is the one servers run.
//!
//! Streams are followed only as far as the rule needs: a client's HEADERS on
//! a new (higher, odd) stream id opens one; the server's END_STREAM (its
//! trailers) or a RST_STREAM either way closes it.

use std::{
    collections::HashSet,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    task::{Context, Poll, Waker, ready},
    time::Duration,
};

use serde::{Deserialize, Serialize};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    time::Instant,
};
use tokio_stream::Stream;
use tonic::transport::server::Connected;
use tracing::{debug, info};

use crate::frames::{
    self, DATA, END_STREAM, ENHANCE_YOUR_CALM, Frame, HEADERS, RST_STREAM, Scanner,
};

// ANCHOR: policy
/// How often a client may ping (gRFC A8's server settings).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PingPolicy {
    /// `PERMIT_KEEPALIVE_TIME`: the shortest gap between two PINGs while a
    /// call is open (or always, with `permit_without_calls`).
    pub min_time: Duration,
    /// `PERMIT_KEEPALIVE_WITHOUT_CALLS`: whether `min_time` also applies with
    /// no call open; if not, the gap must then be [`IDLE_MIN_TIME`].
    pub permit_without_calls: bool,
    /// Strikes tolerated; one more earns the GOAWAY.
    pub max_strikes: u32,
}

impl PingPolicy {
    /// gRFC A8's defaults, which grpc-go, grpc-java and gRPC core ship.
    pub const A8_DEFAULT: PingPolicy = PingPolicy {
        min_time: Duration::from_secs(5 * 60),
        permit_without_calls: false,
        max_strikes: 2,
    };
}

/// The gap a PING needs with no call open, unless the policy permits pings
/// without calls: TCP keepalive's 2 hours (grpc-go's `defaultPingTimeout`).
pub const IDLE_MIN_TIME: Duration = Duration::from_secs(2 * 60 * 60);

/// The GOAWAY's debug data, which a gRPC client recognises (gRFC A8).
pub const TOO_MANY_PINGS: &[u8] = b"too_many_pings";
// ANCHOR_END: policy

/// What one connection saw, for the experiment's records.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConnectionLog {
    /// The connection's number, in the order they were accepted.
    pub connection: u64,
    /// When each PING (not an ACK) arrived, in seconds since the log's start.
    pub pings_s: Vec<f64>,
    /// The strikes after the latest PING.
    pub strikes: u32,
    /// When the GOAWAY had been written, if it was.
    pub goaway_s: Option<f64>,
}

/// Shared by all connections of one server: every connection's log.
#[derive(Debug, Clone)]
pub struct Log {
    /// Tokio's clock, so that a test on a paused clock reads exact times.
    start: Instant,
    connections: Arc<Mutex<Vec<ConnectionLog>>>,
}

impl Log {
    pub fn new() -> Log {
        Log {
            start: Instant::now(),
            connections: Arc::default(),
        }
    }

    /// A copy of every connection's log so far.
    pub fn connections(&self) -> Vec<ConnectionLog> {
        self.lock().clone()
    }

    /// A panic elsewhere while the lock was held leaves plain data behind;
    /// the records are still worth having.
    fn lock(&self) -> MutexGuard<'_, Vec<ConnectionLog>> {
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a connection's log; returns its index.
    fn open(&self) -> usize {
        let mut connections = self.lock();
        let index = connections.len();
        connections.push(ConnectionLog {
            connection: index as u64,
            ..ConnectionLog::default()
        });
        index
    }

    fn update(&self, index: usize, change: impl FnOnce(&mut ConnectionLog)) {
        if let Some(connection) = self.lock().get_mut(index) {
            change(connection);
        }
    }

    fn seconds(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.start).as_secs_f64()
    }
}

impl Default for Log {
    fn default() -> Log {
        Log::new()
    }
}

/// Where the connection is on its way to a GOAWAY.
#[derive(Debug)]
enum State {
    /// Every byte passes.
    Passing,
    /// The client has earned a GOAWAY: these bytes, of which `written` are
    /// out. They go out at the next frame boundary of the server's side,
    /// before any more of hyper's bytes.
    Owed { goaway: Vec<u8>, written: usize },
    /// The GOAWAY is out; the socket's write side is being shut.
    ShuttingDown,
    /// Reads end (EOF) and writes fail: hyper ends the connection.
    Closed,
}

/// An accepted connection whose client PINGs are held to a [`PingPolicy`].
/// Until a GOAWAY is owed, every byte passes both ways unchanged.
pub struct Enforced<IO> {
    io: IO,
    peer: Option<SocketAddr>,
    policy: PingPolicy,
    log: Log,
    /// This connection's index in `log`.
    index: usize,
    from_client: Scanner,
    from_server: Scanner,
    /// The client's streams that are still open.
    open: HashSet<u32>,
    /// The highest stream id the client opened: the GOAWAY's last stream.
    last_stream: u32,
    last_ping: Option<Instant>,
    pings: u32,
    strikes: u32,
    /// The server has sent HEADERS or DATA since the last PING.
    reset_strikes: bool,
    state: State,
    /// A read waiting for the server's side to reach a frame boundary.
    reader: Option<Waker>,
}

impl<IO> Enforced<IO> {
    pub fn new(io: IO, policy: PingPolicy, log: Log) -> Self {
        let index = log.open();
        Enforced {
            io,
            peer: None,
            policy,
            log,
            index,
            from_client: Scanner::from_client(),
            from_server: Scanner::from_server(),
            open: HashSet::new(),
            last_stream: 0,
            last_ping: None,
            pings: 0,
            strikes: 0,
            reset_strikes: false,
            state: State::Passing,
            reader: None,
        }
    }

    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// A frame the client sent.
    fn client_frame(&mut self, frame: &Frame) {
        match frame.kind {
            // Client streams are odd and rise; a HEADERS on a known stream
            // is the client's trailers, not a new call.
            HEADERS if frame.stream % 2 == 1 && frame.stream > self.last_stream => {
                self.last_stream = frame.stream;
                self.open.insert(frame.stream);
            }
            RST_STREAM => {
                self.open.remove(&frame.stream);
            }
            _ if frame.is_ping() => self.ping(Instant::now()),
            _ => {}
        }
    }

    /// A frame the server sent (the part of it written so far).
    fn server_frame(&mut self, frame: &Frame) {
        match frame.kind {
            HEADERS | DATA => {
                self.reset_strikes = true;
                if frame.flags & END_STREAM != 0 {
                    self.open.remove(&frame.stream);
                }
            }
            RST_STREAM => {
                self.open.remove(&frame.stream);
            }
            _ => {}
        }
    }

    /// grpc-go's `handlePing`, for a PING received at `now`.
    fn ping(&mut self, now: Instant) {
        self.pings += 1;
        if self.reset_strikes {
            // The server has answered something since the last PING: this
            // one may be measuring the connection, not keeping it alive.
            self.reset_strikes = false;
            self.strikes = 0;
        } else if let Some(last) = self.last_ping {
            let min_gap = if self.open.is_empty() && !self.policy.permit_without_calls {
                IDLE_MIN_TIME
            } else {
                self.policy.min_time
            };
            if now.saturating_duration_since(last) < min_gap {
                self.strikes = self.strikes.saturating_add(1);
            }
        }
        self.last_ping = Some(now);
        let (at, strikes) = (self.log.seconds(now), self.strikes);
        self.log.update(self.index, |c| {
            c.pings_s.push(at);
            c.strikes = strikes;
        });
        if self.strikes > self.policy.max_strikes {
            self.state = State::Owed {
                goaway: frames::goaway(self.last_stream, ENHANCE_YOUR_CALM, TOO_MANY_PINGS),
                written: 0,
            };
        }
    }

    /// Follows bytes that the server's side has written.
    fn wrote(&mut self, bytes: &[u8]) {
        for frame in self.from_server.observe(bytes) {
            self.server_frame(&frame);
        }
    }

    /// How many of `buf`'s bytes finish the server's current frame (all of
    /// them if it does not end in `buf`). Only used while a GOAWAY waits.
    fn frame_end(&self, buf: &[u8]) -> usize {
        let mut probe = self.from_server.clone();
        for (i, byte) in buf.iter().enumerate() {
            probe.observe(std::slice::from_ref(byte));
            if probe.at_boundary() {
                return i + 1;
            }
        }
        buf.len()
    }

    fn close(&mut self) {
        self.state = State::Closed;
        if let Some(reader) = self.reader.take() {
            reader.wake();
        }
    }

    fn sent(&self) {
        let at = self.log.seconds(Instant::now());
        self.log.update(self.index, |c| c.goaway_s = Some(at));
        let peer = self.peer.map_or("unknown".into(), |p| p.to_string());
        info!(
            %peer,
            pings = self.pings,
            strikes = self.strikes,
            "GOAWAY ENHANCE_YOUR_CALM \"too_many_pings\": more than {} ping strikes",
            self.policy.max_strikes
        );
    }
}

impl<IO: AsyncWrite + Unpin> Enforced<IO> {
    /// Writes the owed GOAWAY and shuts the socket's write side. Only called
    /// at a frame boundary of the server's side.
    fn poll_goaway(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match &mut self.state {
                State::Passing | State::Closed => return Poll::Ready(Ok(())),
                State::Owed { goaway, written } => {
                    while *written < goaway.len() {
                        match ready!(Pin::new(&mut self.io).poll_write(cx, &goaway[*written..])) {
                            Ok(0) => {
                                self.close();
                                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                            }
                            Ok(n) => *written += n,
                            Err(e) => {
                                self.close();
                                return Poll::Ready(Err(e));
                            }
                        }
                    }
                    self.sent();
                    self.state = State::ShuttingDown;
                }
                State::ShuttingDown => {
                    // Shutting down flushes: the GOAWAY, then the FIN.
                    let shut = ready!(Pin::new(&mut self.io).poll_shutdown(cx));
                    self.close();
                    return Poll::Ready(shut);
                }
            }
        }
    }

    /// Whether a GOAWAY is owed (or going out) and may go out now.
    fn goaway_due(&self) -> bool {
        match self.state {
            State::Owed { .. } => self.from_server.at_boundary(),
            State::ShuttingDown => true,
            State::Passing | State::Closed => false,
        }
    }
}

fn closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "connection closed after GOAWAY too_many_pings",
    )
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for Enforced<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.state {
                State::Passing => {}
                // EOF: hyper ends the connection.
                State::Closed => return Poll::Ready(Ok(())),
                State::Owed { .. } | State::ShuttingDown => {
                    if !this.goaway_due() {
                        // hyper is in the middle of writing a frame; its
                        // next write finishes it and wakes this read.
                        this.reader = Some(cx.waker().clone());
                        return Poll::Pending;
                    }
                    if let Err(e) = ready!(this.poll_goaway(cx)) {
                        debug!("GOAWAY too_many_pings not sent: {e}");
                    }
                    return Poll::Ready(Ok(()));
                }
            }
            let before = buf.filled().len();
            ready!(Pin::new(&mut this.io).poll_read(cx, buf))?;
            for frame in this.from_client.observe(&buf.filled()[before..]) {
                this.client_frame(&frame);
                if !matches!(this.state, State::Passing) {
                    break;
                }
            }
            if matches!(this.state, State::Passing) {
                return Poll::Ready(Ok(()));
            }
            // The GOAWAY is owed. This read's bytes, the offending PING
            // among them, are not passed on: hyper would only answer them,
            // and the connection is over.
            buf.set_filled(before);
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Enforced<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match this.state {
            State::Passing => {
                let n = ready!(Pin::new(&mut this.io).poll_write(cx, buf))?;
                this.wrote(&buf[..n.min(buf.len())]);
                Poll::Ready(Ok(n))
            }
            State::Closed => Poll::Ready(Err(closed())),
            _ if this.goaway_due() => {
                ready!(this.poll_goaway(cx))?;
                Poll::Ready(Err(closed()))
            }
            _ => {
                // A GOAWAY is owed in the middle of a frame: pass only the
                // rest of that frame, then let the GOAWAY go.
                let end = this.frame_end(buf);
                let n = ready!(Pin::new(&mut this.io).poll_write(cx, &buf[..end]))?;
                this.wrote(&buf[..n.min(end)]);
                if this.from_server.at_boundary()
                    && let Some(reader) = this.reader.take()
                {
                    reader.wake();
                }
                Poll::Ready(Ok(n))
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if !matches!(this.state, State::Passing) {
            let first = bufs
                .iter()
                .find(|b| !b.is_empty())
                .map_or(&[][..], |b| &b[..]);
            return Pin::new(this).poll_write(cx, first);
        }
        let n = ready!(Pin::new(&mut this.io).poll_write_vectored(cx, bufs))?;
        let mut left = n;
        for buf in bufs {
            if left == 0 {
                break;
            }
            let part = left.min(buf.len());
            this.wrote(&buf[..part]);
            left -= part;
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.state {
            State::Closed => Poll::Ready(Ok(())),
            _ if this.goaway_due() => this.poll_goaway(cx),
            _ => Pin::new(&mut this.io).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.state {
            State::Closed => Poll::Ready(Ok(())),
            _ if this.goaway_due() => this.poll_goaway(cx),
            _ => {
                let shut = ready!(Pin::new(&mut this.io).poll_shutdown(cx));
                if !matches!(this.state, State::Passing) {
                    // Shut in the middle of a frame: the GOAWAY cannot follow.
                    this.close();
                }
                Poll::Ready(shut)
            }
        }
    }
}

/// tonic puts the connection's details in every request's extensions; this
/// passes on the wrapped stream's, so `Request::remote_addr` keeps working.
impl<IO: Connected> Connected for Enforced<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

/// Wraps every accepted connection of `accepted` (as a tokio_stream
/// `TcpListenerStream` yields them) for tonic's `serve_with_incoming`.
pub fn enforce(
    accepted: impl Stream<Item = io::Result<TcpStream>>,
    policy: PingPolicy,
    log: Log,
) -> impl Stream<Item = io::Result<Enforced<TcpStream>>> {
    use tokio_stream::StreamExt;
    accepted.map(move |tcp| {
        let tcp = tcp?;
        let peer = tcp.peer_addr().ok();
        let mut enforced = Enforced::new(tcp, policy, log.clone());
        enforced.peer = peer;
        Ok(enforced)
    })
}
