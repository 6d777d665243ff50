//! Behaviour of the latency tools: the interleaving, the CSV, the suggested
//! deadline, and that the resumed-TLS arm really resumes. No timing
//! thresholds. The statistics have their tests in `perf::stats` itself.

use perf::{
    choose::suggest_deadline_ms,
    latency::{Arm, Caller, Http, Servers, Step, schedule, write_csv},
};

#[test]
fn arms_are_interleaved_call_by_call_warmup_first() {
    let steps: Vec<Step> = schedule(2, 1, 2).collect();
    let step = |arm, i, warmup| Step { arm, i, warmup };
    assert_eq!(
        steps,
        vec![
            step(0, 0, true),
            step(1, 0, true),
            step(0, 0, false),
            step(1, 0, false),
            step(0, 1, false),
            step(1, 1, false),
        ]
    );
    // Every arm gets warmup + calls steps, calls of them counted.
    let steps: Vec<Step> = schedule(3, 20, 200).collect();
    for arm in 0..3 {
        let mine: Vec<_> = steps.iter().filter(|s| s.arm == arm).collect();
        assert_eq!(mine.len(), 220);
        assert_eq!(mine.iter().filter(|s| !s.warmup).count(), 200);
    }
}

#[tokio::test]
async fn csv_has_one_line_per_sample_with_arm_round_index_micros() {
    let addr = perf::latency::echo_listener(4).await.unwrap();
    let mut arms = Vec::new();
    for label in ["a", "b"] {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        arms.push(Arm {
            label: label.into(),
            caller: Caller::Floor {
                stream: std::sync::Arc::new(tokio::sync::Mutex::new(stream)),
                len: 4,
            },
        });
    }
    let samples = perf::latency::measure(&arms, 1, 3, 2, |_, _, _| {})
        .await
        .unwrap();
    assert_eq!(samples.len(), 2);
    assert!(
        samples
            .iter()
            .all(|rounds| rounds.len() == 2 && rounds.iter().all(|r| r.len() == 3))
    );

    let mut out = Vec::new();
    write_csv(&mut out, &arms, &samples).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "arm,round,i,micros");
    assert_eq!(lines.len(), 1 + 2 * 2 * 3);
    let first: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(&first[..3], &["\"a\"", "1", "0"]);
    assert!(first[3].parse::<u64>().is_ok());
    assert!(lines.last().unwrap().starts_with("\"b\",2,2,"));
}

#[test]
fn suggested_deadline_is_p99_times_headroom_rounded_up_to_1_2_5() {
    assert_eq!(suggest_deadline_ms(1_230, 3.0), 5.0); // 3.69 ms
    assert_eq!(suggest_deadline_ms(600, 3.0), 2.0); // 1.8 ms
    assert_eq!(suggest_deadline_ms(10_000, 2.0), 20.0);
    assert_eq!(suggest_deadline_ms(40_000, 3.0), 200.0); // 120 ms
    assert_eq!(suggest_deadline_ms(50, 3.0), 1.0); // never below 1 ms
}

async fn spawn_stack(dir: &std::path::Path) -> (stack::Stack, Servers) {
    Servers::spawn_stack(dir, certs::Pki::new(dir).ca_cert())
        .await
        .unwrap()
}

fn counts(caller: &Caller) -> (u64, u64) {
    match caller {
        Caller::Fresh { handshakes, .. } => handshakes.counts(),
        _ => unreachable!("a fresh caller"),
    }
}

#[tokio::test]
async fn the_resumed_arm_resumes_and_the_full_arm_never_does() {
    let dir = tempfile::tempdir().unwrap();
    let (_stack, servers) = spawn_stack(dir.path()).await;
    for (grpc, http) in [(true, Http::H2), (false, Http::H2), (false, Http::H1)] {
        let resumed = servers.fresh(grpc, http, true).unwrap();
        let full = servers.fresh(grpc, http, false).unwrap();
        for _ in 0..3 {
            resumed.call().await.unwrap();
            full.call().await.unwrap();
        }
        // The first connection has no ticket yet; the later ones use one.
        assert_eq!(counts(&resumed), (1, 2), "grpc={grpc} {http:?}");
        assert_eq!(counts(&full), (3, 0), "grpc={grpc} {http:?}");
    }
}

#[tokio::test]
async fn every_arm_gets_an_answer_from_in_process_servers() {
    let dir = tempfile::tempdir().unwrap();
    let (_stack, servers) = spawn_stack(dir.path()).await;
    for fresh in [false, true] {
        for arm in perf::latency::arms(&servers, fresh).await.unwrap() {
            arm.caller
                .call()
                .await
                .unwrap_or_else(|e| panic!("{}: {e:#}", arm.label));
        }
    }
}
