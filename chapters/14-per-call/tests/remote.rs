//! The experiment against a server it did not start (`per_call serve`, as in
//! a pod of a real cluster): it reaches the server's gRPC and REST ports
//! through what the server's `/snapshot` says, counts each step with the
//! server's own totals, and reads the quota's throttling from the server when
//! the server runs in one (here: a local pod, when this process may make one).

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, Command, Output, Stdio},
};

use harness::pod::Pod;
use per_call::{ramp::StepResult, records::RampRecord};

const EXE: &str = env!("CARGO_BIN_EXE_per_call");

/// `per_call serve --arm ARM` on free loopback ports, in `pod` if any, and the
/// address of its counts, read from the line it prints when ready.
fn serve(arm: &str, pod: Option<&Pod>) -> (Child, String) {
    let mut words: Vec<String> = pod.map(Pod::wrapper).unwrap_or_default();
    words.push(EXE.into());
    let mut server = Command::new(&words[0])
        .args(&words[1..])
        .args(["serve", "--arm", arm])
        .args(["--addr", "127.0.0.1:0", "--h1-addr", "127.0.0.1:0"])
        .args(["--h2-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // "... and the server's counts on http://ADDR/snapshot: ..."
    let at = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .and_then(|w| w.strip_suffix("/snapshot:"))
        .unwrap_or_else(|| panic!("no snapshot address in {line:?}"))
        .to_string();
    (server, at)
}

fn experiment(args: &[&str], out: &PathBuf) -> Output {
    Command::new(EXE)
        .args([
            "--quick",
            "--repeats",
            "1",
            "--step",
            "300ms",
            "--warmup",
            "100ms",
        ])
        .args(["--unary-ramp", "300:600:2", "--rest-h1-ramp", "300:600:2"])
        .args(args)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .output()
        .unwrap()
}

fn fresh(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ch14-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn a_remote_server_is_driven_and_counted_through_its_snapshot() {
    let pod = Pod::create("ch14-remote", 0.5).ok();
    let (mut server, at) = serve("ct-inline", pod.as_ref());
    let out = fresh("remote");
    let run = experiment(
        &[
            "--target",
            &at,
            "--arms",
            "ct-inline",
            "--shapes",
            "unary,rest-h1",
        ],
        &out,
    );
    // A wrong arm is refused by name before any load is offered.
    let wrong = experiment(&["--target", &at, "--arms", "mt2-spawn"], &fresh("wrong"));
    server.kill().unwrap();
    server.wait().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "the experiment failed: {stderr}");

    let steps: Vec<StepResult> = harness::records::read_csv(&out.join("steps.csv")).unwrap();
    for shape in ["unary", "rest-h1"] {
        let of: Vec<_> = steps
            .iter()
            .filter(|s| s.shape.to_string() == shape)
            .collect();
        assert!(!of.is_empty(), "no {shape} steps: {steps:?}");
        for s in of {
            assert!(s.ok > 0 && s.server_cpu > 0.0, "{s:?}");
            // The server's own count of units, not the generator's: the
            // per-unit price comes from the far side.
            assert!(s.cpu_us_per_unit > 0.0, "{s:?}");
            assert_eq!(s.periods.is_some(), pod.is_some(), "{s:?}");
        }
    }
    let ramps: Vec<RampRecord> = harness::records::read_json(&out.join("ramps.json")).unwrap();
    assert_eq!(ramps.len(), 2);
    assert!(ramps.iter().all(|r| r.server.arm == "ct-inline"));
    if pod.is_some() {
        assert!(
            ramps
                .iter()
                .all(|r| r.throttling.is_some_and(|t| t.periods > 0))
        );
    }

    assert!(!wrong.status.success());
    let said = String::from_utf8_lossy(&wrong.stderr);
    assert!(said.contains("runs ct-inline, not mt2-spawn"), "{said}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_target_refuses_what_only_a_local_server_can_have() {
    for (args, says) in [
        (
            &[
                "--target",
                "127.0.0.1:1",
                "--server-cpus",
                "0.5",
                "--arms",
                "ct-inline",
            ][..],
            "--server-cpus is refused with --target",
        ),
        (&["--target", "127.0.0.1:1"][..], "--arms names the one arm"),
    ] {
        let out = fresh("refused");
        let run = experiment(args, &out);
        assert!(!run.status.success());
        let said = String::from_utf8_lossy(&run.stderr);
        assert!(said.contains(says), "{said}");
        assert!(!out.exists(), "a refused run wrote {}", out.display());
    }
}

#[test]
fn a_target_that_is_not_a_server_is_named_in_the_error() {
    // Nothing listens on port 1: the run says where it looked.
    let out = fresh("absent");
    let run = experiment(&["--target", "127.0.0.1:1", "--arms", "ct-inline"], &out);
    assert!(!run.status.success());
    let said = String::from_utf8_lossy(&run.stderr);
    assert!(said.contains("http://127.0.0.1:1/snapshot"), "{said}");
    let _ = std::fs::remove_dir_all(&out);
}
