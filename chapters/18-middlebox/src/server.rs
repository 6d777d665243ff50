//! The servers the chapter calls through a middlebox: chapter 4's greeter
//! over plaintext HTTP/2 (a middlebox cannot see PING frames inside TLS; a
//! balancer that drops them is one that ends TLS itself), and a one-route
//! HTTP/1.1 server for the REST client's pooled connections.
//!
//! Every gRPC connection is wrapped twice on its way in: [`Enforced`](crate::enforce::Enforced) follows
//! its frames (and, when asked, enforces gRFC A8's ping policy), and
//! [`IdleClose`] closes it after a spell of silence. tonic 0.14 has no
//! `max_connection_idle` (grpc-go's name for it), so the chapter adds one
//! here; it closes with a FIN and no GOAWAY first, which for a connection
//! with no call on it tells the client the same thing.

use std::{
    io,
    net::SocketAddr,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use grpc_server::greeter::Greeter;
use proto::greeter::v1::greeter_server::GreeterServer;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpListener,
    sync::oneshot,
    time::{Instant, Sleep},
};
use tokio_stream::{StreamExt, wrappers::TcpListenerStream};
use tonic::transport::server::Connected;

use crate::enforce::{self, PingPolicy};

/// What a gRPC server does about idle and chatty connections.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Its own HTTP/2 keepalive: a PING after this long without a frame,
    /// and how long the answer may take.
    pub keepalive: Option<(Duration, Duration)>,
    /// Close a connection after this long without a byte either way.
    pub idle_close: Option<Duration>,
    /// gRFC A8's ping policy; without it every ping is only logged.
    pub pings: Option<PingPolicy>,
}

/// A policy that never strikes: the connection's pings are only logged.
const LOG_ONLY: PingPolicy = PingPolicy {
    min_time: Duration::ZERO,
    permit_without_calls: true,
    max_strikes: u32::MAX,
};

/// A server running in this process; dropping it stops it.
pub struct Running {
    pub addr: SocketAddr,
    /// Every connection's pings, strikes and GOAWAY.
    pub log: enforce::Log,
    _stop: oneshot::Sender<()>,
}

pub async fn grpc(options: Options) -> anyhow::Result<Running> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let log = enforce::Log::new();
    let accepted = TcpListenerStream::new(listener).map(|accepted| {
        // tonic's own `serve` sets TCP_NODELAY; with incoming, it is ours to set.
        accepted.inspect(|stream| {
            let _ = stream.set_nodelay(true);
        })
    });
    let policy = options.pings.unwrap_or(LOG_ONLY);
    let idle = options.idle_close;
    let incoming = enforce::enforce(accepted, policy, log.clone())
        .map(move |enforced| enforced.map(|io| IdleClose::new(io, idle)));
    let server = tonic::transport::Server::builder()
        .http2_keepalive_interval(options.keepalive.map(|(every, _)| every))
        .http2_keepalive_timeout(options.keepalive.map(|(_, answer)| answer))
        .add_service(GreeterServer::new(Greeter::default()));
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let stopped = async {
            let _ = stopped.await;
        };
        if let Err(error) = server.serve_with_incoming_shutdown(incoming, stopped).await {
            tracing::warn!(%error, "the gRPC server stopped");
        }
    });
    Ok(Running {
        addr,
        log,
        _stop: stop,
    })
}

/// An HTTP/1.1 server with one route, `GET /hello`, and hyper's default
/// keep-alive (a connection stays open as long as the client keeps it).
pub async fn rest() -> anyhow::Result<Running> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new().route("/hello", axum::routing::get(|| async { "Hello!" }));
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let stopped = async {
            let _ = stopped.await;
        };
        if let Err(error) = axum::serve(listener, app)
            .with_graceful_shutdown(stopped)
            .await
        {
            tracing::warn!(%error, "the REST server stopped");
        }
    });
    Ok(Running {
        addr,
        log: enforce::Log::new(),
        _stop: stop,
    })
}

// ANCHOR: idle_close
/// A connection that ends itself after `limit` without a byte either way:
/// a read waiting when the limit passes returns end of stream, and hyper
/// closes the connection as it would for a client that left.
pub struct IdleClose<IO> {
    io: IO,
    limit: Option<Duration>,
    timer: Pin<Box<Sleep>>,
}
// ANCHOR_END: idle_close

impl<IO> IdleClose<IO> {
    pub fn new(io: IO, limit: Option<Duration>) -> IdleClose<IO> {
        let far = Duration::from_secs(86_400 * 365);
        IdleClose {
            io,
            limit,
            timer: Box::pin(tokio::time::sleep(limit.unwrap_or(far))),
        }
    }

    fn touch(&mut self) {
        if let Some(limit) = self.limit {
            self.timer.as_mut().reset(Instant::now() + limit);
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for IdleClose<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.io).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    self.touch();
                }
                Poll::Ready(result)
            }
            Poll::Pending if self.limit.is_some() && self.timer.as_mut().poll(cx).is_ready() => {
                tracing::debug!("closing a connection idle for {:?}", self.limit);
                Poll::Ready(Ok(()))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for IdleClose<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl<IO: Connected> Connected for IdleClose<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_ends_when_the_limit_passes() {
        let (ours, _theirs) = tokio::io::duplex(64);
        let mut io = IdleClose::new(ours, Some(Duration::from_secs(10)));
        let started = Instant::now();
        assert_eq!(io.read(&mut [0; 8]).await.unwrap(), 0);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_either_way_keep_it_open() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut io = IdleClose::new(ours, Some(Duration::from_secs(10)));
        let started = Instant::now();
        // Our writes at 6 s and 12 s, their byte at 18 s: open until 28 s.
        for _ in 0..2 {
            tokio::time::sleep(Duration::from_secs(6)).await;
            io.write_all(b"x").await.unwrap();
        }
        tokio::time::sleep(Duration::from_secs(6)).await;
        theirs.write_all(b"y").await.unwrap();
        assert_eq!(io.read(&mut [0; 8]).await.unwrap(), 1);
        assert_eq!(io.read(&mut [0; 8]).await.unwrap(), 0);
        assert_eq!(started.elapsed(), Duration::from_secs(28));
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_limit_it_waits() {
        let (ours, _theirs) = tokio::io::duplex(64);
        let mut io = IdleClose::new(ours, None);
        let waited = tokio::time::timeout(Duration::from_secs(3600), io.read(&mut [0; 8])).await;
        assert!(waited.is_err(), "{waited:?}");
    }
}
