//! A server that accepts TCP connections and never sends a byte.
//!
//! This is what a client meets when the kernel still completes TCP handshakes
//! for a process that no longer gets to run its TLS (a stuck event loop, a
//! machine swapping), or when a middlebox lets the SYN through and swallows
//! what follows. Chapter 10 points a call with a deadline at it to show which
//! part of a call a deadline covers: the connection is not in it.

use std::{
    collections::VecDeque,
    net::SocketAddr,
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::Parser;
use tokio::{
    io::AsyncReadExt,
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};
use tracing::{info, warn};

/// Accept TCP connections on ADDR and never answer them.
#[derive(Parser, Debug)]
#[command(name = "silent")]
pub struct Args {
    /// Address to listen on
    #[arg(long, default_value = "127.0.0.1:50071")]
    pub addr: SocketAddr,
    /// Connections held open at most; beyond that the oldest is closed, so a
    /// client that retries in a loop cannot exhaust this process's files
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_held: u16,
    /// Once listening, write the address to this file (atomically), for a
    /// script or harness that waits for it
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
}

/// Binds, announces the address, and holds connections until `shutdown`.
pub async fn run(args: &Args, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let listener = TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.addr))?;
    let addr = listener.local_addr()?;
    info!(%addr, "silent server listening: it accepts connections and never answers");
    if let Some(path) = &args.ready_file {
        program::ready_file::publish(path, &format!("{addr}\n"))?;
    }
    hold(listener, args.max_held.into(), shutdown).await;
    Ok(())
}

/// Accepts connections and keeps them open, unanswered: the client's TCP
/// connect succeeds, and its TLS ClientHello waits for a reply that never
/// comes. Each connection's task reads and discards what arrives, so the log
/// can say how much the client sent and when it gave up.
pub async fn hold(listener: TcpListener, max_held: usize, shutdown: impl Future<Output = ()>) {
    let mut held: VecDeque<JoinHandle<()>> = VecDeque::with_capacity(max_held);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    held.retain(|task| !task.is_finished());
                    if held.len() == max_held
                        && let Some(oldest) = held.pop_front()
                    {
                        // Aborting the task drops its stream: the client sees
                        // the connection close.
                        oldest.abort();
                    }
                    info!(%peer, "accepted a connection; it gets no answer");
                    held.push_back(tokio::spawn(listen(stream, peer)));
                }
                // Usually out of file descriptors: the listener itself is
                // fine, so back off instead of spinning, and keep accepting.
                Err(e) => {
                    warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
    info!(
        held = held.len(),
        "silent server stopping; closing what it held"
    );
    for task in held {
        task.abort();
    }
}

/// Reads until the client closes, then logs how long it waited.
async fn listen(mut stream: TcpStream, peer: SocketAddr) {
    let opened = Instant::now();
    let mut received = 0;
    let mut buf = [0u8; 4096];
    let ended = loop {
        match stream.read(&mut buf).await {
            Ok(0) => break "closed the connection".to_string(),
            Ok(n) => received += n,
            Err(e) => break format!("ended the connection ({e})"),
        }
    };
    info!(
        %peer,
        waited_ms = (opened.elapsed().as_secs_f64() * 1e4).round() / 10.0,
        bytes_received = received,
        "the client {ended}, unanswered"
    );
}
