//! The real `grpc-client` binary against servers in this process: real TLS
//! with a fresh PKI per test, servers on 127.0.0.1:0. Each test checks the exit
//! status and the shape of what the client printed; none asserts how fast
//! anything was, and every wait is bounded.
//!
//! One file for the whole command line (about 560 lines): every test drives
//! the same binary through the same helpers, and a reader looking for how a
//! flag behaves finds it here, whichever call it belongs to.

use std::{
    net::SocketAddr,
    pin::Pin,
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use grpc_server::{
    BoundServer, CallStats,
    testing::{Serving, TempPki, spawn_until_dropped, wait_until, within},
};
use proto::{
    status,
    streaming::v1::{
        Chunk, CountdownRequest, Tick, UploadSummary,
        streamer_server::{Streamer, StreamerServer},
    },
};
use tokio::process::Command;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

struct TestServer {
    addr: SocketAddr,
    stats: Arc<CallStats>,
    /// Countdown streams the fake server is still producing.
    streams_open: Arc<AtomicU64>,
    _serving: Serving,
    pki: TempPki,
}

impl TestServer {
    /// The URL the client dials: by IP, which the server certificate also
    /// names, so the client verifies the certificate for real.
    fn target(&self) -> String {
        format!("https://127.0.0.1:{}", self.addr.port())
    }
}

async fn start_server(mtls: bool, concurrency_limit: Option<usize>) -> TestServer {
    let pki = TempPki::new();
    let args = grpc_server::Args {
        concurrency_limit,
        ..pki.server_args(mtls)
    };
    let streamer = FakeStreamer::default();
    let streams_open = streamer.streams_open.clone();
    let server = BoundServer::bind(&args)
        .await
        .unwrap()
        .add_service(StreamerServer::new(streamer));
    TestServer {
        addr: server.local_addr(),
        stats: server.stats(),
        streams_open,
        _serving: spawn_until_dropped(|shutdown| server.serve(shutdown)),
        pki,
    }
}

/// What one run of the client printed, and how it ended.
#[derive(Debug)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

/// Runs `grpc-client --target <server> --ca <its CA> ARGS...`.
async fn client(server: &TestServer, args: &[&str]) -> Run {
    let target = server.target();
    let ca = server.pki.ca_cert();
    let mut all = vec!["--target", &target, "--ca", ca.to_str().unwrap()];
    all.extend_from_slice(args);
    run_client(&all).await
}

/// Runs the client against `server` and asserts it exited 0, so that a test
/// of a call that should work checks only what the client printed.
async fn client_ok(server: &TestServer, args: &[&str]) -> Run {
    let run = client(server, args).await;
    assert_eq!(run.code, Some(0), "{run:#?}");
    run
}

async fn run_client(args: &[&str]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_grpc-client"));
    command
        .args(args)
        .env_remove("GRPC_TARGET")
        .env_remove("GRPC_CA")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let started = Instant::now();
    let output = within(&format!("grpc-client {args:?}"), command.output())
        .await
        .expect("run grpc-client");
    let run = Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        elapsed: started.elapsed(),
    };
    println!("grpc-client {args:?}\n{run:#?}");
    run
}

/// Waits until the server has counted the one call as ended early: the client
/// gave up, and the server must have stopped working on it, not finished it.
async fn wait_until_ended_early(server: &TestServer) {
    wait_until(
        "the server counted the call as ended early",
        &server.stats,
        |s| s.ended_early() == 1 && s.in_flight() == 0,
    )
    .await;
}

/// Asserts the failure report's exact shape for `name`, and nothing on stdout,
/// and returns the details line.
fn assert_failure(run: &Run, name: &str) -> String {
    assert_eq!(run.stdout, "", "nothing on stdout when the call failed");
    assert_report(run, name)
}

/// Asserts exit status 1 and the failure report's exact shape for `name` on
/// stderr, with no error details after its three lines, and returns the
/// details line.
fn assert_report(run: &Run, name: &str) -> String {
    assert_eq!(run.stderr.lines().count(), 3, "{run:#?}");
    assert_report_with_details(run, name)
}

/// As [`assert_report`], for a report that may go on with error details.
fn assert_report_with_details(run: &Run, name: &str) -> String {
    assert_eq!(run.code, Some(1), "{run:#?}");
    let row = status::by_name(name).unwrap();
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert!(lines.len() >= 3, "{run:#?}");
    assert_eq!(lines[0], format!("RPC failed: {name}"));
    let details = lines[1]
        .strip_prefix("  details: ")
        .unwrap_or_else(|| panic!("no details line: {run:#?}"));
    assert_eq!(
        lines[2],
        format!("  meaning: {} (REST: {})", row.meaning, row.http_label())
    );
    details.to_string()
}

#[tokio::test]
async fn hello_prints_the_reply_and_exits_0() {
    let server = start_server(false, None).await;
    let run = client_ok(&server, &["hello", "--name", "Ada"]).await;
    assert_eq!(run.stdout, "Hello, Ada!\n");
    assert_eq!(run.stderr, "");
}

#[tokio::test]
async fn repeated_calls_share_the_channel_and_are_each_timed() {
    let server = start_server(false, None).await;
    let run = client_ok(&server, &["--connect", "eager", "hello", "--repeat", "3"]).await;
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{run:#?}");
    for (n, line) in lines.iter().enumerate() {
        assert!(
            line.starts_with(&format!("call {}: Hello, Ada! (", n + 1)),
            "{line}"
        );
        assert!(line.ends_with(" ms)"), "{line}");
    }
    assert!(run.stderr.starts_with("connected to "), "{run:#?}");
    assert_eq!(server.stats.completed(), 3);
}

#[tokio::test]
async fn each_bad_input_is_invalid_argument_with_its_field_violation_printed() {
    let server = start_server(false, None).await;
    let max_delay = (grpc_server::MAX_DELAY_MS + 1).to_string();
    for (args, field, reason) in [
        (vec!["hello", "--name", ""], "name", "NAME_EMPTY"),
        (
            vec!["hello", "--name-bytes", "300"],
            "name",
            "NAME_TOO_LONG",
        ),
        (
            vec!["hello", "--delay-ms", &max_delay],
            "delay_ms",
            "DELAY_TOO_LONG",
        ),
    ] {
        let run = client(&server, &args).await;
        assert_eq!(run.stdout, "", "{run:#?}");
        let details = assert_report_with_details(&run, "INVALID_ARGUMENT");
        // The message says it in words; the details, for a program, after
        // the three lines: the field with the same words, then the reason.
        let description = details
            .strip_prefix(&format!("{field}: "))
            .unwrap_or_else(|| panic!("the message names {field}: {run:#?}"));
        let lines: Vec<&str> = run.stderr.lines().skip(3).collect();
        assert_eq!(
            lines,
            [
                format!("  bad field: {field}: {description} ({reason})"),
                format!("  reason: {reason} (domain {})", grpc_server::ERROR_DOMAIN),
            ],
            "{run:#?}"
        );
    }
    assert_eq!(server.stats.started.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn an_expired_deadline_is_reported_as_deadline_exceeded() {
    let server = start_server(false, None).await;
    let delay = Duration::from_secs(10);
    let run = client(
        &server,
        &["--deadline", "0.5", "hello", "--delay-ms", "10000"],
    )
    .await;
    // Two timers race: this client's own (tonic's CANCELLED, translated by
    // the rule) and the server's, whose answer is DEADLINE_EXCEEDED already.
    let details = assert_failure(&run, "DEADLINE_EXCEEDED");
    assert!(
        details.contains("tonic reported CANCELLED; the 0.5s deadline had passed")
            || details.contains("no reply within the caller's grpc-timeout"),
        "{details}"
    );
    // The deadline, not the delay, ended the call: on the client...
    assert!(run.elapsed >= Duration::from_millis(500), "{run:#?}");
    assert!(
        run.elapsed < delay / 2,
        "the call ran its full delay: {run:#?}"
    );
    // ...and on the server, which stopped working.
    wait_until_ended_early(&server).await;
    assert_eq!(server.stats.completed(), 0);
}

#[tokio::test]
async fn raw_status_shows_what_tonic_reports_for_the_same_deadline() {
    let server = start_server(false, None).await;
    let run = client(
        &server,
        &[
            "--raw-status",
            "--deadline",
            "0.5",
            "hello",
            "--delay-ms",
            "10000",
        ],
    )
    .await;
    // Whichever timer fired first: this client's own (tonic says CANCELLED),
    // or the server's (DEADLINE_EXCEEDED, as the specification says).
    let code = run.stderr.lines().next().unwrap_or_default();
    match code.strip_prefix("RPC failed: ") {
        Some("CANCELLED") => assert_eq!(assert_failure(&run, "CANCELLED"), "Timeout expired"),
        _ => {
            let details = assert_failure(&run, "DEADLINE_EXCEEDED");
            assert!(details.starts_with("deadline exceeded: "), "{details}");
        }
    }
}

#[tokio::test]
async fn a_client_cancelling_before_its_deadline_is_cancelled() {
    let server = start_server(false, None).await;
    let run = client(
        &server,
        &[
            "--deadline",
            "60",
            "hello",
            "--delay-ms",
            "10000",
            "--cancel-after",
            "0.3",
        ],
    )
    .await;
    let details = assert_failure(&run, "CANCELLED");
    assert_eq!(details, "this client cancelled the call after 0.3s");
    wait_until_ended_early(&server).await;
}

#[tokio::test]
async fn nothing_listening_is_unavailable_lazy_or_eager() {
    // A port bound but not listening: it refuses connections, and no other
    // test's server can take it while this one runs.
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = held.local_addr().unwrap().port();
    let pki = TempPki::new();
    let target = format!("https://127.0.0.1:{port}");
    let ca = pki.ca_cert();
    for connect in ["lazy", "eager"] {
        let run = run_client(&[
            "--target",
            &target,
            "--ca",
            ca.to_str().unwrap(),
            "--connect",
            connect,
            "hello",
        ])
        .await;
        assert_eq!(run.stdout, "");
        let details = assert_report_with_details(&run, "UNAVAILABLE");
        assert!(details.contains("onnect"), "{connect}: {details}");
        // UNAVAILABLE means "retry"; here the fix is to start something.
        assert_eq!(
            run.stderr.lines().skip(3).collect::<Vec<_>>(),
            [format!(
                "  next: nothing is listening at {target}: start the server, \
                 or check --target (GRPC_TARGET), then try again"
            )],
            "{connect}"
        );
    }
}

#[tokio::test]
async fn a_burst_over_the_concurrency_limit_is_partly_shed_with_resource_exhausted() {
    let server = start_server(false, Some(2)).await;
    // Each admitted call holds its slot for 3 s, so the calls overlap and only
    // two can be admitted at a time on the burst's one connection.
    let run = client(&server, &["burst", "--calls", "6", "--delay-ms", "3000"]).await;
    assert_eq!(run.code, Some(1), "{run:#?}");
    let count = |name: &str| -> u32 {
        run.stdout
            .lines()
            .find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some(name)).then(|| words.next().unwrap().parse().unwrap())
            })
            .unwrap_or(0)
    };
    let (ok, shed) = (count("OK"), count("RESOURCE_EXHAUSTED"));
    assert_eq!(ok + shed, 6, "{run:#?}");
    assert!(ok >= 2, "the first two calls fit the limit: {run:#?}");
    assert!(shed >= 1, "{run:#?}");
    assert!(
        run.stdout
            .contains("Too many active requests for the connection"),
        "{run:#?}"
    );
    assert_eq!(server.stats.completed(), u64::from(ok));
}

#[tokio::test]
async fn an_oversized_message_is_resource_exhausted() {
    let server = start_server(false, None).await;
    let run = client(&server, &["hello", "--name-bytes", "100000"]).await;
    // gRPC's status code table says RESOURCE_EXHAUSTED; tonic's decoder says
    // OUT_OF_RANGE, which the server corrects (`grpc_server::spec_codes`).
    let details = assert_failure(&run, "RESOURCE_EXHAUSTED");
    assert!(
        details.contains("decoded message length too large"),
        "{details}"
    );
    assert_eq!(server.stats.started.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn mtls_refuses_a_client_without_a_certificate_and_accepts_one_with() {
    let server = start_server(true, None).await;
    let run = client(&server, &["hello"]).await;
    assert_eq!(run.code, Some(1), "{run:#?}");
    assert_eq!(run.stdout, "");
    // The refusal races with the client's first read (TLS 1.3 lets the client
    // finish its side of the handshake first), so what the client reports
    // varies; that it fails, with a report of the usual shape, does not.
    let first = run.stderr.lines().next().unwrap_or_default();
    assert!(first.starts_with("RPC failed: "), "{run:#?}");
    assert_eq!(run.stderr.lines().count(), 3, "{run:#?}");

    let (cert, key) = (server.pki.client_cert(), server.pki.client_key());
    let run = client_ok(
        &server,
        &[
            "--cert",
            cert.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
            "hello",
        ],
    )
    .await;
    assert_eq!(run.stdout, "Hello, Ada!\n");
}

#[tokio::test]
async fn missing_certificate_files_are_a_setup_error_naming_the_fix() {
    let server = start_server(false, None).await;
    let missing = server.pki.path("nowhere/ca.pem");
    let target = server.target();
    let run = run_client(&[
        "--target",
        &target,
        "--ca",
        missing.to_str().unwrap(),
        "hello",
    ])
    .await;
    assert_eq!(run.code, Some(2), "{run:#?}");
    assert!(run.stderr.starts_with("error: cannot read "), "{run:#?}");
    assert!(run.stderr.contains("cargo run -p certs"), "{run:#?}");
}

// ---------------------------------------------------------------------------
// The streaming subcommands, against a small stand-in for chapter 8's server.

#[tokio::test]
async fn countdown_prints_every_tick() {
    let server = start_server(false, None).await;
    let run = client_ok(
        &server,
        &["countdown", "--count", "3", "--interval-ms", "1"],
    )
    .await;
    let remaining: Vec<&str> = run
        .stdout
        .lines()
        .filter_map(|line| line.strip_prefix("tick remaining="))
        .map(|rest| rest.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(remaining, ["2", "1", "0"], "{run:#?}");
    assert!(run.stdout.contains("countdown done: 3 ticks"), "{run:#?}");
}

#[tokio::test]
async fn upload_reports_what_the_server_counted() {
    let server = start_server(false, None).await;
    let run = client_ok(
        &server,
        &["upload", "--chunks", "4", "--chunk-bytes", "100"],
    )
    .await;
    assert!(
        run.stdout
            .starts_with("sent 4 chunks (400 bytes); the server counted 4 chunks, 400 bytes"),
        "{run:#?}"
    );
}

#[tokio::test]
async fn echo_gets_every_chunk_back_and_ends_cleanly() {
    let server = start_server(false, None).await;
    let run = client_ok(&server, &["echo", "--chunks", "3", "--chunk-bytes", "8"]).await;
    for seq in 0..3 {
        assert!(
            run.stdout.contains(&format!("echo seq={seq} 8 bytes")),
            "{run:#?}"
        );
    }
    assert!(run.stdout.contains("echo done: 3 chunks"), "{run:#?}");
}

#[tokio::test]
async fn a_stream_past_its_deadline_is_deadline_exceeded() {
    let server = start_server(false, None).await;
    let run = client(
        &server,
        &[
            "--deadline",
            "0.3",
            "countdown",
            "--count",
            "100",
            "--interval-ms",
            "100",
        ],
    )
    .await;
    let details = assert_report(&run, "DEADLINE_EXCEEDED");
    assert!(details.contains("with the stream still open"), "{details}");
    assert!(run.elapsed >= Duration::from_millis(300), "{run:#?}");
    // The ticks that arrived in time were printed; the stream ended long
    // before its 100 ticks.
    let ticks = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("tick "))
        .count();
    assert!(ticks < 100, "{run:#?}");
    // Ending the stream on the client ended it on the server too.
    wait_until(
        "the server's stream is closed",
        &server.streams_open,
        |open| open.load(Ordering::SeqCst) == 0,
    )
    .await;
}

/// Just enough of `streaming.v1.Streamer` to exercise the client.
#[derive(Default)]
struct FakeStreamer {
    streams_open: Arc<AtomicU64>,
}

/// Counts a countdown stream as open until the server drops it.
struct OpenStream(Arc<AtomicU64>);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl Streamer for FakeStreamer {
    type CountdownStream = BoxStream<Tick>;
    type EchoStream = BoxStream<Chunk>;

    async fn countdown(
        &self,
        request: Request<CountdownRequest>,
    ) -> Result<Response<Self::CountdownStream>, Status> {
        let CountdownRequest {
            count,
            interval_ms,
            payload_bytes,
        } = request.into_inner();
        let interval = Duration::from_millis(interval_ms.into());
        self.streams_open.fetch_add(1, Ordering::SeqCst);
        let open = Arc::new(OpenStream(self.streams_open.clone()));
        let ticks = tokio_stream::iter((0..count).rev()).then(move |remaining| {
            let _open = open.clone();
            async move {
                tokio::time::sleep(interval).await;
                Ok(Tick {
                    remaining,
                    payload: vec![0; payload_bytes as usize],
                })
            }
        });
        Ok(Response::new(Box::pin(ticks)))
    }

    async fn upload(
        &self,
        request: Request<Streaming<Chunk>>,
    ) -> Result<Response<UploadSummary>, Status> {
        let mut chunks = request.into_inner();
        let mut summary = UploadSummary::default();
        while let Some(chunk) = chunks.message().await? {
            summary.chunks += 1;
            summary.bytes += chunk.data.len() as u64;
        }
        Ok(Response::new(summary))
    }

    async fn echo(
        &self,
        request: Request<Streaming<Chunk>>,
    ) -> Result<Response<Self::EchoStream>, Status> {
        Ok(Response::new(Box::pin(request.into_inner())))
    }
}

/// tonic's per-connection limit counts a call until its response headers go
/// out (chapter 7 says so): a stream that is still sending ticks no longer
/// holds its slot, so a unary call on the same connection gets in.
#[tokio::test]
async fn a_stream_holds_a_concurrency_slot_only_until_its_headers() {
    let server = start_server(false, Some(1)).await;
    let endpoint = grpc_client::endpoint(&grpc_client::Target {
        url: server.target(),
        ca: server.pki.ca_cert(),
        identity: None,
    })
    .unwrap();
    let channel = endpoint.connect_lazy();
    let mut streamer = proto::streaming::v1::streamer_client::StreamerClient::new(channel.clone());
    let mut ticks = within(
        "countdown",
        streamer.countdown(CountdownRequest {
            count: 30,
            interval_ms: 100,
            payload_bytes: 0,
        }),
    )
    .await
    .expect("countdown starts")
    .into_inner();
    let first = within("first tick", ticks.message()).await.unwrap();
    assert!(first.is_some());
    // The stream is still producing ticks; a unary call on the same
    // connection gets the one slot.
    let mut greeter = proto::greeter::v1::greeter_client::GreeterClient::new(channel);
    let reply = within(
        "greeting",
        greeter.say_hello(proto::greeter::v1::HelloRequest {
            name: "Ada".into(),
            delay_ms: 0,
        }),
    )
    .await;
    assert!(reply.is_ok(), "{reply:?}");
    assert_eq!(server.streams_open.load(Ordering::SeqCst), 1);
}
