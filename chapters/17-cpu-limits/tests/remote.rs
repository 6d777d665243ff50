//! The experiment against a server it did not start (`cpu_limits serve`, as
//! in a pod of a real cluster): it reads the runtime, the quota and the
//! throttling counts from the server's metrics, and writes one row per cell
//! for the one runtime the server runs. The server runs in a pod here when
//! this process may make one, and without a limit otherwise.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
};

use cpu_limits::run::{CellRow, SeesRow};
use harness::pod::Pod;

const EXE: &str = env!("CARGO_BIN_EXE_cpu_limits");

#[test]
fn a_remote_server_is_driven_and_read_through_its_metrics() {
    let pod = Pod::create("ch17-remote", 0.5).ok();
    let mut words: Vec<String> = pod.as_ref().map(Pod::wrapper).unwrap_or_default();
    words.push(EXE.into());
    let mut server = Command::new(&words[0])
        .args(&words[1..])
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .args(["--arm", "ct", "--work", "0.2ms"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // "serving calls on ADDR and metrics on http://ADDR/metrics: ..."
    let mut line = String::new();
    BufReader::new(server.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let calls = words[3];
    let metrics = words[7]
        .trim_start_matches("http://")
        .trim_end_matches("/metrics:");
    let out = tempfile_dir();
    let status = Command::new(EXE)
        .args([
            "--quick",
            "--cell",
            "1s",
            "--loads",
            "0.5",
            "--together",
            "1",
        ])
        .args(["--target", calls, "--target-metrics", metrics, "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(status.success(), "the experiment failed: {status}");
    let cells: Vec<CellRow> = harness::records::read_csv(&out.join("cells.csv")).unwrap();
    assert_eq!(cells.len(), 1, "{cells:?}");
    assert_eq!(cells[0].arm.to_string(), "ct");
    assert!(cells[0].ok > 0, "{cells:?}");
    let sees: Vec<SeesRow> = harness::records::read_csv(&out.join("sees.csv")).unwrap();
    assert_eq!(sees.len(), 1);
    if pod.is_some() {
        assert_eq!(sees[0].limit_cpus, Some(0.5));
        assert!(cells[0].periods > 0, "{cells:?}");
    } else {
        assert_eq!(sees[0].limit_cpus, None);
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// A fresh folder under the system's temporary directory.
fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ch17-remote-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
