//! The callers' side in virtual time (`tokio::time::pause`): how many
//! attempts each retry policy makes against a server that refuses.

use std::{cell::Cell, time::Duration};

use overload::client::{Retry, RetryRules, Shared, Stop, amplification, call};
use perf::retry::RetryThrottle;
use tokio::time::Instant;
use tonic::Code;

fn rules(retry: Retry) -> RetryRules {
    RetryRules {
        retry,
        max_attempts: 5,
        backoff_base: Duration::from_millis(25),
        backoff_cap: Duration::from_millis(200),
    }
}

/// `calls` calls, one after another, against a server that refuses every
/// attempt; the attempts each call made.
async fn against_a_full_server(retry: Retry, calls: usize) -> Vec<u32> {
    let shared = Shared::new(RetryThrottle::grpc_default(), 7);
    let mut attempts = Vec::new();
    for _ in 0..calls {
        let deadline = Instant::now() + Duration::from_millis(300);
        let ended = call(&rules(retry), &shared, deadline, |_| async {
            Err(Code::ResourceExhausted)
        })
        .await;
        assert_eq!(ended.result, Err(Code::ResourceExhausted));
        attempts.push(ended.attempts);
    }
    attempts
}

#[tokio::test(start_paused = true)]
async fn naive_retries_make_every_call_max_attempts() {
    let attempts = against_a_full_server(Retry::Naive, 100).await;
    assert!(attempts.iter().all(|&a| a == 5));
    assert_eq!(amplification(attempts), 5.0);
}

#[tokio::test(start_paused = true)]
async fn the_budget_stops_retries_after_a_few_failures() {
    let attempts = against_a_full_server(Retry::Budgeted, 100).await;
    // 10 tokens, retries only above 5: five failed attempts empty the
    // budget, so at most 4 retries in all, then one attempt per call.
    let retries: u32 = attempts.iter().map(|a| a - 1).sum();
    assert!(retries <= 4, "{attempts:?}");
    assert!(attempts[10..].iter().all(|&a| a == 1), "{attempts:?}");
    assert!(amplification(attempts) < 1.05);
}

#[tokio::test(start_paused = true)]
async fn one_refusal_then_success_counts_two_attempts_and_refills_the_budget() {
    let shared = Shared::new(RetryThrottle::grpc_default(), 7);
    let tries = Cell::new(0);
    let deadline = Instant::now() + Duration::from_millis(300);
    let ended = call(&rules(Retry::Budgeted), &shared, deadline, |_| {
        tries.set(tries.get() + 1);
        let first = tries.get() == 1;
        async move {
            if first {
                Err(Code::ResourceExhausted)
            } else {
                Ok(())
            }
        }
    })
    .await;
    assert_eq!(ended.result, Ok(()));
    assert_eq!(ended.attempts, 2);
    // 10 - 1 + 0.1
    assert!((shared.throttle.lock().unwrap().tokens() - 9.1).abs() < 1e-9);
}

#[tokio::test(start_paused = true)]
async fn no_attempt_outlives_the_one_deadline() {
    let shared = Shared::new(RetryThrottle::grpc_default(), 7);
    let started = Instant::now();
    let deadline = started + Duration::from_millis(300);
    // Each attempt uses all the time it is given, then fails.
    let ended = call(
        &rules(Retry::Naive),
        &shared,
        deadline,
        |remaining| async move {
            tokio::time::sleep(remaining).await;
            Err(Code::DeadlineExceeded)
        },
    )
    .await;
    assert_eq!(ended.attempts, 1, "DEADLINE_EXCEEDED is not retried");
    assert_eq!(ended.stop, Some(Stop::NotRetryable));
    assert_eq!(started.elapsed(), Duration::from_millis(300));
}
