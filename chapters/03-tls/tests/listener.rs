//! The TLS listener under a slowloris attack: many connections that never
//! send their ClientHello, or send a little of it and stop. A new client must
//! still get through at once, and the stalled ones must be let go.

use std::{net::SocketAddr, path::Path, sync::Arc, time::Duration};

use certs::{
    Pki, TlsArgs, TlsListener, client_config,
    listener::{CLIENT_HELLO_TIMEOUT, HANDSHAKE_TIMEOUT, HandshakeLimits},
    server_config,
};
use rustls::pki_types::ServerName;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::mpsc,
};
use tokio_rustls::{TlsConnector, server::TlsStream};

/// The bound on every wait: a hang fails the test instead of stalling it.
const WAIT: Duration = Duration::from_secs(20);

/// How long a legitimate client may take to get through *during* the attack:
/// generous for a loaded two-core machine, yet well under the 10 s a silent
/// connection may hold a handshake, so a client that had to wait for one to
/// time out fails the test.
const SERVED_WITHIN: Duration = Duration::from_secs(5);

/// Silent connections: more than the 256 handshake permits the listener used
/// to have, so that with permits every one of them would be taken.
const SILENT: usize = 300;

async fn listener(
    pki: &Pki,
    limits: Option<HandshakeLimits>,
) -> (SocketAddr, mpsc::Receiver<TlsStream<TcpStream>>) {
    let config = server_config(&TlsArgs::in_dir(&pki.dir), false, &[b"h2"]).expect("server config");
    let mut listener = TlsListener::bind("127.0.0.1:0".parse().unwrap(), config)
        .await
        .expect("bind");
    if let Some(limits) = limits {
        listener = listener.with_limits(limits);
    }
    (listener.local_addr().unwrap(), listener.incoming())
}

/// TCP connections that connect and then say nothing.
async fn silent_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut silent = Vec::with_capacity(n);
    for _ in 0..n {
        silent.push(TcpStream::connect(addr).await.expect("connect"));
    }
    silent
}

/// A real client: connects, completes its handshake, and is handed to the
/// server, all within SERVED_WITHIN.
async fn assert_served(
    addr: SocketAddr,
    ca: &Path,
    accepted: &mut mpsc::Receiver<TlsStream<TcpStream>>,
) {
    let connector = TlsConnector::from(Arc::new(client_config(ca, None).unwrap()));
    let started = tokio::time::Instant::now();
    let served = tokio::time::timeout(SERVED_WITHIN, async {
        let tcp = TcpStream::connect(addr).await?;
        let name = ServerName::try_from("localhost").unwrap();
        let client = connector.connect(name, tcp).await?;
        let stream = accepted.recv().await.expect("the listener stopped");
        assert_eq!(
            stream.get_ref().0.peer_addr()?,
            client.get_ref().0.local_addr()?
        );
        Ok::<_, std::io::Error>(())
    })
    .await;
    println!("a new client was served after {:?}", started.elapsed());
    served
        .unwrap_or_else(|_| panic!("a new client waited more than {SERVED_WITHIN:?}"))
        .expect("the new client's handshake");
}

fn fresh_pki() -> (tempfile::TempDir, Pki) {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    pki.generate(false).unwrap();
    (dir, pki)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_do_not_keep_a_new_client_waiting() {
    let (_dir, pki) = fresh_pki();
    let (addr, mut accepted) = listener(&pki, None).await;
    let silent = silent_connections(addr, SILENT).await;
    // Let the listener take them all in, as it would during a real attack.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_served(addr, &pki.ca_cert(), &mut accepted).await;
    drop(silent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_limit_the_oldest_handshakes_make_room() {
    let (_dir, pki) = fresh_pki();
    let limits = HandshakeLimits {
        max_pending: 16,
        ..HandshakeLimits::default()
    };
    let (addr, mut accepted) = listener(&pki, Some(limits)).await;
    let mut silent = silent_connections(addr, 40).await;
    assert_served(addr, &pki.ca_cert(), &mut accepted).await;
    // The first silent connections were dropped to make room: the server
    // closed them long before any timeout.
    let first = &mut silent[0];
    let closed = tokio::time::timeout(WAIT, first.read(&mut [0; 16])).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "the oldest silent connection is still open: {closed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_hello_that_stops_half_way_is_dropped() {
    let (_dir, pki) = fresh_pki();
    let (addr, mut accepted) = listener(&pki, None).await;
    // The start of a TLS record (handshake, TLS 1.0 record version, 512
    // bytes announced), then nothing.
    let mut trickle = TcpStream::connect(addr).await.unwrap();
    trickle
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00])
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    assert_served(addr, &pki.ca_cert(), &mut accepted).await;

    let closed =
        tokio::time::timeout(CLIENT_HELLO_TIMEOUT + WAIT, trickle.read(&mut [0; 16])).await;
    let waited = started.elapsed();
    println!("the trickling client was closed after {waited:?}: {closed:?}");
    assert!(closed.is_ok(), "still open after {waited:?}");
    // Let go at the ClientHello limit, not held for the whole handshake's.
    assert!(
        waited + Duration::from_secs(1) >= CLIENT_HELLO_TIMEOUT && waited < HANDSHAKE_TIMEOUT,
        "closed after {waited:?}"
    );
}
