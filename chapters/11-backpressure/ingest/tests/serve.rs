//! The server as the experiment runs it (`ingest serve --calls 1`), in this
//! process over real TLS on port 0: it announces its address in the ready
//! file, serves one call, stops, and leaves its records behind. Then the
//! command lines that must be refused, each with a reason and no panic.

use std::{path::Path, process::Command, sync::Arc, time::Duration};

use clap::Parser;
use grpc_client::channel::{Target, endpoint};
use ingest::{Args, Command as Sub, server::ServeArgs};
use loadgen::{Counters, Schedule, Timer, ingest::ingest};

fn serve_args(words: &[&str]) -> ServeArgs {
    let args = Args::try_parse_from(["ingest", "serve"].iter().chain(words)).expect("parses");
    match args.command {
        Sub::Serve(serve) => serve,
        other => panic!("not serve: {other:?}"),
    }
}

fn header(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// A server started as `ingest serve` with `flags` (plus its address, PKI,
/// record folder and ready file, all in `dir`), and a channel to it.
async fn start(
    dir: &Path,
    flags: &[&str],
) -> (
    tokio::task::JoinHandle<anyhow::Result<()>>,
    tonic::transport::Channel,
) {
    let pki = certs::Pki::new(dir.join("certs"));
    pki.generate(false).unwrap();
    let (certs, record, ready) = (pki.path(""), dir.join("record"), dir.join("ready"));
    let mut words = vec![
        "--addr",
        "127.0.0.1:0",
        "--certs-dir",
        certs.to_str().unwrap(),
        "--record",
        record.to_str().unwrap(),
        "--ready-file",
        ready.to_str().unwrap(),
    ];
    words.extend(flags);
    let server = tokio::spawn(ingest::server::run(serve_args(&words)));

    let mut addr = None;
    for _ in 0..300 {
        if let Ok(text) = std::fs::read_to_string(&ready) {
            addr = Some(
                text.trim()
                    .parse::<std::net::SocketAddr>()
                    .expect("an address"),
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let addr = addr.expect("the server wrote its ready file");
    let target = Target {
        url: format!("https://localhost:{}", addr.port()),
        ca: pki.ca_cert(),
        identity: None,
    };
    let channel = endpoint(&target).unwrap().connect().await.unwrap();
    (server, channel)
}

/// What `--live` reads: the server's timeline and the client's sends grow on
/// disk while the call runs, and what was read then is where the final files
/// begin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeline_and_the_sends_grow_on_disk_while_the_call_runs() {
    use harness::records::{Growing, read_csv_so_far};
    use ingest::record::Sample;
    use loadgen::SlotRecord;

    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record");
    let flags = ["--calls", "1", "--sample-every", "20ms", "--plan", "5ms@0s"];
    let (server, channel) = start(dir.path(), &flags).await;
    let sends = Arc::new(Growing::<SlotRecord>::create(&record.join("sends.csv")).unwrap());
    let slots = Schedule::constant(40.0, Duration::from_secs(3)).slots();
    let call = tokio::spawn({
        let sends = sends.clone();
        async move {
            let counters = Counters::default();
            ingest(
                channel,
                &slots,
                Timer::Tokio,
                1024,
                1,
                &counters,
                Some(&sends),
            )
            .await
        }
    });

    // Both files hold rows while the call still runs (it runs for 3 s).
    let mut seen = None;
    for _ in 0..500 {
        let timeline: Vec<Sample> = read_csv_so_far(&record.join("timeline.csv")).unwrap();
        let sent: Vec<SlotRecord> = read_csv_so_far(&record.join("sends.csv")).unwrap();
        if timeline.len() >= 3 && sent.len() >= 3 {
            assert!(!call.is_finished(), "the rows appeared only after the call");
            let figure = ingest::live::view(&record).unwrap();
            assert!(figure.points() > 0);
            seen = Some((timeline, sent));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (timeline, sent) = seen.expect("rows on disk within 10 s of the call's start");

    let run = call.await.unwrap();
    assert!(run.reply.is_ok(), "{:?}", run.reply);
    Arc::into_inner(sends).unwrap().finish().unwrap();
    tokio::time::timeout(Duration::from_secs(30), server)
        .await
        .expect("--calls 1 stops the server after the call")
        .unwrap()
        .expect("the server ran cleanly");
    let timeline_end: Vec<Sample> =
        harness::records::read_csv(&record.join("timeline.csv")).unwrap();
    let sent_end: Vec<SlotRecord> = harness::records::read_csv(&record.join("sends.csv")).unwrap();
    assert!(timeline_end.len() > timeline.len());
    // The grown file is the one written from every slot's record at the end
    // (to the microsecond, as every CSV of the workshop keeps times).
    let whole = dir.path().join("whole.csv");
    harness::records::write_csv(&whole, &run.records).unwrap();
    assert!(
        std::fs::read(record.join("sends.csv")).unwrap() == std::fs::read(&whole).unwrap(),
        "the grown sends.csv differs from the records written whole"
    );
    assert!(
        sent_end[..sent.len()] == sent[..],
        "what was read early is where the file begins"
    );
    // The server wrote its whole timeline again at the end: the same samples
    // the growing file had, from the first one it held.
    let first = timeline_end.iter().position(|s| *s == timeline[0]).unwrap();
    assert_eq!(&timeline_end[first..first + timeline.len()], &timeline[..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_call_leaves_messages_timeline_budget_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record");
    let flags = [
        "--calls",
        "1",
        "--capacity",
        "8",
        "--budget",
        "4",
        "--plan",
        "5ms@0s,10ms@200ms",
    ];
    let (server, channel) = start(dir.path(), &flags).await;
    let slots = Schedule::constant(40.0, Duration::from_millis(500)).slots();
    let run = ingest(
        channel,
        &slots,
        Timer::Precise,
        1024,
        1,
        &Arc::new(Counters::default()),
        None,
    )
    .await;
    let reply = run.reply.expect("the call succeeds");
    let sent = run.records.iter().filter(|r| r.started.is_some()).count() as u64;
    assert_eq!((reply.received, reply.processed), (sent, sent));

    tokio::time::timeout(Duration::from_secs(30), server)
        .await
        .expect("--calls 1 stops the server after the call")
        .unwrap()
        .expect("the server ran cleanly");

    assert_eq!(
        header(&record.join("messages.csv")),
        "stream,seq,admission_wait_ms,enqueued_ms,dequeued_ms,service_end_ms,queue_ms,service_ms,worker"
    );
    let messages = std::fs::read_to_string(record.join("messages.csv")).unwrap();
    assert_eq!(
        messages.lines().count() as u64,
        sent + 1,
        "one row per message"
    );
    assert_eq!(
        header(&record.join("timeline.csv")),
        "at_ms,queued,pending,budget,received,processed,rss_kib"
    );
    let timeline: Vec<ingest::record::Sample> =
        harness::records::read_csv(&record.join("timeline.csv")).unwrap();
    assert!(!timeline.is_empty() && timeline.iter().all(|s| s.budget == 4));
    assert_eq!(header(&record.join("budget.csv")), "at_ms,from,to,reason");

    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(record.join("server.json")).unwrap()).unwrap();
    for key in [
        "policy",
        "plan",
        "workers",
        "sample_every_ms",
        "epoch_ms",
        "processed",
        "max_queued",
        "max_pending",
        "rss_kib_first",
        "rss_kib_max",
        "idle_with_backlog_ms",
    ] {
        assert!(!json[key].is_null(), "server.json lacks {key}: {json:#}");
    }
    assert_eq!(json["policy"], "Reserve { capacity: 8, budget: 4 }");
    assert_eq!(json["plan"], "5ms@0s,10ms@200ms");
    assert_eq!(json["processed"], sent);
    assert!(json["max_pending"].as_u64().unwrap() <= 4);
    for key in ["program", "args", "version", "build", "started_unix_s"] {
        assert!(!json["meta"][key].is_null(), "meta lacks {key}");
    }
    assert!(json["meta"]["machine"]["cpus"].as_u64().unwrap() >= 1);
}

/// Four calls on one connection, a budget of two, and chapter 12's slowdown
/// in one-second phases. While the worker is slow, the handlers without a
/// place in the budget stop reading and their streams fill with unread
/// messages. If those bytes could use up the connection's window, a handler
/// holding a place could no longer receive the message it waits for, and all
/// four calls would hang: they did, three runs in three, before the server
/// sized its connection window (and in chapter 12's `--streams 4` runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_sharing_a_connection_finish_when_the_budget_is_smaller_than_their_number() {
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--calls",
        "4",
        "--capacity",
        "32",
        "--budget",
        "2",
        "--plan",
        "2.5ms@0s,10ms@1s,2.5ms@2s",
    ];
    let (server, channel) = start(dir.path(), &flags).await;
    let slots = Schedule::constant(80.0, Duration::from_secs(3)).slots();
    let counters = Arc::new(Counters::default());
    let calls: Vec<_> = (0..4)
        .map(|seed| {
            let (channel, slots, counters) = (channel.clone(), slots.clone(), counters.clone());
            tokio::spawn(async move {
                ingest(
                    channel,
                    &slots,
                    Timer::Tokio,
                    16 * 1024,
                    seed,
                    &counters,
                    None,
                )
                .await
            })
        })
        .collect();
    let all = async {
        let mut runs = Vec::new();
        for call in calls {
            runs.push(call.await.unwrap());
        }
        runs
    };
    let runs = tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("every call ends: no stream may starve the others of window");
    for run in runs {
        let reply = run.reply.expect("the call succeeds");
        let sent = run.records.iter().filter(|r| r.started.is_some()).count() as u64;
        assert_eq!((reply.received, reply.processed), (sent, sent));
        assert!(sent > 0);
    }
    tokio::time::timeout(Duration::from_secs(30), server)
        .await
        .expect("--calls 4 stops the server after the calls")
        .unwrap()
        .expect("the server ran cleanly");
}

/// Runs the real binary and returns (exit code, stderr).
fn ingest_bin(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ingest"))
        .args(args)
        .env("CERTS_DIR", "/nonexistent/ch11-test-certs")
        .output()
        .expect("runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_command_lines_are_refused_with_a_reason() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["serve", "--budget", "0"],
            "--budget 0 must be between 1 and --capacity 32",
        ),
        (
            &["serve", "--capacity", "8", "--budget", "9"],
            "--budget 9 must be between 1 and --capacity 8",
        ),
        (
            &["serve", "--capacity", "0"],
            "--capacity must be at least 1",
        ),
        (
            &["serve", "--plan", "40ms@12s"],
            "the first phase must start at 0s",
        ),
        (&["serve", "--plan", "fast@0s"], "is not a duration"),
        (&["compare", "--plan", "10ms@0s,5ms@0s"], "increasing order"),
        (
            &["compare", "--rate", "0", "--out", "/nonexistent/x"],
            "--rate must be above 0",
        ),
    ];
    for (args, expected) in cases {
        let (code, stderr) = ingest_bin(args);
        assert!(
            matches!(code, Some(c) if c != 0),
            "{args:?} exited {code:?}"
        );
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn bad_steps_are_refused_by_the_load_generator_parser() {
    for (step, expected) in [
        ("80:10s", "is not a step"),
        ("0/s:10s", "must be above 0"),
        ("80/s:ten", "is not a duration"),
    ] {
        let error = loadgen::cli::Args::try_parse_from(["loadgen", "--step", step, "ingest"])
            .expect_err(step)
            .to_string();
        assert!(error.contains(expected), "{step}: {error}");
    }
    loadgen::cli::Args::try_parse_from(["loadgen", "--step", "80/s:3s", "ingest"]).unwrap();
}
