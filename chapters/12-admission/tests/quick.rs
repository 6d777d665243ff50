//! The runner end to end, as a reader runs it, at a tenth of Part 2's time
//! scale (six runs of 3.6 s at 800 sends a second): every file is written and
//! every count adds up. Nothing here asserts a timing.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    path::Path,
    process::{Command, Output},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

/// `GET /metrics` over plain HTTP/1.0, bounded in time.
fn scrape(addr: SocketAddr) -> std::io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    Ok(text)
}

/// The tenth-scale quick run's flags, `extra`, and the folders to use.
fn admission(extra: &[&str], out: &Path, certs: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_admission"))
        .args([
            "--quick",
            "--scale",
            "0.1",
            "--message-bytes",
            "1024",
            "--resamples",
            "50",
        ])
        .args(extra)
        .arg("--out")
        .arg(out)
        .arg("--certs-dir")
        .arg(certs)
        .output()
        .unwrap()
}

#[test]
fn a_scaled_down_quick_run_writes_every_file_and_counts_every_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ch12");
    let certs = dir.path().join("certs");
    // A free port for every run's metrics, one server after another; a
    // scraper asks it while the runs go on.
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let scraper = std::thread::spawn({
        let done = done.clone();
        move || {
            let mut gauges = 0;
            while !done.load(Ordering::Relaxed) {
                if let Ok(text) = scrape(metrics) {
                    gauges += usize::from(text.contains("\ningest_budget "));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            gauges
        }
    });
    let metrics_flag = metrics.to_string();
    let extra = ["--live", "127.0.0.1:0", "--metrics-addr", &metrics_flag];
    let output = admission(&extra, &out, &certs);
    done.store(true, Ordering::Relaxed);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("live view: http://127.0.0.1:"),
        "{stdout}"
    );
    // The runs' servers served the gate's gauges on --metrics-addr.
    assert!(scraper.join().unwrap() > 0, "no scrape found ingest_budget");
    // Every run's raw records are kept, compressed once the run was reduced.
    let packed = |path: std::path::PathBuf| harness::records::compressed(&path).is_file();
    for entry in std::fs::read_dir(out.join("runs")).unwrap() {
        let run = entry.unwrap().path();
        assert!(packed(run.join("timeline.csv")) && packed(run.join("sends-0.csv")));
        assert!(!run.join("timeline.csv").exists(), "packed, not copied");
    }
    assert!(
        stdout.contains(&format!("results in {}", out.display())),
        "{stdout}"
    );
    for file in [
        "contract.json",
        "ledger.csv",
        "runs.csv",
        "analysis.json",
        "timelines.csv",
        "sends.csv",
        "report.md",
        "p95.svg",
        "budget.svg",
        "sends.svg",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    // The contract was frozen (read-only) and names all six policies in order.
    let contract: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("contract.json")).unwrap()).unwrap();
    assert!(
        std::fs::metadata(out.join("contract.json"))
            .unwrap()
            .permissions()
            .readonly()
    );
    assert_eq!(contract["order"][0].as_array().unwrap().len(), 6);
    assert_eq!(
        contract["slots"], 2880,
        "the scale shortens time, not the schedule"
    );
    // One ledger row per attempt; every run valid here.
    let ledger = std::fs::read_to_string(out.join("ledger.csv")).unwrap();
    let rows: Vec<&str> = ledger.lines().skip(1).collect();
    assert!(rows.len() >= 6);
    assert_eq!(rows.iter().filter(|r| r.contains(",true,valid")).count(), 6);
    // Per run: 2,880 slots scheduled, each one sent or skipped, and records kept.
    let runs = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert_eq!(runs.lines().count(), 7);
    let header: Vec<&str> = runs.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|c| *c == name).unwrap();
    for line in runs.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f[col("scheduled")], "2880", "{line}");
        let skipped: u64 = f[col("skipped")].parse().unwrap();
        assert!(skipped < 2880, "{line}");
    }
    for policy in [
        "fixed-32", "fixed-8", "fixed-4", "fixed-2", "adaptive", "target",
    ] {
        let run = out.join("runs").join(format!("b1-{policy}"));
        for file in [
            "messages.csv",
            "timeline.csv",
            "budget.csv",
            "controller.csv",
            "server.json",
            "client.json",
            "sends-0.csv",
        ] {
            assert!(packed(run.join(file)), "{policy}: {file} missing");
        }
    }
    // Fixed budgets never change; the analysis covers every policy.
    let budget = harness::records::read_bytes(&out.join("runs/b1-fixed-8/budget.csv")).unwrap();
    let budget = String::from_utf8(budget).unwrap();
    assert_eq!(budget.lines().count(), 1, "{budget}");
    let analysis: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("analysis.json")).unwrap()).unwrap();
    assert_eq!(
        analysis["analysis"]["policies"].as_array().unwrap().len(),
        6
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("| fixed-32 |") && report.contains("Recovery"));
    // Each of the four hypotheses is decided for every policy but fixed-32.
    let decided = report
        .lines()
        .filter(|l| l.starts_with("| fixed-2 |") && l.matches("**").count() == 8)
        .count();
    assert_eq!(decided, 1, "{report}");

    // Rendering the same folder again reproduces the same per-run table.
    let again = Command::new(env!("CARGO_BIN_EXE_admission"))
        .arg("--render")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(std::fs::read_to_string(out.join("runs.csv")).unwrap(), runs);

    // Resuming a complete experiment keeps its ledger and runs nothing new.
    let resumed = admission(&["--resume"], &out, &certs);
    let text = String::from_utf8_lossy(&resumed.stdout);
    assert!(resumed.status.success(), "{text}");
    assert!(
        text.contains(&format!(
            "resuming: {} attempts in the ledger, 6 valid runs kept",
            rows.len()
        )),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("ledger.csv")).unwrap(),
        ledger
    );
    // A different contract is refused rather than mixed in.
    let other = Command::new(env!("CARGO_BIN_EXE_admission"))
        .args(["--quick", "--scale", "0.2", "--resume", "--out"])
        .arg(&out)
        .arg("--certs-dir")
        .arg(&certs)
        .output()
        .unwrap();
    assert!(!other.status.success());
    assert!(String::from_utf8_lossy(&other.stderr).contains("differs"));
}

#[test]
fn bad_flags_fail_with_a_message_not_a_panic() {
    for args in [
        &["--blocks", "0"][..],
        &["--scale", "-1"],
        &["--policies", "fixed-8,fixed-8"],
        &["--streams", "0"],
        &["--live", "--render", "target/experiments/ch12"],
        &["--metrics-addr", "nowhere"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_admission"))
            .args(args)
            .args(["--out", "/nonexistent-dir-for-admission-test/x"])
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("error"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
