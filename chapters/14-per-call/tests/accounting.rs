//! The ramp's bookkeeping under virtual time: a pretend server that answers
//! 1000 calls per second, one at a time, driven by the same bounded open-loop
//! driver and analysed by the same code as the real experiment.

use std::{sync::Arc, time::Duration};

use loadgen::{Counters, Schedule, Timer, WhenFull, run_bounded};
use per_call::ramp::{KneeReason, Ramp, StepResult, knee, plateau};
use tokio::sync::Semaphore;

/// Steps of 2 s at 250, 500, 1000 and 2000 calls/s against a 1000/s server.
async fn ramp(when_full: WhenFull) -> Vec<StepResult> {
    let rates = "250:2000:4".parse::<Ramp>().unwrap().rates();
    assert_eq!(rates, [250.0, 500.0, 1000.0, 2000.0]);
    let step = Duration::from_secs(2);
    let mut results = Vec::new();
    for rate in rates {
        let server = Arc::new(Semaphore::new(1));
        let counters = Arc::new(Counters::default());
        let records = run_bounded(
            &Schedule::constant(rate, step).slots(),
            Timer::Tokio,
            8,
            when_full,
            Duration::from_secs(60),
            counters.clone(),
            |_| {
                let server = server.clone();
                async move {
                    let _turn = server.acquire().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    Ok(())
                }
            },
        )
        .await;
        let result = StepResult::from_records(&records, rate, step);
        // Every slot is accounted for exactly once, and the live counters agree.
        assert_eq!(result.scheduled, (rate * 2.0) as u64);
        assert_eq!(
            result.ok + result.failed + result.shed + result.unfinished,
            result.scheduled
        );
        let line = counters.line();
        assert!(line.contains(&format!("shed {}", result.shed)), "{line}");
        assert!(
            line.contains(&format!("deferred {}", result.deferred)),
            "{line}"
        );
        results.push(result);
    }
    results
}

#[tokio::test(start_paused = true)]
async fn deferred_slots_wait_and_the_knee_is_where_the_server_runs_out() {
    let steps = ramp(WhenFull::Defer).await;
    // Below capacity nothing waits and everything is answered in the step.
    for s in &steps[..2] {
        assert_eq!((s.deferred, s.shed), (0, 0), "{s:?}");
        assert!(s.goodput >= 0.99 * s.offered, "{s:?}");
    }
    // At twice the capacity: every slot still sent (deferred, not dropped),
    // but only ~1000/s answered within the step, and the tail shows it.
    let over = &steps[3];
    assert_eq!(over.ok, over.scheduled);
    assert!(over.deferred > over.scheduled / 4, "{over:?}");
    assert!((900.0..=1010.0).contains(&over.goodput), "{over:?}");
    assert!(over.p99_ms > 500.0, "{over:?}");
    assert!(over.saturated());
    let (at, _) = knee(&steps).unwrap();
    assert!(at >= 2, "{steps:?}");
    assert_eq!(knee(&steps[..2]), None);
    assert!((900.0..=1010.0).contains(&plateau(&steps)));
}

#[tokio::test(start_paused = true)]
async fn shed_slots_are_counted_and_never_sent() {
    let steps = ramp(WhenFull::Shed).await;
    let over = &steps[3];
    assert_eq!(over.deferred, 0);
    // About half the slots found all 8 places busy.
    assert!(over.shed > over.scheduled / 3, "{over:?}");
    assert_eq!(over.ok + over.shed, over.scheduled);
    // Shedding keeps the latency of what was sent short.
    assert!(over.p99_ms < 50.0, "{over:?}");
    let (at, reason) = knee(&steps).unwrap();
    assert!(at >= 2, "{steps:?}");
    assert!(
        matches!(reason, KneeReason::Goodput | KneeReason::Queueing),
        "{reason:?}"
    );
}
