//! The middlebox over real loopback TCP, on a paused clock.
//!
//! Tokio moves a paused clock only when every task waits, and then straight
//! to the next timer, so an idle timeout of 350 s (an AWS NLB's) costs no
//! real time. But "every task waits" includes waiting for a byte that is
//! still crossing the kernel: loopback usually delivers it before `write`
//! returns, but on a loaded machine the delivery can be put off for a few
//! milliseconds, and the clock would jump over them to the next timer (a
//! test's timeout, or the flow's expiry). So every wait for something that
//! must arrive is [`held`] (tokio does not move the clock while a blocking
//! task runs) or [`settled`]; waits for what must not arrive let the clock
//! run. Every socket sets TCP_NODELAY, or Nagle's algorithm could hold a
//! small write back until a delayed ACK, in real time.

use std::{
    io::ErrorKind,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use middlebox::{
    frames::{self, PING, PREFACE},
    middlebox::{Counts, Middlebox, OnIdle, Policy},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpSocket, TcpStream},
    time::{Instant, sleep, sleep_until, timeout},
};

/// An AWS NLB's idle timeout; on a paused clock it costs nothing.
const IDLE: Duration = Duration::from_secs(350);
/// How long a byte that should arrive may take (virtual).
const PATIENCE: Duration = Duration::from_secs(10);
/// How long a peer waits to show that nothing arrives (virtual).
const LONG: Duration = Duration::from_secs(3600);
/// How long a wait may stop the clock ([`held`], [`settled`]), in real time.
const HOLD: Duration = Duration::from_secs(5);

/// Runs `wait` with the paused clock standing still (for [`HOLD`] of real
/// time at most, then the test's own timeout may fire): tokio does not
/// advance a paused clock while a blocking task runs.
async fn held<F: Future>(wait: F) -> F::Output {
    /// Lets the blocking task end, however `wait` ends.
    struct Release(Arc<AtomicBool>);
    impl Drop for Release {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let release = Release(Arc::default());
    let done = release.0.clone();
    let give_up = std::time::Instant::now() + HOLD;
    // Not awaited: it ends by itself once released.
    drop(tokio::task::spawn_blocking(move || {
        while !done.load(Ordering::Relaxed) && std::time::Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(1));
        }
    }));
    let output = wait.await;
    drop(release);
    output
}

/// Waits until the middlebox's counts satisfy `done`: for what it reads
/// and keeps to itself, which no peer can see. The clock stays where it is
/// meanwhile, as the runtime is never idle while this task yields.
async fn settled(middlebox: &Middlebox, done: impl Fn(&Counts) -> bool) {
    let give_up = std::time::Instant::now() + HOLD;
    while !done(&middlebox.counts()) {
        let counts = middlebox.counts();
        assert!(
            std::time::Instant::now() < give_up,
            "the counts stopped at {counts:?}"
        );
        tokio::task::yield_now().await;
    }
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Forgets a flow idle for [`IDLE`]; passes PINGs.
fn forget(on_idle: OnIdle) -> Policy {
    Policy {
        idle: Some(IDLE),
        on_idle,
        eat_pings: false,
    }
}

/// A middlebox in front of a server the test plays: the client's socket
/// and the server's side of the flow the middlebox dialled.
async fn through(policy: Policy) -> (Middlebox, TcpStream, TcpStream) {
    let upstream = TcpListener::bind(loopback()).await.unwrap();
    let middlebox = Middlebox::start(loopback(), upstream.local_addr().unwrap(), policy)
        .await
        .unwrap();
    let client = held(TcpStream::connect(middlebox.addr())).await.unwrap();
    let (server, _) = held(timeout(PATIENCE, upstream.accept()))
        .await
        .expect("the middlebox dials the server")
        .unwrap();
    client.set_nodelay(true).unwrap();
    server.set_nodelay(true).unwrap();
    (middlebox, client, server)
}

/// Reads exactly `len` bytes, which must arrive in time.
async fn receive(from: &mut TcpStream, len: usize) -> Vec<u8> {
    let mut got = vec![0; len];
    held(timeout(PATIENCE, from.read_exact(&mut got)))
        .await
        .expect("the bytes arrive")
        .expect("the connection stays open");
    got
}

/// `bytes` sent one way arrive the other way, unchanged.
async fn passes(from: &mut TcpStream, to: &mut TcpStream, bytes: &[u8]) {
    from.write_all(bytes).await.unwrap();
    assert_eq!(receive(to, bytes.len()).await, bytes);
}

/// Nothing arrives for an hour: no byte, no end of stream, no error.
async fn silent(peer: &mut TcpStream, what: &str) {
    let mut buf = [0; 64];
    let read = timeout(LONG, peer.read(&mut buf)).await;
    assert!(read.is_err(), "{what}: {read:?}");
}

/// What a read returns next, which must come in time.
async fn next_read(peer: &mut TcpStream) -> std::io::Result<usize> {
    let mut buf = [0; 64];
    held(timeout(PATIENCE, peer.read(&mut buf)))
        .await
        .expect("the read returns instead of hanging")
}

/// The end of the stream, or an error: the connection is closed.
async fn closed(peer: &mut TcpStream) {
    let read = next_read(peer).await;
    assert!(matches!(read, Ok(0) | Err(_)), "read {read:?}");
}

#[tokio::test(start_paused = true)]
async fn bytes_pass_both_ways_and_so_does_a_half_close() {
    let (middlebox, mut client, mut server) = through(forget(OnIdle::Drop)).await;
    passes(&mut client, &mut server, b"hello, server").await;
    passes(&mut server, &mut client, b"hello, client").await;

    // The client is done sending; the server sees the end of the stream and
    // can still answer over the half that is open.
    client.shutdown().await.unwrap();
    let eof = next_read(&mut server).await.unwrap();
    assert_eq!(eof, 0, "the client's FIN reaches the server");
    passes(&mut server, &mut client, b"the answer").await;
    server.shutdown().await.unwrap();
    let eof = next_read(&mut client).await.unwrap();
    assert_eq!(eof, 0, "the server's FIN reaches the client");

    assert_eq!(
        middlebox.counts(),
        Counts {
            flows: 1,
            ..Counts::default()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn activity_either_way_keeps_a_flow_alive_past_the_idle_timeout() {
    let (middlebox, mut client, mut server) = through(forget(OnIdle::Drop)).await;
    // A few bytes every IDLE/2 for 3 IDLE, taking turns: each direction is
    // quiet for a whole IDLE, the flow never is.
    for round in 0..6u8 {
        sleep(IDLE / 2).await;
        if round % 2 == 0 {
            passes(&mut client, &mut server, &[round; 4]).await;
        } else {
            passes(&mut server, &mut client, &[round; 4]).await;
        }
    }
    assert_eq!(middlebox.counts().expired, 0);

    // Then quiet for longer than IDLE: forgotten.
    sleep(IDLE + Duration::from_secs(1)).await;
    assert_eq!(middlebox.counts().expired, 1);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_flow_swallows_bytes_and_closes_without_a_word() {
    let (middlebox, mut client, mut server) = through(forget(OnIdle::Drop)).await;
    passes(&mut client, &mut server, b"hello").await;
    sleep(IDLE + Duration::from_secs(1)).await;
    assert_eq!(middlebox.counts().expired, 1);

    // Forgotten, not closed: writes succeed and vanish, both ways.
    client.write_all(b"lost").await.unwrap();
    settled(&middlebox, |c| c.bytes_lost == 4).await;
    silent(&mut server, "the server heard from a forgotten flow").await;
    silent(
        &mut client,
        "the client got an answer from a forgotten flow",
    )
    .await;
    server.write_all(b"also lost").await.unwrap();
    settled(&middlebox, |c| c.bytes_lost == 4 + 9).await;
    silent(&mut client, "the client heard from a forgotten flow").await;

    // A close vanishes too: the server never learns the client has gone.
    client.shutdown().await.unwrap();
    silent(&mut server, "the client's FIN crossed a forgotten flow").await;

    let counts = middlebox.counts();
    assert_eq!(counts.expired, 1);
    assert_eq!(counts.resets, 0);
    assert_eq!(counts.bytes_lost, 4 + 9, "lost and also lost");
}

#[tokio::test(start_paused = true)]
async fn a_reset_flow_answers_each_late_peer_with_a_rst() {
    let (middlebox, mut client, mut server) = through(forget(OnIdle::Reset)).await;
    passes(&mut client, &mut server, b"hello").await;
    passes(&mut server, &mut client, b"hello").await;
    sleep(IDLE + Duration::from_secs(1)).await;
    assert_eq!(middlebox.counts().expired, 1);
    assert_eq!(middlebox.counts().resets, 0, "nobody is told at expiry");

    // The client's write is accepted by its kernel; the answer is a RST.
    client.write_all(b"late").await.unwrap();
    let read = next_read(&mut client).await.map_err(|e| e.kind());
    assert_eq!(read, Err(ErrorKind::ConnectionReset));
    assert_eq!(middlebox.counts().resets, 1);

    // The server knows nothing of it, until it sends too: its FIN is
    // answered the same way.
    silent(&mut server, "the server heard of the client's reset").await;
    server.shutdown().await.unwrap();
    let read = next_read(&mut server).await.map_err(|e| e.kind());
    assert_eq!(read, Err(ErrorKind::ConnectionReset));

    let counts = middlebox.counts();
    assert_eq!((counts.expired, counts.resets), (1, 2));
    assert_eq!(counts.bytes_lost, b"late".len() as u64);
}

fn settings() -> Vec<u8> {
    frames::frame(0x4, 0, 0, &[0, 3, 0, 0, 0, 100])
}

fn ping(flags: u8) -> Vec<u8> {
    frames::frame(PING, flags, 0, b"12345678")
}

fn data(payload: &[u8]) -> Vec<u8> {
    frames::frame(frames::DATA, 0, 1, payload)
}

#[tokio::test(start_paused = true)]
async fn eaten_pings_vanish_and_every_other_byte_passes() {
    let (middlebox, mut client, mut server) = through(Policy {
        idle: None,
        on_idle: OnIdle::Drop,
        eat_pings: true,
    })
    .await;
    let sent = [PREFACE.to_vec(), settings(), ping(0), data(b"hello")].concat();
    let expected = [PREFACE.to_vec(), settings(), data(b"hello")].concat();
    // Written in pieces that cut the PING's header and the DATA frame.
    let cuts = [PREFACE.len() + settings().len() + 4, sent.len() - 3];
    client.write_all(&sent[..cuts[0]]).await.unwrap();
    client.write_all(&sent[cuts[0]..cuts[1]]).await.unwrap();
    client.write_all(&sent[cuts[1]..]).await.unwrap();
    assert_eq!(receive(&mut server, expected.len()).await, expected);

    // The server's side too: its PING ACK goes, its DATA passes.
    let answer = [ping(frames::ACK), data(b"world")].concat();
    server.write_all(&answer).await.unwrap();
    assert_eq!(
        receive(&mut client, data(b"world").len()).await,
        data(b"world")
    );

    let mut buf = [0; 64];
    let more = timeout(PATIENCE, server.read(&mut buf)).await;
    assert!(more.is_err(), "more reached the server: {more:?}");
    let counts = middlebox.counts();
    assert_eq!((counts.pings_eaten, counts.pings_passed), (2, 0));
}

/// The client opens an HTTP/2 connection, then sends nothing but a PING
/// every IDLE/3 for 2 IDLE.
async fn only_pings(middlebox: &Middlebox, client: &mut TcpStream, server: &mut TcpStream) {
    let start = Instant::now();
    let hello = [PREFACE.to_vec(), settings()].concat();
    passes(client, server, &hello).await;
    let ping_len = ping(0).len() as u64;
    for k in 1..=6 {
        // Offset by IDLE/6: no PING comes at the very instant of expiry.
        sleep_until(start + IDLE / 6 + (k - 1) * IDLE / 3).await;
        client.write_all(&ping(0)).await.unwrap();
        // Each PING is read (passed, eaten or lost) before the clock moves.
        settled(middlebox, |c| {
            c.pings_passed + c.pings_eaten + c.bytes_lost / ping_len == u64::from(k)
        })
        .await;
    }
}

#[tokio::test(start_paused = true)]
async fn eaten_pings_do_not_keep_a_flow_alive() {
    let (middlebox, mut client, mut server) = through(Policy {
        eat_pings: true,
        ..forget(OnIdle::Drop)
    })
    .await;
    only_pings(&middlebox, &mut client, &mut server).await;
    let counts = middlebox.counts();
    assert_eq!(counts.expired, 1);
    // Three PINGs came before the expiry at IDLE and were eaten; the three
    // after it were lost with the flow, as is whatever comes next.
    assert_eq!(counts.pings_eaten, 3);
    assert_eq!(counts.bytes_lost, 3 * ping(0).len() as u64);
    client.write_all(&data(b"hello?")).await.unwrap();
    let lost = (3 * ping(0).len() + data(b"hello?").len()) as u64;
    settled(&middlebox, |c| c.bytes_lost == lost).await;
    silent(&mut server, "the server heard from a forgotten flow").await;
}

#[tokio::test(start_paused = true)]
async fn passed_pings_keep_a_flow_alive() {
    let (middlebox, mut client, mut server) = through(forget(OnIdle::Drop)).await;
    only_pings(&middlebox, &mut client, &mut server).await;
    let pings = vec![ping(0); 6].concat();
    assert_eq!(receive(&mut server, pings.len()).await, pings);
    passes(&mut client, &mut server, &data(b"hello?")).await;
    let counts = middlebox.counts();
    assert_eq!(
        (counts.expired, counts.pings_passed, counts.bytes_lost),
        (0, 6, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_dead_upstream_closes_the_client() {
    // A port that is bound but not listening refuses connections, and no
    // other socket (the middlebox's own listener, say) can take it meanwhile.
    let dead = TcpSocket::new_v4().unwrap();
    dead.bind(loopback()).unwrap();
    let refused = dead.local_addr().unwrap();
    let middlebox = Middlebox::start(loopback(), refused, forget(OnIdle::Drop))
        .await
        .unwrap();
    let mut client = held(TcpStream::connect(middlebox.addr())).await.unwrap();
    closed(&mut client).await;
    assert_eq!(
        middlebox.counts(),
        Counts {
            flows: 1,
            ..Counts::default()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_the_middlebox_closes_its_flows() {
    let (middlebox, mut client, mut server) = through(forget(OnIdle::Drop)).await;
    passes(&mut client, &mut server, b"hello").await;
    drop(middlebox);
    closed(&mut client).await;
    closed(&mut server).await;
}
