//! The command line: a bad flag is refused before anything starts, with a
//! message that names the flag or the rule it broke, and a small run of one
//! part writes its report. A run that would measure nothing, or measure the
//! wrong thing, must not cost the reader its minutes first.

use std::{path::PathBuf, process::Output};

use grpc_server::testing::cli::{self, OutDir, assert_mentions};

fn fleet(args: &[&str]) -> Output {
    cli::run(env!("CARGO_BIN_EXE_fleet"), args)
}

/// Runs `fleet ARGS`, expects it to fail, and returns what it said.
fn fails(args: &[&str]) -> String {
    cli::fails(env!("CARGO_BIN_EXE_fleet"), args)
}

#[test]
fn run_rejects_every_bad_flag_before_it_starts() {
    let out = OutDir::new("fleet", "bad");
    let certs = out.certs();
    let cases: &[(&[&str], &[&str])] = &[
        (&["--rate", "0"], &["--rate must be between 1 and 5000"]),
        (&["--rate", "abc"], &["--rate", "'abc'"]),
        (
            &["--hosts", "127.0.0.2"],
            &["--hosts takes exactly three loopback addresses"],
        ),
        (
            &["--hosts", "10.0.0.1,10.0.0.2,10.0.0.3"],
            &["--hosts takes exactly three loopback addresses"],
        ),
        (
            &["--warmup", "10s", "--duration", "5s"],
            &["--warmup (10s) must be shorter than --duration (5s)"],
        ),
        // With the default warmup (2s), a 2s duration breaks the warmup rule
        // first; a 1s warmup reaches the rule about the duration itself.
        (
            &["--warmup", "1s", "--duration", "2s"],
            &["--duration must be at least 3s"],
        ),
        (
            &["--repeats", "0"],
            &["--repeats and --clients must be at least 1"],
        ),
        (
            &["--clients", "0"],
            &["--repeats and --clients must be at least 1"],
        ),
        (
            &["--hedge-percentile", "1.5"],
            &["--hedge-percentile must be between 0 and 1"],
        ),
        (
            &["--deadline", "0ms"],
            &["--deadline, --max-age and --age-grace must be longer than 0ms"],
        ),
        (
            &["--max-age", "0ms"],
            &["--deadline, --max-age and --age-grace must be longer than 0ms"],
        ),
        (
            &["--parts", "bogus"],
            &["--parts", "'bogus'", "restart, age, slow, tail"],
        ),
        (&["--grace", "-1s"], &["--grace", "`-1s` is not a duration"]),
        (
            &["--work-ms", "70000"],
            &["--work-ms must be at most 60000"],
        ),
    ];
    for (flags, message) in cases {
        let mut args = vec!["run", "--out", out.arg(), "--certs-dir", &certs];
        args.extend_from_slice(flags);
        assert_mentions(&fails(&args), message);
        // Refused before anything was made: no results, no PKI.
        assert!(!out.exists(), "`{}` created its folder", flags.join(" "));
        assert!(
            !PathBuf::from(&certs).exists(),
            "`{}` made a PKI",
            flags.join(" ")
        );
    }
}

#[test]
fn a_replica_is_either_slower_or_has_a_tail() {
    assert_mentions(
        &fails(&["replica", "--tail", "--slower-by", "5ms"]),
        &["--tail", "--slower-by", "cannot be used with"],
    );
}

#[test]
fn a_quick_run_of_the_slow_part_writes_its_report() {
    let out = OutDir::new("fleet", "slow");
    let certs = out.certs();
    let output = fleet(&[
        "run",
        "--quick",
        "--parts",
        "slow",
        "--duration",
        "3s",
        "--warmup",
        "1s",
        "--rate",
        "50",
        "--out",
        out.arg(),
        "--certs-dir",
        &certs,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Every call's row is a raw record, kept packed; the report is drawn
    // from the tables it reduced to.
    assert!(
        out.join("slow-calls.csv.zst").is_file(),
        "no packed slow-calls.csv"
    );
    assert!(out.join("tables.json").is_file(), "no tables.json");
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("a summary.md");
    for arm in ["round_robin", "tonic", "p2c_peak_ewma"] {
        assert!(
            summary.contains(&format!("| {arm} |")),
            "no row for {arm} in {summary}"
        );
    }
}
