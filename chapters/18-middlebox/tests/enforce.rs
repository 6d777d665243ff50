//! gRFC A8's ping enforcement, as `middlebox::enforce` applies it.
//!
//! The rule's tests drive one wrapped connection through an in-memory pipe on
//! a paused clock: the test plays the client (raw frames) and, through the
//! wrapper, the server. The last tests put a real tonic server behind it.

use std::time::Duration;

use middlebox::{
    enforce::{ConnectionLog, Enforced, Log, PingPolicy, enforce},
    frames::{
        self, DATA, END_STREAM, ENHANCE_YOUR_CALM, HEADERS, PING, PREFACE, RST_STREAM, Scanner,
    },
};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWriteExt, DuplexStream, duplex},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
    time::{sleep, timeout},
};

const SETTINGS: u8 = 0x4;
/// Long enough for anything in a pipe on a paused clock, which advances it
/// only when every task waits.
const WAIT: Duration = Duration::from_secs(60);
/// How long the client listens to be sure nothing comes (the clock is paused:
/// any wait would do; a second keeps the PINGs' times round).
const QUIET: Duration = Duration::from_secs(1);

fn ping(n: u8) -> Vec<u8> {
    frames::frame(PING, 0, 0, &[n; 8])
}

fn too_many_pings(last_stream: u32) -> Vec<u8> {
    frames::goaway(last_stream, ENHANCE_YOUR_CALM, b"too_many_pings")
}

/// Every byte `io` yields until EOF.
async fn read_to_end(mut io: impl AsyncRead + Unpin) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    io.read_to_end(&mut bytes).await?;
    Ok(bytes)
}

/// The server's reading side: reads the wrapper until EOF, as hyper would,
/// and returns what passed.
fn serve_reads(
    io: impl AsyncRead + Unpin + Send + 'static,
) -> JoinHandle<std::io::Result<Vec<u8>>> {
    tokio::spawn(read_to_end(io))
}

/// A connection through the wrapper: the client's end of the pipe and the
/// server's (wrapped) end.
async fn connect(policy: PingPolicy, log: &Log) -> (DuplexStream, Enforced<DuplexStream>) {
    let (server, mut client) = duplex(1 << 16);
    let enforced = Enforced::new(server, policy, log.clone());
    let mut hello = PREFACE.to_vec();
    hello.extend(frames::frame(SETTINGS, 0, 0, &[]));
    client.write_all(&hello).await.unwrap();
    (client, enforced)
}

/// Asserts that nothing arrives for the client for a while.
async fn assert_quiet(client: &mut DuplexStream) {
    let mut byte = [0; 1];
    let read = timeout(QUIET, client.read(&mut byte)).await;
    assert!(read.is_err(), "the client should hear nothing: {read:?}");
}

fn only(log: &Log) -> ConnectionLog {
    let connections = log.connections();
    assert_eq!(connections.len(), 1, "{connections:?}");
    connections[0].clone()
}

/// A policy of `min_time_s`, no pings without calls, 2 strikes (A8's, faster).
/// gRFC A8's policy with a shorter `min_time`.
fn min_time(min_time_s: u64) -> PingPolicy {
    PingPolicy {
        min_time: Duration::from_secs(min_time_s),
        permit_without_calls: false,
        max_strikes: 2,
    }
}

// The first PING is never a strike (there is no previous one to be too
// close to); the second, third and fourth are, with no call open (2 hours
// needed). The fourth makes 3 strikes, more than 2: it earns the GOAWAY.
#[tokio::test(start_paused = true)]
async fn the_fourth_quick_ping_without_a_call_earns_a_goaway_then_eof() {
    let log = Log::new();
    let (mut client, enforced) = connect(min_time(10), &log).await;
    let server = serve_reads(enforced);
    for n in 1..=3 {
        sleep(Duration::from_secs(1)).await;
        client.write_all(&ping(n)).await.unwrap();
    }
    // A second later, after three PINGs and two strikes: nothing yet.
    assert_quiet(&mut client).await;
    assert_eq!(only(&log).strikes, 2);
    client.write_all(&ping(4)).await.unwrap();
    let heard = timeout(WAIT, read_to_end(&mut client))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(heard, too_many_pings(0), "a GOAWAY, then EOF");
    let goaway = Scanner::from_server().observe(&heard);
    assert_eq!(goaway[0].error_code(), Some(ENHANCE_YOUR_CALM));
    assert!(heard.ends_with(b"too_many_pings"));

    // hyper read up to the third PING, then EOF; the fourth never reached it.
    let passed = timeout(WAIT, server).await.unwrap().unwrap().unwrap();
    let mut expected = PREFACE.to_vec();
    expected.extend(frames::frame(SETTINGS, 0, 0, &[]));
    (1..=3).for_each(|n| expected.extend(ping(n)));
    assert_eq!(passed, expected);

    let seen = only(&log);
    assert_eq!(seen.pings_s, [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(seen.strikes, 3);
    // Written at once: nothing was being written when the PING came.
    assert_eq!(seen.goaway_s, Some(4.0));
}

#[tokio::test(start_paused = true)]
async fn pings_wider_apart_than_min_time_during_a_call_never_strike() {
    let log = Log::new();
    let (mut client, enforced) = connect(min_time(10), &log).await;
    let _server = serve_reads(enforced);
    // A call (END_HEADERS, not END_STREAM): open until the server ends it.
    client
        .write_all(&frames::frame(HEADERS, 0x4, 1, b"hdrs"))
        .await
        .unwrap();
    for n in 1..=10 {
        sleep(Duration::from_secs(11)).await;
        client.write_all(&ping(n)).await.unwrap();
    }
    assert_quiet(&mut client).await;
    let seen = only(&log);
    assert_eq!(
        (seen.pings_s.len(), seen.strikes, seen.goaway_s),
        (10, 0, None)
    );
}

#[tokio::test(start_paused = true)]
async fn with_permit_without_calls_min_time_applies_with_no_call_too() {
    let log = Log::new();
    let policy = PingPolicy {
        permit_without_calls: true,
        ..min_time(10)
    };
    let (mut client, enforced) = connect(policy, &log).await;
    let _server = serve_reads(enforced);
    for n in 1..=10 {
        sleep(Duration::from_secs(11)).await;
        client.write_all(&ping(n)).await.unwrap();
    }
    assert_quiet(&mut client).await;
    let seen = only(&log);
    assert_eq!(
        (seen.pings_s.len(), seen.strikes, seen.goaway_s),
        (10, 0, None)
    );
}

// Two calls open, then end: one reset by the client, one by the server's
// trailers. With none open, 11 s is too soon again (2 hours needed); the
// GOAWAY names the highest stream the client opened.
#[tokio::test(start_paused = true)]
async fn calls_end_with_a_reset_or_the_servers_end_stream() {
    let log = Log::new();
    let (mut client, enforced) = connect(min_time(10), &log).await;
    let (reads, mut writes) = tokio::io::split(enforced);
    let _server = serve_reads(reads);
    client
        .write_all(&frames::frame(HEADERS, 0x4, 1, b"hdrs"))
        .await
        .unwrap();
    client
        .write_all(&frames::frame(HEADERS, 0x4 | END_STREAM, 3, b"hdrs"))
        .await
        .unwrap();
    client
        .write_all(&frames::frame(RST_STREAM, 0, 1, &8u32.to_be_bytes()))
        .await
        .unwrap();
    sleep(Duration::from_secs(1)).await;
    let trailers = frames::frame(HEADERS, 0x4 | END_STREAM, 3, b"trls");
    writes.write_all(&trailers).await.unwrap();
    let mut heard = vec![0; trailers.len()];
    client.read_exact(&mut heard).await.unwrap();

    // The first PING after the trailers is not checked (they reset the
    // strikes); the next three are strikes.
    for n in 1..=4 {
        sleep(Duration::from_secs(11)).await;
        client.write_all(&ping(n)).await.unwrap();
    }
    let heard = timeout(WAIT, read_to_end(&mut client))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(heard, too_many_pings(3));
    assert_eq!(only(&log).strikes, 3);
}

#[tokio::test(start_paused = true)]
async fn the_servers_headers_and_data_between_pings_reset_the_strikes() {
    let log = Log::new();
    let (mut client, enforced) = connect(min_time(10), &log).await;
    let (reads, mut writes) = tokio::io::split(enforced);
    let _server = serve_reads(reads);
    for n in 1..=10 {
        client.write_all(&ping(n)).await.unwrap();
        sleep(Duration::from_secs(1)).await;
        // As a server streaming a response would: data, now and then headers.
        let kind = if n % 3 == 0 { HEADERS } else { DATA };
        let frame = frames::frame(kind, 0, 1, b"x");
        writes.write_all(&frame).await.unwrap();
        let mut heard = vec![0; frame.len()];
        timeout(WAIT, client.read_exact(&mut heard))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(heard, frame);
    }
    assert_quiet(&mut client).await;
    let seen = only(&log);
    assert_eq!(
        (seen.pings_s.len(), seen.strikes, seen.goaway_s),
        (10, 0, None)
    );
}

// A GOAWAY owed while hyper is halfway through a frame waits for the frame's
// end: a frame cut in two would be garbage to the client.
#[tokio::test(start_paused = true)]
async fn a_goaway_waits_for_the_end_of_the_frame_being_written() {
    let log = Log::new();
    let (mut client, enforced) = connect(min_time(10), &log).await;
    let (reads, mut writes) = tokio::io::split(enforced);
    let server = serve_reads(reads);
    let data = frames::frame(DATA, 0, 1, &[7; 20]);
    writes.write_all(&data[..5]).await.unwrap();
    let mut heard = [0; 5];
    client.read_exact(&mut heard).await.unwrap();
    for n in 1..=4 {
        client.write_all(&ping(n)).await.unwrap();
    }
    assert_quiet(&mut client).await;
    assert_eq!(only(&log).goaway_s, None, "owed, not written");

    // The rest of the frame and the next one in one write: only the rest
    // passes, then the GOAWAY, then EOF.
    let mut more = data[5..].to_vec();
    more.extend(frames::frame(DATA, 0, 1, b"late"));
    let n = writes.write(&more).await.unwrap();
    assert_eq!(n, data.len() - 5);
    let heard = timeout(WAIT, read_to_end(&mut client))
        .await
        .unwrap()
        .unwrap();
    let mut expected = data[5..].to_vec();
    expected.extend(too_many_pings(0));
    assert_eq!(heard, expected);
    timeout(WAIT, server).await.unwrap().unwrap().unwrap();
    let late = writes.write_all(b"late").await.unwrap_err();
    assert_eq!(late.kind(), std::io::ErrorKind::BrokenPipe);
    assert!(only(&log).goaway_s.is_some());
}

// Garbage is not the wrapper's business: it passes unchanged both ways
// (hyper is the one to refuse it), and nothing in it may panic the wrapper.
#[tokio::test(start_paused = true)]
async fn garbage_passes_both_ways_unchanged() {
    let mut garbage = Vec::new();
    let mut x: u32 = 0x9e37_79b9;
    for _ in 0..20_000 {
        // xorshift: the same bytes every run.
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        garbage.push(x as u8);
    }
    // A header that claims a 16 MiB PING, then one that claims more than
    // is ever sent.
    garbage.extend([0xff, 0xff, 0xff, PING, 0, 0, 0, 0, 0]);
    garbage.extend([0; 100]);
    garbage.extend([0xff, 0xff, 0xff, DATA, 0, 0x7f, 0xff, 0xff, 0xff]);
    for client_side in [garbage.clone(), [PREFACE, &garbage[..]].concat()] {
        let log = Log::new();
        let (server, mut client) = duplex(1 << 16);
        let enforced = Enforced::new(server, PingPolicy::A8_DEFAULT, log.clone());
        let (mut reads, mut writes) = tokio::io::split(enforced);
        let talk = async {
            for chunk in client_side.chunks(777) {
                client.write_all(chunk).await.unwrap();
            }
            for chunk in garbage.chunks(555) {
                writes.write_all(chunk).await.unwrap();
            }
            writes.shutdown().await.unwrap();
            let mut heard = Vec::new();
            client.read_to_end(&mut heard).await.unwrap();
            client.shutdown().await.unwrap();
            heard
        };
        let (heard, passed) = timeout(WAIT, async { tokio::join!(talk, read_to_end(&mut reads)) })
            .await
            .unwrap();
        assert_eq!(passed.unwrap(), client_side);
        assert_eq!(heard, garbage);
    }
}

/// A tonic Greeter server on 127.0.0.1 whose connections go through
/// [`enforce`].
async fn greeter(policy: PingPolicy, log: &Log) -> (std::net::SocketAddr, JoinHandle<()>) {
    use proto::greeter::v1::greeter_server::GreeterServer;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = enforce(
        tokio_stream::wrappers::TcpListenerStream::new(listener),
        policy,
        log.clone(),
    );
    let server = tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(GreeterServer::new(grpc_server::greeter::Greeter::default()))
            .serve_with_incoming(incoming)
            .await
            .unwrap();
    });
    (addr, server)
}

fn hello() -> proto::greeter::v1::HelloRequest {
    proto::greeter::v1::HelloRequest {
        name: "Ada".into(),
        delay_ms: 0,
    }
}

// Real sockets, so real time: on a paused clock Tokio jumps to the next timer
// whenever every task waits, and a task waiting for a socket counts as
// waiting; hyper's keepalive timeout (1 s) would then fire while a PING ACK is
// still in the kernel. The whole test takes about half a second: one PING per
// 100 ms, and the fourth after the call earns the GOAWAY.
#[tokio::test]
async fn a_tonic_client_that_pings_every_100ms_gets_a_goaway_and_reconnects() -> anyhow::Result<()>
{
    use proto::greeter::v1::greeter_client::GreeterClient;
    let log = Log::new();
    let policy = PingPolicy {
        min_time: Duration::from_secs(1),
        permit_without_calls: false,
        max_strikes: 2,
    };
    let (addr, server) = greeter(policy, &log).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
        .http2_keep_alive_interval(Duration::from_millis(100))
        .keep_alive_while_idle(true)
        .keep_alive_timeout(Duration::from_secs(1))
        .connect()
        .await?;
    let mut client = GreeterClient::new(channel);
    timeout(Duration::from_secs(5), client.say_hello(hello())).await??;

    let first = timeout(Duration::from_secs(5), async {
        loop {
            if let Some(first) = log.connections().into_iter().next()
                && first.goaway_s.is_some()
            {
                return first;
            }
            sleep(Duration::from_millis(20)).await;
        }
    })
    .await?;
    assert_eq!(first.strikes, 3, "{first:?}");
    assert!(first.pings_s.len() >= 4, "{first:?}");

    // The GOAWAY is logged once written; give the client a moment to read it
    // and the FIN behind it, so the next call is not sent into the closing
    // connection (it would fail there, as A8 intends for calls in flight).
    sleep(Duration::from_millis(200)).await;
    let reply = timeout(Duration::from_secs(5), client.say_hello(hello())).await??;
    assert_eq!(reply.into_inner().message, "Hello, Ada!");
    let connections = log.connections();
    assert_eq!(
        connections.len(),
        2,
        "the channel reconnected: {connections:?}"
    );
    server.abort();
    Ok(())
}

// hyper refuses what the wrapper passed on and closes the connection; the
// server goes on serving. Real sockets, so real time (see above).
#[tokio::test]
async fn hyper_closes_a_malformed_connection_and_serves_the_next() -> anyhow::Result<()> {
    let log = Log::new();
    let (addr, server) = greeter(PingPolicy::A8_DEFAULT, &log).await;
    // A frame header that claims 16 MiB, and text: its first bytes, read as
    // a frame header, claim megabytes too. (Garbage that happened to claim a
    // short frame would leave hyper waiting for the rest: correctly.)
    let huge = [0xff, 0xff, 0xff, DATA, 0, 0, 0, 0, 1];
    let garbage = b"this is not HTTP/2 at all\r\n\r\n";
    for after_preface in [&huge[..], &garbage[..]] {
        let mut raw = TcpStream::connect(addr).await?;
        raw.write_all(&[PREFACE, after_preface].concat()).await?;
        let heard = timeout(Duration::from_secs(5), read_to_end(&mut raw)).await??;
        // hyper's own GOAWAY came back through the wrapper: it passed the
        // bytes on, and survived hyper's answer.
        let goaways: Vec<_> = Scanner::from_server()
            .observe(&heard)
            .into_iter()
            .filter_map(|f| f.error_code())
            .collect();
        assert_eq!(goaways.len(), 1, "{heard:?}");
        assert_ne!(goaways[0], ENHANCE_YOUR_CALM);
    }
    // No preface at all: an HTTP/1.1 client at an HTTP/2-only server.
    let mut raw = TcpStream::connect(addr).await?;
    raw.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await?;
    // hyper drops it with the request unread, so the kernel answers RST.
    match timeout(Duration::from_secs(5), read_to_end(&mut raw)).await? {
        Ok(_) => {}
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
    }
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let mut client = proto::greeter::v1::greeter_client::GreeterClient::new(channel);
    timeout(Duration::from_secs(5), client.say_hello(hello())).await??;
    assert_eq!(log.connections().len(), 4);
    server.abort();
    Ok(())
}
