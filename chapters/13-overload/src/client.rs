//! The caller's side: one overall deadline per call, and what to do when an
//! attempt is refused with RESOURCE_EXHAUSTED.
//!
//! [`Retry::Naive`] tries again at once, up to `max_attempts`. [`Retry::Budgeted`]
//! is chapter 10's fix: back off exponentially with full jitter, and retry only
//! while gRPC's retry throttle ([`perf::retry::RetryThrottle`], shared by every
//! call to the server) has tokens to spare. Both stop when the call's deadline
//! has no room left for another attempt.

use std::{future::Future, sync::Mutex, time::Duration};

use perf::retry::{RetryThrottle, full_jitter};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::Serialize;
use tokio::time::{Instant, sleep};
use tonic::Code;

/// How a caller treats a refused attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Retry {
    /// One attempt per call.
    Off,
    /// Again at once, up to `max_attempts`.
    Naive,
    /// Backoff with full jitter, under the retry throttle's budget.
    Budgeted,
}

/// The retry settings of every call.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RetryRules {
    pub retry: Retry,
    /// Attempts per call, the first included.
    pub max_attempts: u32,
    /// Backoff before retry n is random in [0, min(cap, base * 2^(n-1))].
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
}

/// Why a failed call was not tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The policy does not retry.
    Off,
    /// A failure that retrying cannot fix here (the deadline passed, or a bug).
    NotRetryable,
    /// `max_attempts` reached.
    Attempts,
    /// The retry throttle's bucket is at or below half.
    Budget,
    /// The backoff would end after the call's deadline.
    Deadline,
}

/// After a failed attempt: try again after a pause, or stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    RetryAfter(Duration),
    Stop(Stop),
}

impl RetryRules {
    // ANCHOR: decide
    /// Attempt number `attempt` (from 1) failed with `code`, `remaining` is
    /// left of the call's deadline, and the throttle says whether it `allows`
    /// a retry. `random` is uniform in [0, 1), for the jitter.
    pub fn after_failure(
        &self,
        attempt: u32,
        code: Code,
        remaining: Duration,
        allows: bool,
        random: f64,
    ) -> Next {
        if self.retry == Retry::Off {
            return Next::Stop(Stop::Off);
        }
        // Only a refusal is retried: the server did no work on it, so trying
        // again is safe; DEADLINE_EXCEEDED means the caller's time is up.
        if code != Code::ResourceExhausted {
            return Next::Stop(Stop::NotRetryable);
        }
        if attempt >= self.max_attempts {
            return Next::Stop(Stop::Attempts);
        }
        if self.retry == Retry::Naive {
            return Next::RetryAfter(Duration::ZERO);
        }
        if !allows {
            return Next::Stop(Stop::Budget);
        }
        let backoff = full_jitter(self.backoff_base, self.backoff_cap, attempt, random);
        if backoff >= remaining {
            return Next::Stop(Stop::Deadline);
        }
        Next::RetryAfter(backoff)
    }
    // ANCHOR_END: decide
}

/// What the callers share: the retry throttle and the jitter's random numbers.
pub struct Shared {
    pub throttle: Mutex<RetryThrottle>,
    rng: Mutex<StdRng>,
}

impl Shared {
    pub fn new(throttle: RetryThrottle, seed: u64) -> Shared {
        Shared {
            throttle: Mutex::new(throttle),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }

    fn random(&self) -> f64 {
        self.rng.lock().unwrap().random::<f64>()
    }

    // ANCHOR: budget
    /// Every attempt's result goes into the bucket: a success deposits
    /// `ratio` of a token, a failure withdraws one. The answer: may a failed
    /// call retry now?
    pub fn attempt_ended(&self, ok: bool) -> bool {
        self.throttle.lock().unwrap().record(ok)
    }
    // ANCHOR_END: budget
}

/// How one call ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallResult {
    pub result: Result<(), Code>,
    /// Attempts made, the first included: the call's amplification.
    pub attempts: u32,
    /// Why a failed call stopped.
    pub stop: Option<Stop>,
}

/// One call: attempts until one succeeds or the rules say stop. `attempt`
/// makes one attempt with the time it is given (what is left of the deadline).
pub async fn call<F, Fut>(
    rules: &RetryRules,
    shared: &Shared,
    deadline: Instant,
    mut attempt: F,
) -> CallResult
where
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = Result<(), Code>>,
{
    let mut attempts = 0;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return CallResult {
                result: Err(Code::DeadlineExceeded),
                attempts,
                stop: (attempts > 0).then_some(Stop::Deadline),
            };
        }
        attempts += 1;
        let result = attempt(remaining).await;
        let allows = shared.attempt_ended(result.is_ok());
        let Err(code) = result else {
            return CallResult {
                result,
                attempts,
                stop: None,
            };
        };
        let left = deadline.saturating_duration_since(Instant::now());
        match rules.after_failure(attempts, code, left, allows, shared.random()) {
            Next::RetryAfter(pause) => sleep(pause).await,
            Next::Stop(stop) => {
                return CallResult {
                    result,
                    attempts,
                    stop: Some(stop),
                };
            }
        }
    }
}

/// Attempts per offered call: 1.0 means no call was retried.
pub fn amplification(attempts: impl IntoIterator<Item = u32>) -> f64 {
    let (calls, total) = attempts
        .into_iter()
        .fold((0u64, 0u64), |(c, t), a| (c + 1, t + a as u64));
    if calls == 0 {
        0.0
    } else {
        total as f64 / calls as f64
    }
}
