//! A TCP listener that hands out connections only after their TLS handshake.
//!
//! Handshakes run in their own tasks, so one slow or hostile client cannot hold
//! up everyone else's accept. A failed handshake is logged with its cause (the
//! most useful line in this chapter's exercises) and never reaches the server.

use std::{io, net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context;
use rustls::ServerConfig;
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{Semaphore, mpsc},
};
use tokio_rustls::{TlsAcceptor, server::TlsStream};
use tracing::{debug, warn};

// ANCHOR: limits
/// A client gets this long to finish its handshake. Without a bound, a peer that
/// connects and says nothing would hold a task and a socket forever.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// At most this many handshakes run at once; past it, accepting waits. This
/// bounds the CPU a flood of new connections can take from calls in progress.
pub const MAX_CONCURRENT_HANDSHAKES: usize = 256;
// ANCHOR_END: limits

pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl TlsListener {
    /// Binds `addr`. The error names the address, and says what a busy port
    /// usually means on a reader's machine.
    pub async fn bind(addr: SocketAddr, config: ServerConfig) -> anyhow::Result<Self> {
        let tcp = TcpListener::bind(addr).await.map_err(|e| {
            let hint = match e.kind() {
                io::ErrorKind::AddrInUse => {
                    " (another process is listening there, perhaps an earlier run of the workshop; stop it or choose another address)"
                }
                io::ErrorKind::PermissionDenied => " (ports below 1024 need privileges; choose a higher port)",
                _ => "",
            };
            anyhow::anyhow!("cannot listen on {addr}: {e}{hint}")
        })?;
        Ok(TlsListener {
            tcp,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
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
        let handshakes = Arc::new(Semaphore::new(MAX_CONCURRENT_HANDSHAKES));
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
                let Ok(permit) = handshakes.clone().acquire_owned().await else {
                    return;
                };
                let (acceptor, tx) = (self.acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            debug!(%peer, "TLS handshake complete");
                            let _ = tx.send(tls).await;
                        }
                        Ok(Err(e)) => warn!(%peer, "TLS handshake failed: {e}"),
                        Err(_) => {
                            warn!(%peer, "TLS handshake timed out after {HANDSHAKE_TIMEOUT:?}")
                        }
                    }
                });
            }
        });
        rx
    }
    // ANCHOR_END: incoming
}
