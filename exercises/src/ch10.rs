//! Chapter 10: a timeout per attempt, inside one deadline.
//!
//! `call_with_retries` makes one call with retries, under the rules of the
//! chapter's `budgeted` policy (backoff aside, and idempotency: the caller
//! decides that, and calls this only for a call that is safe to send twice):
//! one overall deadline, no attempt started once it has passed, only
//! UNAVAILABLE and DEADLINE_EXCEEDED retried, and every attempt's outcome
//! recorded in a retry budget shared by all calls to the server (the
//! chapter's `RetryThrottle`). DEADLINE_EXCEEDED is worth a retry here, unlike
//! in the chapter's naive storm, because of the rule still missing below: an
//! attempt ended by its own timeout, a fraction of the deadline, leaves the
//! call time for another, and the budget bounds how many. What this version
//! leaves out is the attempt's own timeout: it gives each attempt all that is
//! left of the deadline, so one attempt that hangs uses up the whole call and
//! no retry is ever made. Give each attempt at most `per_attempt`, capped by
//! what is left, and retry an attempt that ran out of it.
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch10`.

use std::{future::Future, sync::Mutex, time::Duration};

use perf::retry::RetryThrottle;
use tokio::time::{Instant, timeout_at};
use tonic::{Code, Status};

/// The codes worth another attempt: the server was not reached or did not
/// answer in time. Any other answer would be the same the second time.
pub fn retryable(code: Code) -> bool {
    matches!(code, Code::Unavailable | Code::DeadlineExceeded)
}

// ANCHOR: call_with_retries
/// Calls `attempt` until it succeeds, at most `max_attempts` times (at least
/// once), retrying only failures that are [`retryable`] while the budget
/// allows and `deadline` has not passed. `attempt` is given its timeout, to
/// send as the request's `grpc-timeout`; it is also cut off when that runs out.
pub async fn call_with_retries<T, F, Fut>(
    deadline: Instant,
    per_attempt: Duration,
    max_attempts: u32,
    budget: &Mutex<RetryThrottle>,
    mut attempt: F,
) -> Result<T, Status>
where
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = Result<T, Status>>,
{
    let _ = per_attempt; // not used yet
    let mut attempts = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Status::deadline_exceeded(format!(
                "the call's deadline passed after {attempts} attempt(s)"
            )));
        }
        attempts += 1;
        let result = match timeout_at(deadline, attempt(left)).await {
            Ok(result) => result,
            Err(_) => Err(Status::deadline_exceeded(format!(
                "attempt {attempts} did not answer within {} ms",
                left.as_millis()
            ))),
        };
        // Successes refill the budget, failures drain it, whatever the code.
        let budget_allows = budget.lock().unwrap().record(result.is_ok());
        let status = match result {
            Ok(reply) => return Ok(reply),
            Err(status) => status,
        };
        if !retryable(status.code()) || attempts >= max_attempts || !budget_allows {
            return Err(status);
        }
    }
}
// ANCHOR_END: call_with_retries
