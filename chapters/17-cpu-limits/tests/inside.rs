//! What a server sees from inside a pod, read from the real cgroup
//! filesystem: std's `available_parallelism` (and so Tokio's default worker
//! count) follows the quota, rounded down, never below one, never above the
//! CPUs the process may run on. Without root or a cpu controller each test
//! checks the refusal instead.

use std::path::Path;

use cpu_limits::{
    config::{Arm, machine_cpus},
    server::{Inside, Serve},
};
use harness::{
    child::{Child, Spawn},
    pod::Pod,
};

/// The server of `arm` in a pod of `cpus` (none: no pod), as it saw itself.
async fn inside(cpus: Option<f64>, arm: &str) -> Option<Inside> {
    let pod = match cpus.map(|c| Pod::create("ch17-test", c)) {
        None => None,
        Some(Ok(pod)) => Some(pod),
        Some(Err(e)) => {
            let e = e.to_string();
            assert!(e.contains("without the CPU limit option"), "{e}");
            eprintln!("no cgroup here, the refusal was checked instead: {e}");
            return None;
        }
    };
    let how = Spawn {
        wrapper: pod.as_ref().map(Pod::wrapper).unwrap_or_default(),
        ..Spawn::default()
    };
    let serve = Serve {
        arm: arm.parse::<Arm>().unwrap(),
        work_us: 100,
    };
    let exe = Path::new(env!("CARGO_BIN_EXE_cpu_limits"));
    let server = Child::start(exe, &serve, &how).await.unwrap();
    let seen = server.ready.clone();
    server.stop().await.unwrap();
    Some(seen)
}

#[tokio::test]
async fn the_default_runtime_follows_the_quota_rounded_down() {
    let all = machine_cpus();
    assert_eq!(inside(None, "auto").await.unwrap().workers, all);
    for (cpus, expected) in [(0.5, 1), (1.0, 1), (1.5, 1), (2.5, 2.min(all))] {
        let Some(seen) = inside(Some(cpus), "auto").await else {
            return;
        };
        assert_eq!(seen.parallelism, expected, "{cpus} CPUs");
        assert_eq!(seen.workers, expected, "{cpus} CPUs");
    }
}

#[tokio::test]
async fn a_quota_is_time_not_cores_and_explicit_workers_ignore_it() {
    let Some(seen) = inside(Some(1.0), &format!("mt{}", machine_cpus().max(2))).await else {
        return;
    };
    // The pod may still run on every CPU; only the time is limited.
    assert_eq!(seen.cpus_allowed, program::proc::cpus_allowed());
    assert_eq!(seen.workers, machine_cpus().max(2));
    assert_eq!(seen.parallelism, 1);
}
