//! `chain run` end to end, as a reader runs it, shortened: two variants of
//! a few seconds each. It asserts what the run counted (files, rows, the
//! storm's multiplication against a throttle's, with wide margins), and
//! that bad input is refused with a message; never a latency.

use std::{path::Path, process::Command};

use chain::render::{SummaryRow, TimelineRow};

fn chain(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_chain"))
        .args(args)
        .output()
        .unwrap()
}

fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    csv::Reader::from_path(path)
        .unwrap()
        .deserialize()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn a_short_run_shows_the_storm_and_a_throttle_that_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ch19");
    let ran = chain(&[
        "run",
        "--quick",
        "--before",
        "2s",
        "--warmup",
        "1s",
        "--trigger",
        "2s",
        "--after",
        "3s",
        "--retries",
        "naive,a6",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(ran.status.success(), "{stderr}");
    for file in [
        "results.md",
        "summary.csv",
        "timeline.csv",
        "goodput.svg",
        "leaf.svg",
        "config.json",
    ] {
        assert!(out.join(file).exists(), "{file} is missing");
    }
    let summary: Vec<SummaryRow> = read(&out.join("summary.csv"));
    assert_eq!(summary.len(), 2);
    let timeline: Vec<TimelineRow> = read(&out.join("timeline.csv"));
    // Two variants, one row per second of the 7 s span.
    assert_eq!(timeline.len(), 2 * 7);
    // The load was sent on schedule: 140 requests due every second.
    assert!(timeline.iter().all(|r| r.due == 140), "{timeline:?}");
    let (naive, a6) = (&summary[0], &summary[1]);
    assert!(naive.variant.starts_with("naive"), "{naive:?}");
    // Before the trigger each user request is one call at the leaf; the
    // leaf has room for every one of them.
    for row in &summary {
        assert!((row.amplification_before - 1.0).abs() < 0.1, "{row:?}");
        assert!(row.goodput_before > 0.9, "{row:?}");
    }
    // Three layers of three attempts may send up to 27; the storm sends far
    // more than one, the throttle far fewer than the storm.
    assert!(naive.amplification > 5.0, "{naive:?}");
    assert!(
        a6.amplification < naive.amplification / 3.0,
        "{a6:?} against {naive:?}"
    );
}

#[test]
fn bad_input_is_refused_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ch19");
    let out = out.to_str().unwrap();
    for (args, status, says) in [
        (
            vec!["run", "--workers", "0"],
            1,
            "--workers must be at least 1",
        ),
        (
            vec!["run", "--attempt-timeouts", "1s,2s"],
            1,
            "takes three durations",
        ),
        (
            vec!["run", "--warmup", "9s"],
            1,
            "must be shorter than --before",
        ),
        (vec!["run", "--deadlines", "maybe"], 2, "write on or off"),
        (
            vec!["run", "--retries", "forever"],
            2,
            "invalid value 'forever'",
        ),
    ] {
        let ran = chain(&[args.as_slice(), &["--out", out]].concat());
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(status), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let ran = chain(&[]);
    assert_eq!(ran.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&ran.stderr).contains("say what to do"));
    // Nothing ran, so nothing was written.
    assert!(!Path::new(out).exists());
}
