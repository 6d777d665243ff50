//! The delay proxy's behaviour. `carry` is tested on in-memory pipes on a
//! paused clock, where time moves only when every task waits, so "not before
//! its delay" is exact; the real `Proxy` is tested over loopback TCP with
//! behaviour assertions only.

use std::{net::SocketAddr, time::Duration};

use network::proxy::{Direction, Mode, Path, Proxy, SeenLog, Wire, carry};
use rand::{SeedableRng, rngs::StdRng};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt, DuplexStream, duplex},
    net::{TcpListener, TcpStream},
    sync::watch,
    task::JoinHandle,
    time::{Instant, sleep, timeout},
};

const PIPE: usize = 64 * 1024;

/// One direction with a fixed delay and jitter, open at once, unlimited.
fn direction(delay: Duration, jitter: Duration, seed: u64) -> Direction {
    Direction {
        delay,
        jitter,
        wire: None,
        opens_at: Instant::now(),
        rng: StdRng::seed_from_u64(seed),
        seen: None,
    }
}

/// A running `carry`: write into `input`, read from `output`.
struct Link {
    input: DuplexStream,
    output: DuplexStream,
    mode: watch::Sender<Mode>,
    task: JoinHandle<std::io::Result<()>>,
}

fn link(direction: Direction) -> Link {
    let (input, from) = duplex(PIPE);
    let (to, output) = duplex(PIPE);
    // The sender must outlive the test: a closed mode channel ends `carry`.
    let (mode, watch) = watch::channel(Mode::Forward);
    let task = tokio::spawn(carry(from, to, direction, watch));
    Link {
        input,
        output,
        mode,
        task,
    }
}

/// `count` numbered u32s, the bytes every ordering test compares.
fn numbered(count: u32) -> Vec<u8> {
    (0..count).flat_map(u32::to_be_bytes).collect()
}

/// Reads exactly `len` bytes, or fails the test after a (virtual) minute.
async fn read_len(output: &mut DuplexStream, len: usize) -> Vec<u8> {
    let mut got = vec![0; len];
    timeout(Duration::from_secs(60), output.read_exact(&mut got))
        .await
        .expect("the bytes arrive within a minute")
        .expect("the pipe stays open");
    got
}

#[tokio::test(start_paused = true)]
async fn a_chunk_waits_for_its_delay() {
    let delay = Duration::from_millis(40);
    let mut link = link(direction(delay, Duration::ZERO, 1));
    let t0 = Instant::now();
    link.input.write_all(b"hello").await.unwrap();
    assert_eq!(read_len(&mut link.output, 5).await, b"hello");
    let took = t0.elapsed();
    assert!(took >= delay, "delivered after {took:?}, before {delay:?}");
    assert!(took < delay + Duration::from_millis(50), "took {took:?}");
}

#[tokio::test(start_paused = true)]
async fn nothing_leaves_before_the_direction_opens() {
    let delay = Duration::from_millis(30);
    let opens_in = Duration::from_secs(1);
    let mut direction = direction(delay, Duration::ZERO, 1);
    direction.opens_at = Instant::now() + opens_in;
    let mut link = link(direction);
    let t0 = Instant::now();
    link.input.write_all(b"first").await.unwrap();
    assert_eq!(read_len(&mut link.output, 5).await, b"first");
    let took = t0.elapsed();
    assert!(took >= opens_in + delay, "delivered after {took:?}");
    assert!(took < opens_in + delay + Duration::from_millis(50));

    // Once open, a chunk pays its delay only.
    let t1 = Instant::now();
    link.input.write_all(b"later").await.unwrap();
    assert_eq!(read_len(&mut link.output, 5).await, b"later");
    let took = t1.elapsed();
    assert!(took >= delay && took < delay + Duration::from_millis(50));
}

#[tokio::test(start_paused = true)]
async fn heavy_jitter_never_reorders_the_stream() {
    let log = SeenLog::default();
    let mut direction = direction(Duration::from_millis(10), Duration::from_millis(300), 7);
    direction.seen = Some((log.clone(), true));
    let mut link = link(direction);
    let sent = numbered(200);
    let writer = async {
        for (i, number) in sent.chunks(4).enumerate() {
            link.input.write_all(number).await.unwrap();
            // Gaps far shorter than the jitter, so that later chunks draw
            // earlier times than those before them.
            if i % 3 != 0 {
                sleep(Duration::from_millis(1)).await;
            }
        }
    };
    let (_, got) = tokio::join!(writer, read_len(&mut link.output, sent.len()));
    assert_eq!(got, sent);
    let chunks = log.lock().unwrap().len();
    assert!(
        chunks > 100,
        "only {chunks} chunks: the test did not jitter"
    );
}

/// When each byte arrives, relative to the first write, on a fresh paused
/// clock of its own.
fn timeline(seed: u64) -> Vec<(Duration, usize)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut link = link(direction(
            Duration::from_millis(50),
            Duration::from_millis(40),
            seed,
        ));
        let t0 = Instant::now();
        let sent = numbered(20);
        let writer = async {
            for number in sent.chunks(4) {
                link.input.write_all(number).await.unwrap();
                sleep(Duration::from_millis(5)).await;
            }
        };
        let reader = async {
            let (mut arrivals, mut total) = (Vec::new(), 0);
            let mut buf = [0; 256];
            while total < sent.len() {
                let n = timeout(Duration::from_secs(60), link.output.read(&mut buf))
                    .await
                    .expect("the bytes arrive")
                    .unwrap();
                assert!(n > 0, "the output ended early");
                arrivals.push((t0.elapsed(), n));
                total += n;
            }
            arrivals
        };
        tokio::join!(writer, reader).1
    })
}

#[test]
fn the_same_seed_draws_the_same_delays() {
    let first = timeline(42);
    assert_eq!(first, timeline(42));
    assert_ne!(first, timeline(43), "another seed, other delays");
}

#[tokio::test(start_paused = true)]
async fn a_stall_holds_everything_until_forward() {
    let mut link = link(direction(Duration::from_millis(20), Duration::ZERO, 1));
    link.mode.send_replace(Mode::Stall);
    let sent = numbered(50);
    for number in sent.chunks(4) {
        link.input.write_all(number).await.unwrap();
        sleep(Duration::from_millis(2)).await;
    }
    let mut buf = [0; 16];
    let read = timeout(Duration::from_secs(10), link.output.read(&mut buf)).await;
    assert!(read.is_err(), "a stalled link delivered {read:?}");

    link.mode.send_replace(Mode::Forward);
    let t = Instant::now();
    assert_eq!(read_len(&mut link.output, sent.len()).await, sent);
    // Every chunk was long overdue: nothing waits again.
    assert!(t.elapsed() < Duration::from_millis(50), "{:?}", t.elapsed());
}

#[tokio::test(start_paused = true)]
async fn a_blackhole_drops_bytes_and_swallows_the_close() {
    let delay = Duration::from_millis(20);
    let mut link = link(direction(delay, Duration::ZERO, 1));
    link.mode.send_replace(Mode::Blackhole);
    link.input.write_all(b"lost").await.unwrap();
    // What counts is the mode when a chunk is due: wait well past it.
    sleep(Duration::from_secs(1)).await;

    link.mode.send_replace(Mode::Forward);
    link.input.write_all(b"kept").await.unwrap();
    assert_eq!(read_len(&mut link.output, 4).await, b"kept");
    let mut buf = [0; 16];
    let more = timeout(Duration::from_secs(10), link.output.read(&mut buf)).await;
    assert!(more.is_err(), "the blackholed bytes came back: {more:?}");

    // The sender closes while the link is a blackhole: the receiver must
    // not see the end of the stream.
    link.mode.send_replace(Mode::Blackhole);
    link.input.shutdown().await.unwrap();
    let eof = timeout(Duration::from_secs(10), link.output.read(&mut buf)).await;
    assert!(eof.is_err(), "the close went through a blackhole: {eof:?}");
    assert!(!link.task.is_finished());

    // Lifted, the link lets go of the socket: the receiver sees it end.
    link.mode.send_replace(Mode::Forward);
    let end = timeout(Duration::from_secs(10), link.output.read(&mut buf))
        .await
        .expect("the end arrives once the blackhole is lifted")
        .unwrap();
    assert_eq!(end, 0);
    link.task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_end_of_the_stream_passes_after_the_delay() {
    let delay = Duration::from_millis(25);
    let mut link = link(direction(delay, Duration::ZERO, 1));
    let t0 = Instant::now();
    link.input.write_all(b"bye").await.unwrap();
    link.input.shutdown().await.unwrap();
    let mut got = Vec::new();
    timeout(Duration::from_secs(10), link.output.read_to_end(&mut got))
        .await
        .expect("the end arrives")
        .unwrap();
    assert_eq!(got, b"bye");
    assert!(t0.elapsed() >= delay);
    link.task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_wire_carries_no_more_than_its_rate() {
    const RATE: u64 = 100_000;
    const SECONDS: u64 = 3;
    let mut direction = direction(Duration::from_millis(10), Duration::ZERO, 1);
    direction.wire = Some(Wire::new(RATE));
    let mut link = link(direction);
    let sent: Vec<u8> = (0..RATE * SECONDS).map(|i| (i % 251) as u8).collect();
    let t0 = Instant::now();
    let (_, got) = tokio::join!(
        async { link.input.write_all(&sent).await.unwrap() },
        read_len(&mut link.output, sent.len())
    );
    let took = t0.elapsed();
    assert!(got == sent, "the bytes changed on the wire");
    let least = Duration::from_secs(SECONDS) - Duration::from_millis(10);
    let most = Duration::from_secs(SECONDS).mul_f64(1.2);
    assert!(took >= least, "{} bytes in {took:?}", sent.len());
    assert!(took <= most, "{} bytes in {took:?}", sent.len());
}

#[test]
fn a_path_splits_its_round_trip() {
    let path = Path::rtt(Duration::from_millis(30));
    assert_eq!(path.to_server, Duration::from_millis(15));
    assert_eq!(path.to_client, Duration::from_millis(15));
    assert_eq!(path.round_trip(), Duration::from_millis(30));
    assert_eq!(path.jitter, Duration::ZERO);
    assert_eq!(path.rate, None);
    assert_eq!(Path::rtt(Duration::ZERO).round_trip(), Duration::ZERO);
}

/// Echoes every connection on a free loopback port.
async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = socket.split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
            });
        }
    });
    addr
}

const PATIENCE: Duration = Duration::from_secs(5);

async fn echo(client: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
    client.write_all(bytes).await.unwrap();
    let mut got = vec![0; bytes.len()];
    timeout(PATIENCE, client.read_exact(&mut got))
        .await
        .expect("the echo comes back")
        .unwrap();
    got
}

/// A proxy on a free loopback port, with no delay, in front of `upstream`.
async fn proxy_to(upstream: SocketAddr) -> Proxy {
    Proxy::start(
        "127.0.0.1:0".parse().unwrap(),
        upstream,
        Path::rtt(Duration::ZERO),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn the_proxy_carries_tcp_and_can_blackhole_it() {
    let upstream = echo_server().await;
    let proxy = proxy_to(upstream).await;
    let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(echo(&mut client, b"ping").await, b"ping");
    assert_eq!(proxy.accepted(), 1);
    let seen = proxy.seen();
    assert!(seen.iter().any(|s| s.towards_server && s.bytes > 0));
    assert!(seen.iter().any(|s| !s.towards_server && s.bytes > 0));

    proxy.set(Mode::Blackhole);
    client.write_all(b"lost").await.unwrap();
    let mut buf = [0; 16];
    let read = timeout(Duration::from_millis(300), client.read(&mut buf)).await;
    assert!(read.is_err(), "a blackhole answered (or closed): {read:?}");

    // The connection survived the blackhole; what fell in stays lost.
    proxy.set(Mode::Forward);
    assert_eq!(echo(&mut client, b"back").await, b"back");
    assert_eq!(proxy.accepted(), 1);
}

#[tokio::test]
async fn an_unreachable_upstream_closes_the_client() {
    // A port bound but not listening refuses every connection, and stays
    // ours for the whole test: a listener dropped to free its port could see
    // the port handed to another test's server meanwhile.
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let proxy = proxy_to(held.local_addr().unwrap()).await;
    let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut buf = [0; 16];
    let read = timeout(PATIENCE, client.read(&mut buf))
        .await
        .expect("the proxy closes the connection instead of holding it");
    assert!(matches!(read, Ok(0) | Err(_)), "read {read:?}");
}

#[tokio::test]
async fn dropping_the_proxy_closes_its_connections() {
    let upstream = echo_server().await;
    let proxy = proxy_to(upstream).await;
    let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(echo(&mut client, b"ping").await, b"ping");
    drop(proxy);
    let mut buf = [0; 16];
    let read = timeout(PATIENCE, client.read(&mut buf))
        .await
        .expect("a dropped proxy lets its connections go");
    assert!(matches!(read, Ok(0) | Err(_)), "read {read:?}");
}
