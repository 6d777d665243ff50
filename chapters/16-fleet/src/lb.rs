//! A layer-4 load balancer: it accepts TCP connections on one address and
//! hands each to the next replica in turn, then only copies bytes. It never
//! sees a call, so a connection stays on the replica it was given for as
//! long as the connection lives. This is what a cloud TCP load balancer or a
//! Kubernetes Service (kube-proxy) does, and why a replica added later gets
//! no calls from clients that are already connected.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use anyhow::Context;
use tokio::net::{TcpListener, TcpStream};

/// The balancer; dropping it stops accepting (connections already made
/// live on until either end closes them).
pub struct Balancer {
    addr: SocketAddr,
    upstreams: Arc<Mutex<Upstreams>>,
    accepting: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Upstreams {
    addrs: Vec<SocketAddr>,
    next: usize,
}

impl Balancer {
    pub async fn start(listen: SocketAddr, upstreams: &[SocketAddr]) -> anyhow::Result<Balancer> {
        anyhow::ensure!(
            !upstreams.is_empty(),
            "a balancer needs at least one replica"
        );
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let addr = listener.local_addr()?;
        let upstreams = Arc::new(Mutex::new(Upstreams {
            addrs: upstreams.to_vec(),
            next: 0,
        }));
        let shared = upstreams.clone();
        let accepting = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    // Out of file descriptors, say: wait rather than spin.
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                };
                let upstream = {
                    let mut u = shared.lock().expect("not poisoned");
                    let pick = u.addrs[u.next % u.addrs.len()];
                    u.next += 1;
                    pick
                };
                tokio::spawn(carry(client, upstream));
            }
        });
        Ok(Balancer {
            addr,
            upstreams,
            accepting,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Puts a replica in the rotation, for connections made from now on.
    pub fn add(&self, upstream: SocketAddr) {
        self.upstreams
            .lock()
            .expect("not poisoned")
            .addrs
            .push(upstream);
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn carry(mut client: TcpStream, upstream: SocketAddr) {
    // A replica that refuses: the client sees its connection closed, as it
    // would behind a real balancer with a stale target.
    if let Ok(mut server) = TcpStream::connect(upstream).await {
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
    }
}
