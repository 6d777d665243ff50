//! The callers' side: each policy's decision after a failed attempt, the
//! retry budget, and (in virtual time, `tokio::time::pause`) how many attempts
//! each policy makes against a server that refuses.

use std::{cell::Cell, time::Duration};

use overload::client::{Failure, Next, Retry, RetryRules, Shared, Stop, amplification, call};
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
    let shared = Shared::new(RetryThrottle::a6_example(), 7);
    let mut attempts = Vec::new();
    for _ in 0..calls {
        let deadline = Instant::now() + Duration::from_millis(300);
        let ended = call(&rules(retry), &shared, deadline, |_| async {
            Err(Code::ResourceExhausted.into())
        })
        .await;
        assert_eq!(ended.result, Err(Code::ResourceExhausted.into()));
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
    let shared = Shared::new(RetryThrottle::a6_example(), 7);
    let tries = Cell::new(0);
    let deadline = Instant::now() + Duration::from_millis(300);
    let ended = call(&rules(Retry::Budgeted), &shared, deadline, |_| {
        tries.set(tries.get() + 1);
        let first = tries.get() == 1;
        async move {
            if first {
                Err(Code::ResourceExhausted.into())
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
    let shared = Shared::new(RetryThrottle::a6_example(), 7);
    let started = Instant::now();
    let deadline = started + Duration::from_millis(300);
    // Each attempt uses all the time it is given, then fails.
    let ended = call(
        &rules(Retry::Naive),
        &shared,
        deadline,
        |remaining| async move {
            tokio::time::sleep(remaining).await;
            Err(Code::DeadlineExceeded.into())
        },
    )
    .await;
    assert_eq!(ended.attempts, 1, "DEADLINE_EXCEEDED is not retried");
    assert_eq!(ended.stop, Some(Stop::NotRetryable));
    assert_eq!(started.elapsed(), Duration::from_millis(300));
}

const LOTS: Duration = Duration::from_secs(10);

#[test]
fn only_refusals_are_retried() {
    let naive = rules(Retry::Naive);
    assert_eq!(
        naive.after_failure(1, Code::ResourceExhausted.into(), LOTS, false, 0.5),
        Next::RetryAfter(Duration::ZERO)
    );
    assert_eq!(
        naive.after_failure(1, Code::DeadlineExceeded.into(), LOTS, true, 0.5),
        Next::Stop(Stop::NotRetryable)
    );
    assert_eq!(
        naive.after_failure(5, Code::ResourceExhausted.into(), LOTS, true, 0.5),
        Next::Stop(Stop::Attempts)
    );
    assert_eq!(
        rules(Retry::Off).after_failure(1, Code::ResourceExhausted.into(), LOTS, true, 0.5),
        Next::Stop(Stop::Off)
    );
}

#[test]
fn budgeted_backoff_grows_is_jittered_capped_and_fits_the_deadline() {
    let b = rules(Retry::Budgeted);
    let re = Code::ResourceExhausted;
    let ms = Duration::from_millis;
    assert_eq!(
        b.after_failure(1, re.into(), LOTS, true, 0.5),
        Next::RetryAfter(ms(12) + Duration::from_micros(500))
    );
    assert_eq!(
        b.after_failure(3, re.into(), LOTS, true, 0.5),
        Next::RetryAfter(ms(50))
    );
    assert_eq!(
        b.after_failure(4, re.into(), LOTS, true, 0.999_999),
        Next::RetryAfter(ms(200).mul_f64(0.999_999))
    );
    assert_eq!(
        b.after_failure(1, re.into(), LOTS, true, 0.0),
        Next::RetryAfter(Duration::ZERO)
    );
    assert_eq!(
        b.after_failure(1, re.into(), LOTS, false, 0.5),
        Next::Stop(Stop::Budget)
    );
    assert_eq!(
        b.after_failure(3, re.into(), ms(40), true, 0.9),
        Next::Stop(Stop::Deadline)
    );
}

#[test]
fn the_budget_is_withdrawn_by_failures_and_refilled_by_successes() {
    // gRPC's defaults: 10 tokens; retries allowed while above 5.
    let shared = Shared::new(RetryThrottle::a6_example(), 1);
    for _ in 0..4 {
        assert!(shared.attempt_ended(false)); // 9, 8, 7, 6 tokens
    }
    assert!(!shared.attempt_ended(false), "5 tokens: no more retries");
    assert!(!shared.attempt_ended(false)); // 4 tokens
    for _ in 0..9 {
        assert!(!shared.attempt_ended(true)); // +0.1 each: 4.9 after nine
    }
    shared.attempt_ended(true); // 5.0: the edge, whichever way rounding goes
    assert!(shared.attempt_ended(true), "5.1: back above half");
}

#[test]
fn amplification_is_attempts_over_calls() {
    assert_eq!(amplification([1, 1, 1, 1]), 1.0);
    assert_eq!(amplification([5, 1, 3, 3]), 3.0);
    assert_eq!(amplification([]), 0.0);
}

#[test]
fn when_told_waits_at_least_the_named_delay_and_never_past_the_deadline() {
    let told = rules(Retry::WhenTold);
    let ms = Duration::from_millis;
    let refused = |after: Option<Duration>| Failure {
        code: Code::ResourceExhausted,
        retry_after: after,
    };
    assert_eq!(
        told.after_failure(1, refused(Some(ms(20))), LOTS, false, 0.0),
        Next::RetryAfter(ms(20)),
        "the throttle's budget is not this policy's"
    );
    assert_eq!(
        told.after_failure(1, refused(Some(ms(20))), LOTS, true, 0.5),
        Next::RetryAfter(ms(30))
    );
    assert_eq!(
        told.after_failure(1, refused(None), LOTS, true, 0.5),
        Next::Stop(Stop::NotTold)
    );
    // HTTP's Retry-After counts whole seconds: within a 300 ms deadline it
    // means "not in this call".
    assert_eq!(
        told.after_failure(1, refused(Some(Duration::from_secs(1))), ms(290), true, 0.0),
        Next::Stop(Stop::Deadline)
    );
    assert_eq!(
        told.after_failure(5, refused(Some(ms(1))), LOTS, true, 0.0),
        Next::Stop(Stop::Attempts)
    );
}

#[tokio::test(start_paused = true)]
async fn a_caller_that_waits_as_told_makes_fewer_attempts_than_one_that_does_not() {
    // A server that refuses every attempt and says "come back in 100 ms".
    async fn attempts(retry: Retry) -> Vec<u32> {
        let shared = Shared::new(RetryThrottle::a6_example(), 7);
        let mut made = Vec::new();
        for _ in 0..50 {
            let deadline = Instant::now() + Duration::from_millis(300);
            let ended = call(&rules(retry), &shared, deadline, |_| async {
                Err(Failure {
                    code: Code::ResourceExhausted,
                    retry_after: Some(Duration::from_millis(100)),
                })
            })
            .await;
            made.push(ended.attempts);
        }
        made
    }
    let naive = attempts(Retry::Naive).await;
    let told = attempts(Retry::WhenTold).await;
    assert!(naive.iter().all(|&a| a == 5));
    // Waits of 100-200 ms fit at most twice into 300 ms: 2 or 3 attempts.
    assert!(told.iter().all(|&a| (2..=3).contains(&a)), "{told:?}");
    assert!(amplification(told) < amplification(naive));
}
