//! The retry experiment in virtual time (`tokio::time::pause`): the counts are
//! exact and the runs take milliseconds, whatever the machine.

use std::time::Duration;

use perf::retry::{Config, Policy, Snapshot, run};

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

/// Runs the simulation to its end, with no progress lines.
async fn simulate(config: Config) -> Snapshot {
    run(config, Duration::from_secs(1), |_| {}).await
}

#[tokio::test(start_paused = true)]
async fn naive_retries_multiply_attempts_by_max_attempts() {
    let s = simulate(dead_server(Policy::Naive)).await;
    assert_eq!(s.calls, 200);
    assert_eq!(s.failed, 200);
    assert_eq!(s.attempts, 4 * 200);
    assert_eq!(s.retries, 3 * 200);
    assert_eq!(s.amplification(), 4.0);
}

#[tokio::test(start_paused = true)]
async fn retry_budget_keeps_attempts_within_budget() {
    let config = dead_server(Policy::Budgeted);
    let s = simulate(config.clone()).await;
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
    let s = simulate(config).await;
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
        attempt_timeout: Duration::from_millis(300), // the whole deadline, if left
        budget_tokens: 1e9,                          // an unlimited budget, to isolate the deadline
        non_idempotent_every: 0,
        ..Config::default()
    };
    let started = tokio::time::Instant::now();
    let s = simulate(config.clone()).await;
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
        let s = simulate(Config {
            policy,
            ..config.clone()
        })
        .await;
        assert_eq!(s.failed, 0, "{policy:?}: {s:?}");
        assert_eq!(s.amplification(), 1.0, "{policy:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn with_one_deadline_attempts_share_it_and_each_has_its_own_timeout() {
    // Every attempt fails after the 100 ms attempt timeout, so a 300 ms
    // deadline holds three attempts, however many max_attempts would allow;
    // the naive policy takes all four, each with a fresh 300 ms.
    let config = Config {
        max_attempts: 4,
        ..dead_server(Policy::Deadline)
    };
    let s = simulate(config).await;
    assert_eq!(s.attempts, 3 * s.calls, "{s:?}");
    assert_eq!(s.retries_refused_deadline, s.calls, "{s:?}");
}

#[tokio::test(start_paused = true)]
async fn each_policy_adds_one_rule_and_only_the_idempotent_rule_refuses_state_changes() {
    let config = Config {
        non_idempotent_every: 1, // every call changes state
        ..dead_server(Policy::Naive)
    };
    for policy in Policy::ALL {
        let s = simulate(Config {
            policy,
            ..config.clone()
        })
        .await;
        let refuses = policy >= Policy::Idempotent;
        assert_eq!(s.retries == 0, refuses, "{policy:?}: {s:?}");
        assert_eq!(s.tokens.is_some(), policy == Policy::Budgeted, "{policy:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_budgeted_retry_rescues_calls_caught_by_a_short_slow_spell() {
    // Half a second of a server four times slower: attempts served during the
    // spell miss their 100 ms attempt timeout, and a retry after it (with time
    // left of the 300 ms deadline, and tokens left in the budget) succeeds.
    let config = Config {
        policy: Policy::Budgeted,
        duration: Duration::from_secs(4),
        slow_from: Duration::from_secs(2),
        slow_until: Duration::from_millis(2_150),
        non_idempotent_every: 0,
        ..Config::default()
    };
    let s = simulate(config).await;
    assert!(s.retries > 0, "{s:?}");
    assert!(s.rescued > 0, "{s:?}");
    assert!(s.rescued <= s.retries, "{s:?}");
}
