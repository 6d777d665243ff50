//! A connection that must say something in time.
//!
//! hyper's HTTP/2 server waits for the client's connection preface (the 24
//! bytes `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`) without any time limit, and its
//! keepalive pings only start once the preface has arrived. A client that
//! completes TLS and then says nothing would hold a task, a socket and a TLS
//! session here forever. [`PrefaceDeadline`] wraps the TLS stream and, once
//! its time is up, fails the read that is waiting for the preface: hyper then
//! ends the connection, and the wrapper has logged why. Both greeter servers
//! use it for HTTP/2; the REST server's HTTP/1.1 connections have hyper's own
//! header-read timeout instead.

use std::{
    io,
    net::SocketAddr,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    time::Sleep,
};
use tokio_stream::Stream;
use tonic::transport::server::Connected;
use tracing::info;

/// The client connection preface of HTTP/2 (RFC 9113, section 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The TLS streams both servers serve (chapter 3's listener hands them out).
pub type TlsStream = tokio_rustls::server::TlsStream<TcpStream>;

// ANCHOR: preface_deadline
/// An IO stream whose first `PREFACE.len()` bytes must arrive within `limit`
/// of its creation; a read still waiting for them after that fails with
/// `TimedOut`. Once they have arrived it is a plain pass-through.
pub struct PrefaceDeadline<IO> {
    io: IO,
    peer: Option<SocketAddr>,
    limit: Duration,
    /// Bytes of the preface still to come; 0 once it is complete.
    missing: usize,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<IO> PrefaceDeadline<IO> {
    pub fn new(io: IO, peer: Option<SocketAddr>, limit: Duration) -> Self {
        PrefaceDeadline {
            io,
            peer,
            limit,
            missing: PREFACE.len(),
            deadline: Some(Box::pin(tokio::time::sleep(limit))),
        }
    }

    pub fn get_ref(&self) -> &IO {
        &self.io
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for PrefaceDeadline<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.io).poll_read(cx, buf);
        let this = &mut *self;
        let Some(deadline) = this.deadline.as_mut() else {
            return read; // the preface has arrived: nothing more to watch
        };
        match read {
            Poll::Ready(Ok(())) => {
                let got = buf.filled().len() - before;
                this.missing = this.missing.saturating_sub(got);
                if this.missing == 0 {
                    this.deadline = None;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending if deadline.as_mut().poll(cx).is_ready() => {
                this.deadline = None;
                let peer = this.peer.map_or("unknown".into(), |p| p.to_string());
                info!(
                    %peer,
                    "closing a connection: no HTTP/2 preface within {:?} of the TLS handshake",
                    this.limit
                );
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no HTTP/2 preface within {:?}", this.limit),
                )))
            }
            other => other,
        }
    }
}
// ANCHOR_END: preface_deadline

impl<IO: AsyncWrite + Unpin> AsyncWrite for PrefaceDeadline<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// tonic puts the connection's details in every request's extensions; this
/// passes on the TLS stream's, so `Request::remote_addr` keeps working.
impl Connected for PrefaceDeadline<TlsStream> {
    type ConnectInfo = <TlsStream as Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

/// Wraps every TLS stream of `incoming` in a [`PrefaceDeadline`] of `limit`.
pub fn with_preface_deadline(
    incoming: impl Stream<Item = TlsStream>,
    limit: Duration,
) -> impl Stream<Item = PrefaceDeadline<TlsStream>> {
    use tokio_stream::StreamExt;
    incoming.map(move |tls| {
        let peer = tls.get_ref().0.peer_addr().ok();
        PrefaceDeadline::new(tls, peer, limit)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_silent_peer_fails_the_read_when_the_limit_passes() {
        let (ours, _theirs) = tokio::io::duplex(64);
        let mut io = PrefaceDeadline::new(ours, None, Duration::from_secs(10));
        let started = tokio::time::Instant::now();
        let err = io.read(&mut [0; 64]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_that_sent_the_preface_may_then_stay_quiet() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut io = PrefaceDeadline::new(ours, None, Duration::from_secs(10));
        // The preface in two pieces, the second just before the limit.
        theirs.write_all(&PREFACE[..10]).await.unwrap();
        let mut buf = [0; 64];
        assert_eq!(io.read(&mut buf).await.unwrap(), 10);
        tokio::time::sleep(Duration::from_secs(9)).await;
        theirs.write_all(&PREFACE[10..]).await.unwrap();
        assert_eq!(io.read(&mut buf).await.unwrap(), PREFACE.len() - 10);
        // Long after the limit, an idle connection is not this wrapper's business.
        let quiet = tokio::time::timeout(Duration::from_secs(60), io.read(&mut buf)).await;
        assert!(
            quiet.is_err(),
            "the read should still be waiting: {quiet:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn half_a_preface_is_not_enough() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut io = PrefaceDeadline::new(ours, None, Duration::from_secs(10));
        theirs.write_all(&PREFACE[..23]).await.unwrap();
        assert_eq!(io.read(&mut [0; 64]).await.unwrap(), 23);
        let err = io.read(&mut [0; 64]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }
}
