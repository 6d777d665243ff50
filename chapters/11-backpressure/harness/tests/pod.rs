//! The pod on the real cgroup filesystem: the quota is applied and read back, a
//! busy child is throttled, and the group is gone afterwards however it ended.
//! Where this process may not make cgroups (not root, no cpu controller), each
//! test checks the refusal instead: it must say what is missing and how to run
//! without a limit.

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use harness::pod::Pod;

/// A pod, or the refusal checked and `None`.
fn pod(name: &str, cpus: f64) -> Option<Pod> {
    match Pod::create(name, cpus) {
        Ok(pod) => Some(pod),
        Err(e) => {
            let e = e.to_string();
            assert!(e.contains("without the CPU limit option"), "{e}");
            assert!(
                e.contains("needs root") || e.contains("read-only") || e.contains("no cgroup"),
                "{e}"
            );
            eprintln!("no cgroup here, the refusal was checked instead: {e}");
            None
        }
    }
}

/// Starts `script` under the pod's wrapper, and waits (at most 10 s) until the
/// kernel lists it in the group.
fn start_in(pod: &Pod, script: &str) -> Child {
    let words = pod.wrapper();
    let child = Command::new(&words[0])
        .args(&words[1..])
        .args(["sh", "-c", script])
        .stdin(Stdio::null())
        .spawn()
        .expect("start sh");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pod.procs().contains(&child.id()) {
        assert!(
            Instant::now() < deadline,
            "the child never joined {:?}",
            pod.path()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

fn wait_for_exit(child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn a_busy_child_in_a_quarter_cpu_is_throttled_and_the_group_goes_away() {
    let Some(pod) = pod("busy", 0.25) else { return };
    assert_eq!(pod.quota_us().unwrap(), (25_000, 100_000));
    let dir = pod.path().to_path_buf();
    let mut child = start_in(&pod, "while :; do :; done");
    // A busy loop wants the whole core, so it spends each period's 25 ms and
    // waits out the other 75: nearly every period of the second is throttled.
    std::thread::sleep(Duration::from_secs(1));
    let stat = pod.throttling().unwrap();
    assert!(stat.periods >= 3, "{stat:?}");
    assert!(stat.throttled >= 2, "{stat:?}");
    assert!(stat.throttled_us > 0, "{stat:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    drop(pod);
    assert!(!dir.exists(), "{} is still there", dir.display());
}

#[test]
fn dropping_the_pod_kills_what_still_runs_in_it() {
    let Some(pod) = pod("left", 0.5) else { return };
    let dir = pod.path().to_path_buf();
    let mut child = start_in(&pod, "sleep 60");
    drop(pod);
    assert!(!dir.exists(), "{} is still there", dir.display());
    assert!(wait_for_exit(&mut child), "the child outlived its pod");
}

#[test]
fn a_pod_of_more_than_one_cpu_and_two_pods_at_once() {
    let Some(one) = pod("first", 1.5) else { return };
    let Some(two) = pod("second", 0.1) else {
        return;
    };
    assert_ne!(one.path(), two.path());
    assert_eq!(one.quota_us().unwrap(), (150_000, 100_000));
    assert_eq!(two.quota_us().unwrap(), (10_000, 100_000));
}

#[test]
fn a_panic_still_removes_the_group() {
    let mut dir = None;
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let Some(pod) = pod("panic", 0.5) else { return };
        dir = Some(pod.path().to_path_buf());
        panic!("the experiment failed half-way");
    }));
    if let Some(dir) = dir {
        assert!(panicked.is_err());
        assert!(!dir.exists(), "{} is still there", dir.display());
    }
}

#[test]
fn the_group_of_a_process_killed_outright_goes_at_the_next_create() {
    let Some(probe) = pod("probe", 0.5) else {
        return;
    };
    let root = probe.path().parent().unwrap().to_path_buf();
    drop(probe);
    // A process that has exited: its group can only be cleaned up by someone else.
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let stale = root.join(format!("workshop-pod-killed-{}", gone.id()));
    std::fs::create_dir(&stale).unwrap();
    let _next = pod("next", 0.5).unwrap();
    assert!(!stale.exists(), "{} is still there", stale.display());
}

#[test]
fn a_burst_is_set_where_the_kernel_has_it_and_refused_by_name_where_not() {
    let Some(pod) = pod("burst", 1.0) else { return };
    let file = match pod.version() {
        harness::pod::Version::V1 => "cpu.cfs_burst_us",
        harness::pod::Version::V2 => "cpu.max.burst",
    };
    match pod.set_burst(1.0) {
        Ok(()) => {
            let set = std::fs::read_to_string(pod.path().join(file)).unwrap();
            assert_eq!(set.trim(), "100000");
            // More than one period's quota is the kernel's to refuse.
            assert!(pod.set_burst(2.0).is_err());
        }
        Err(e) => {
            let e = e.to_string();
            assert!(!pod.path().join(file).exists(), "{e}");
            assert!(e.contains(file) && e.contains("5.14"), "{e}");
        }
    }
}
