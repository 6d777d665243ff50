//! Each arm's server process runs on the configuration it claims, counted
//! from outside the process, and answers both shapes of call.

use std::{path::PathBuf, time::Duration};

use per_call::{
    Arm,
    arm::WORKER_THREAD_NAME,
    load::{Streams, connect, unary_call},
    run::{snapshot, start_server, verify},
};
use proto::greeter::v1::greeter_client::GreeterClient;

fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_per_call"))
}

fn slot(index: u64) -> loadgen::Slot {
    loadgen::Slot {
        index,
        step: 0,
        due: Duration::ZERO,
    }
}

#[tokio::test]
async fn every_arm_runs_the_threads_it_claims_and_echoes_both_ways() {
    for (text, workers, named) in [
        ("ct-inline", 1, 0),
        ("ct-spawn", 1, 0),
        ("mt1-inline", 1, 1),
        ("mt2-spawn", 2, 2),
        ("mt3-inline", 3, 3),
    ] {
        let arm: Arm = text.parse().unwrap();
        let mut server = start_server(&exe(), arm, None, Vec::new()).await.unwrap();
        let info = server.ready.clone();
        assert_eq!(info.arm, text);
        assert_eq!(info.workers, workers, "{text}: runtime metrics");
        // Counted again from outside, not taken on the server's word.
        let names = program::proc::thread_names(program::proc::Pid::Of(info.pid));
        let counted = names.iter().filter(|n| *n == WORKER_THREAD_NAME).count();
        assert_eq!(counted, named, "{text}: {names:?}");
        // Main thread + control thread, plus the pool: nothing else runs.
        assert_eq!(names.len(), 2 + named, "{text}: {names:?}");
        verify(&info, arm).unwrap();

        let channel = connect(info.addr).await.unwrap();
        let client = GreeterClient::new(channel.clone());
        for i in 0..10 {
            unary_call(&client, Duration::from_secs(5), slot(i))
                .await
                .unwrap();
        }
        let streams = Streams::open(channel, 3, Duration::from_secs(5))
            .await
            .unwrap();
        for i in 0..30 {
            streams.call(slot(i)).await.unwrap();
        }
        let stats = snapshot(&mut server).await.unwrap();
        assert_eq!((stats.unary_calls, stats.messages), (10, 30), "{text}");
        let spawned = if text.ends_with("spawn") { 40 } else { 0 };
        assert_eq!(stats.spawned, spawned, "{text}");
        assert!(stats.cpu_ns > 0);
        server.stop().await.unwrap();
    }
}

#[tokio::test]
async fn a_server_that_is_not_what_the_arm_says_is_caught() {
    let server = start_server(&exe(), "ct-inline".parse().unwrap(), None, Vec::new())
        .await
        .unwrap();
    let error = verify(&server.ready, "mt2-inline".parse().unwrap()).unwrap_err();
    assert!(error.to_string().contains("expected 2"), "{error}");
    server.stop().await.unwrap();
}

#[test]
fn bad_arguments_get_a_clear_error_and_a_failure_status() {
    for (args, says) in [
        (&["--arms", "ct-later"][..], "not an arm"),
        (&["--unary-ramp", "5:1:3"], "TO at least FROM"),
        (&["--repeats", "0"], "--repeats"),
        (&["--step", "10ms"], "--step"),
        (
            &["--h1-connections", "0"],
            "--h1-connections must be between 1 and 10000",
        ),
        (&["--h1-connections", "many"], "invalid value 'many'"),
        (&["--shapes", "soap"], "not a shape"),
        (&["--rest-h1-ramp", "5:1:3"], "TO at least FROM"),
        (&["--rest-h2-ramp", "1000"], "not a ramp"),
        (
            &["--server-cpus", "0"],
            "--server-cpus must be between 0.05 and 64",
        ),
        (&["--server-cpus", "half"], "invalid value 'half'"),
    ] {
        // A folder that cannot be made: a bad flag must fail before it is needed.
        let output = std::process::Command::new(exe())
            .args(args)
            .args(["--out", "/nonexistent/never-written"])
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// `--server-cpus`: the server process itself runs in the pod's group from
/// its start, and the pod reads its throttling back. Where this test may not
/// make cgroups (not root, no cpu controller), the refusal is checked instead.
#[tokio::test]
async fn a_server_with_a_cpu_quota_runs_inside_its_pod() {
    let pod = match harness::pod::Pod::create("ch14-test", 0.5) {
        Ok(pod) => pod,
        Err(e) => {
            assert!(
                e.to_string().contains("without the CPU limit option"),
                "{e}"
            );
            return;
        }
    };
    let arm: Arm = "ct-inline".parse().unwrap();
    let mut server = start_server(&exe(), arm, None, pod.wrapper())
        .await
        .unwrap();
    assert!(pod.procs().contains(&server.ready.pid), "{:?}", pod.procs());
    let client = GreeterClient::new(connect(server.ready.addr).await.unwrap());
    for i in 0..50 {
        unary_call(&client, Duration::from_secs(5), slot(i))
            .await
            .unwrap();
    }
    assert_eq!(snapshot(&mut server).await.unwrap().unary_calls, 50);
    let throttling = pod.throttling().unwrap();
    assert!(throttling.throttled <= throttling.periods, "{throttling:?}");
    assert_eq!(pod.quota_us().unwrap(), (50_000, 100_000));
    server.stop().await.unwrap();
}
