//! The command line: bad input gets a clear error, the proxy takes its
//! commands on stdin, and a small experiment run writes its results.

use std::{
    io::{BufRead, BufReader, Read, Write},
    process::{Command, Output, Stdio},
    sync::mpsc,
    time::Duration,
};

use grpc_server::testing::cli::{self, OutDir, assert_mentions};

fn network(args: &[&str]) -> Output {
    cli::run(env!("CARGO_BIN_EXE_network"), args)
}

/// Runs `network ARGS`, expects it to fail, and returns what it said.
fn fails(args: &[&str]) -> String {
    cli::fails(env!("CARGO_BIN_EXE_network"), args)
}

#[test]
fn the_proxy_rejects_bad_flags() {
    // clap takes `-1` for a flag of its own; the message still names it.
    assert_mentions(
        &fails(&["proxy", "--delay", "-1"]),
        &["--delay", "`-1` is not a duration"],
    );
    assert_mentions(
        &fails(&["proxy", "--delay", "-5ms"]),
        &["--delay", "`-5ms` is not a duration"],
    );
    // Given as a value, it is the duration parser that explains.
    assert_mentions(
        &fails(&["proxy", "--delay=-5ms"]),
        &["--delay", "`-5ms` is not a duration"],
    );
    assert_mentions(
        &fails(&["proxy", "--delay", "10"]),
        &["`10` is not a duration"],
    );
    assert_mentions(
        &fails(&["proxy", "--rate", "fast"]),
        &["--rate", "`fast` is not a rate"],
    );
    assert_mentions(
        &fails(&["proxy", "--listen", "nowhere"]),
        &["--listen", "'nowhere'"],
    );
}

#[test]
fn in_names_the_sides_it_knows() {
    assert_mentions(
        &fails(&["in", "nowhere", "--", "true"]),
        &["invalid value 'nowhere'", "client", "server"],
    );
}

#[test]
fn run_rejects_a_bad_configuration_before_it_starts() {
    let out = OutDir::new("network", "bad");
    assert_mentions(
        &fails(&[
            "run",
            "--deadline",
            "10ms",
            "--margin",
            "50ms",
            "--out",
            out.arg(),
        ]),
        &["--deadline (10ms) must be longer than --margin (50ms)"],
    );
    assert!(!out.exists(), "a rejected run created its folder");

    let cases: [(&[&str], &str); 5] = [
        (&["--rtts", ""], "`` is not a duration"),
        (
            &["--calls", "0"],
            "--calls and --repeats must be at least 1",
        ),
        (
            &["--repeats", "0"],
            "--calls and --repeats must be at least 1",
        ),
        (
            &["--keepalive-interval", "0ms"],
            "--keepalive-interval and --keepalive-timeout must be longer than 0ms",
        ),
        (
            &["--dead-wait", "1s"],
            "--dead-wait must be longer than --keepalive-interval plus --keepalive-timeout",
        ),
    ];
    for (flags, message) in cases {
        let mut args = vec!["run", "--out", out.arg()];
        args.extend_from_slice(flags);
        assert_mentions(&fails(&args), &[message]);
        assert!(!out.exists(), "a rejected run created its folder");
    }
}

#[test]
fn help_names_the_key_flags() {
    for (args, flags) in [
        (&["--help"][..], &["proxy", "run", "up", "down", "in"][..]),
        (
            &["run", "--help"],
            &[
                "--rtts",
                "--parts",
                "--deadline",
                "--margin",
                "--keepalive-interval",
                "--dead-wait",
                "--quick",
                "--out",
            ],
        ),
        (
            &["proxy", "--help"],
            &["--listen", "--upstream", "--delay", "--jitter", "--rate"],
        ),
    ] {
        let output = network(args);
        assert!(output.status.success(), "network {args:?} failed");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_mentions(&stdout, flags);
    }
}

#[test]
fn the_proxy_takes_commands_on_stdin() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_network"))
        .args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "127.0.0.1:9",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the proxy starts");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"stall\nnonsense\nforward\n").unwrap();
    drop(stdin); // the proxy keeps running without stdin, until a signal

    let stdout = child.stdout.take().unwrap();
    let (lines, next) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l.starts_with("Forward")) {
        match next.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(line)) => seen.push(line),
            _ => break,
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();

    let stdout = seen.join("\n");
    assert!(stdout.contains("proxy on 127.0.0.1:"), "{stdout}");
    assert!(stdout.contains("-> 127.0.0.1:9"), "{stdout}");
    let acks: Vec<&str> = seen
        .iter()
        .filter(|l| l.contains("connections so far"))
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(acks, ["Stall", "Forward"], "{stdout}");
    assert_mentions(&stderr, &["`nonsense` is not a command"]);
}

/// Runs the experiment with `args`, its results in `out` and a PKI of its
/// own, and expects it to succeed.
fn run_ok(out: &OutDir, args: &[&str]) {
    let certs = out.certs();
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend(["--certs-dir", &certs, "--out", out.arg()]);
    let output = network(&all);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn rows(csv: &std::path::Path) -> usize {
    let text = std::fs::read_to_string(csv).unwrap();
    text.lines().filter(|l| !l.is_empty()).count() - 1
}

#[test]
fn a_dead_peer_is_noticed_by_keepalive_only() {
    let out = OutDir::new("network", "dead-peer");
    run_ok(
        &out,
        &[
            "--quick",
            "--parts",
            "dead-peer",
            "--rtts",
            "0ms",
            "--keepalive-interval",
            "100ms",
            "--keepalive-timeout",
            "100ms",
            "--dead-wait",
            "2s",
        ],
    );
    for file in [
        "dead-peer.csv",
        "dead-peer-sent.csv",
        "summary.md",
        "dead-peer.svg",
        "config.json",
    ] {
        assert!(out.join(file).is_file(), "no {file}");
    }
    assert_eq!(rows(&out.join("dead-peer.csv")), 2);
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    let row = |arm: &str| {
        summary
            .lines()
            .find(|l| l.starts_with(&format!("| {arm} |")))
            .unwrap_or_else(|| panic!("no row for {arm} in {summary}"))
            .to_string()
    };
    let keepalive = row("HTTP/2 keepalive");
    assert!(!keepalive.contains("not within"), "{keepalive}");
    assert!(keepalive.contains(" s |"), "{keepalive}");
    assert!(row("no keepalive").contains("not within"), "{summary}");
}

#[test]
fn deadlines_across_hops_record_every_call() {
    let out = OutDir::new("network", "hops");
    run_ok(
        &out,
        &[
            "--parts", "hops", "--rtts", "0ms,2ms", "--calls", "3", "--warmup", "1",
        ],
    );
    assert_eq!(rows(&out.join("hops.csv")), 6);
    assert!(out.join("summary.md").is_file());
    assert!(out.join("config.json").is_file());
}
