//! The experiment end to end, small: every cell of the grid writes one
//! record, every call of the ping part one row, and the report is drawn from
//! them. Real time (servers, sockets and hyper's timers), with T of a
//! second, so the whole run takes a few seconds and a keepalive answer has
//! a quarter of a second on a busy machine; nothing here asserts a latency,
//! only what was recorded and what the mechanism fixes.

use clap::Parser;
use middlebox::run::{Args, Cell, PINGERS, PingCall, PingConnection, Setup};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn args(out: &std::path::Path, extra: &[&str]) -> Args {
    let mut argv = vec!["run", "--out", out.to_str().unwrap()];
    argv.extend_from_slice(extra);
    Cli::parse_from(argv).args
}

async fn run(args: Args) -> harness::Folder {
    let steps = harness::experiment::Steps {
        run: middlebox::run::run,
        reduce: harness::experiment::nothing_to_reduce,
        render: middlebox::render::render,
        raw: &[],
    };
    harness::experiment::main(&args.flags, || args.config(), harness::Start::Fresh, steps)
        .await
        .expect("the run finishes");
    harness::Folder::open(&args.out).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cell_writes_one_record_and_the_forgotten_flows_behave() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ch18");
    let folder = run(args(
        &out,
        &["--parts", "idle", "--idle", "1s", "--repeats", "1"],
    ))
    .await;
    let cells: Vec<Cell> = folder.read_csv("cells.csv").unwrap();
    // Nine setups against three middleboxes, less REST against the PING eater.
    assert_eq!(cells.len(), Setup::ALL.len() * 3 - 2, "{cells:#?}");
    let cell = |setup: Setup, middlebox: &str| {
        cells
            .iter()
            .find(|c| c.setup == setup.label() && c.middlebox == middlebox)
            .unwrap_or_else(|| panic!("no cell {} / {middlebox}", setup.label()))
    };
    // No keepalive behind a silent drop: the call waits out its deadline,
    // and the channel does not work again (nothing ever closes it).
    let stale = cell(Setup::NoKeepalive, "drop");
    assert_eq!(stale.outcome, "DEADLINE_EXCEEDED", "{stale:?}");
    assert_eq!(stale.recovered_s, None, "{stale:?}");
    assert_eq!(stale.expired, 1, "{stale:?}");
    // Behind a RST the call fails (whatever tonic calls it) and the channel
    // dials again.
    let reset = cell(Setup::NoKeepalive, "reset");
    assert_ne!(reset.outcome, "OK", "{reset:?}");
    assert!(
        reset.resets >= 1 && reset.recovered_s.is_some(),
        "{reset:?}"
    );
    // Idle pings under T keep the one connection remembered.
    let kept = cell(Setup::KeepaliveHalfWhileIdle, "drop");
    assert_eq!(
        (kept.outcome.as_str(), kept.connections, kept.expired),
        ("OK", 1, 0),
        "{kept:?}"
    );
    assert!(kept.pings_passed > 0, "{kept:?}");
    // A box that eats PINGs passes none.
    let eaten = cell(Setup::KeepaliveHalfWhileIdle, "eat PINGs");
    assert!(
        eaten.pings_eaten > 0 && eaten.pings_passed == 0,
        "{eaten:?}"
    );
    assert!(folder.join("results.md").exists() && folder.join("cells.md").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_of_the_ping_part_is_one_row_and_the_chatty_client_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ch18");
    // A call every 6 x 200 ms, for 2 s: calls at 0 and 1.2 s.
    let folder = run(args(
        &out,
        &[
            "--parts",
            "pings",
            "--min-time",
            "200ms",
            "--ping-interval",
            "40ms",
            "--ping-run",
            "2s",
        ],
    ))
    .await;
    let calls: Vec<PingCall> = folder.read_csv("ping_calls.csv").unwrap();
    let connections: Vec<PingConnection> = folder.read_csv("ping_connections.csv").unwrap();
    for pinger in PINGERS {
        let mine = calls.iter().filter(|c| c.client == pinger.name).count();
        assert_eq!(mine, 2, "{}: {calls:#?}", pinger.name);
    }
    let chatty: Vec<&PingConnection> = connections
        .iter()
        .filter(|c| c.client == PINGERS[0].name)
        .collect();
    assert!(
        chatty.iter().all(|c| c.goaway_s.is_some() && c.strikes > 2),
        "every connection of the chatty client ends with a GOAWAY: {chatty:#?}"
    );
    let polite = connections.iter().filter(|c| c.client == PINGERS[1].name);
    assert!(
        polite.clone().all(|c| c.goaway_s.is_none()),
        "the polite client is never cut off: {:#?}",
        polite.collect::<Vec<_>>()
    );
    assert!(folder.join("pings.svg").exists());
}
