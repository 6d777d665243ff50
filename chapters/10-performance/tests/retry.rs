//! The retry experiment in virtual time (`tokio::time::pause`): the counts are
//! exact and the runs take milliseconds, whatever the machine.

use std::time::Duration;

use perf::retry::{Config, Policy, run};

/// A server that can never answer within the deadline: every attempt fails.
fn dead_server(policy: Policy) -> Config {
    Config {
        policy,
        duration: Duration::from_secs(10),
        rate: 20.0, // 200 calls
        capacity: 1000,
        service: Duration::from_secs(60),
        slow_factor: 1.0,
        deadline: Duration::from_millis(300),
        max_attempts: 4,
        non_idempotent_every: 0,
        ..Config::default()
    }
}

#[tokio::test(start_paused = true)]
async fn naive_retries_multiply_attempts_by_max_attempts() {
    let s = run(dead_server(Policy::Naive), Duration::from_secs(1), |_| {}).await;
    assert_eq!(s.calls, 200);
    assert_eq!(s.failed, 200);
    assert_eq!(s.attempts, 4 * 200);
    assert_eq!(s.retries, 3 * 200);
    assert_eq!(s.amplification(), 4.0);
}

#[tokio::test(start_paused = true)]
async fn retry_budget_keeps_attempts_within_budget() {
    let config = dead_server(Policy::Budgeted);
    let s = run(config.clone(), Duration::from_secs(1), |_| {}).await;
    assert_eq!(s.calls, 200);
    assert_eq!(s.failed, 200);
    // With no successes to refill it, the bucket (10 tokens, retries only above
    // 5) allows at most 5 retries in the whole run, whatever the call count.
    let allowance = (config.budget_tokens / 2.0) as u64;
    assert!(s.retries <= allowance, "{s:?}");
    assert!(s.attempts <= s.calls + allowance, "{s:?}");
    assert!(s.retries_refused_budget >= s.calls - allowance - 1, "{s:?}");
    assert_eq!(s.tokens, Some(0.0));
}

#[tokio::test(start_paused = true)]
async fn budgeted_never_retries_a_call_that_is_not_idempotent() {
    let config = Config {
        non_idempotent_every: 1, // every call changes state
        ..dead_server(Policy::Budgeted)
    };
    let s = run(config, Duration::from_secs(1), |_| {}).await;
    assert_eq!(s.retries, 0);
    assert_eq!(s.attempts, s.calls);
    assert_eq!(s.retries_refused_idempotency, s.calls);
}

#[tokio::test(start_paused = true)]
async fn one_overall_deadline_bounds_every_budgeted_call() {
    // A server that answers in 200 ms against a 300 ms deadline, but only two
    // at a time: calls queue, attempts fail, and a retry may only use what is
    // left of the call's one deadline, never a fresh one.
    let config = Config {
        policy: Policy::Budgeted,
        duration: Duration::from_secs(5),
        rate: 20.0,
        capacity: 2,
        service: Duration::from_millis(200),
        contention: 0.0,
        slow_factor: 1.0,
        deadline: Duration::from_millis(300),
        budget_tokens: 1e9, // an unlimited budget, to isolate the deadline
        non_idempotent_every: 0,
        ..Config::default()
    };
    let started = tokio::time::Instant::now();
    let s = run(config.clone(), Duration::from_secs(1), |_| {}).await;
    // The last call starts just before `duration`; with one shared deadline it
    // has ended by `duration + deadline`, retries and all.
    assert!(
        started.elapsed() <= config.duration + config.deadline,
        "{:?}",
        started.elapsed()
    );
    assert!(s.failed > 0 && s.succeeded > 0, "{s:?}");
}

#[tokio::test(start_paused = true)]
async fn healthy_server_needs_no_retries() {
    let config = Config {
        slow_factor: 1.0,
        ..Config::default()
    };
    for policy in [Policy::Naive, Policy::Budgeted] {
        let s = run(
            Config {
                policy,
                ..config.clone()
            },
            Duration::from_secs(1),
            |_| {},
        )
        .await;
        assert_eq!(s.failed, 0, "{policy:?}: {s:?}");
        assert_eq!(s.amplification(), 1.0, "{policy:?}");
    }
}
