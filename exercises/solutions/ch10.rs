//! Chapter 10: a timeout per attempt, inside one deadline (the solution).
//!
//! Each attempt gets `per_attempt` or what is left of the deadline, whichever
//! is shorter. An attempt that runs out of its own time fails with
//! DEADLINE_EXCEEDED and is retried if the call still has time; once the
//! call's deadline has passed, no attempt starts.

use std::{future::Future, sync::Mutex, time::Duration};

use perf::retry::RetryThrottle;
use tokio::time::{Instant, timeout};
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
    let mut attempts = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Status::deadline_exceeded(format!(
                "the call's deadline passed after {attempts} attempt(s)"
            )));
        }
        // Shorter than the deadline, so that a hung attempt leaves time for
        // another; never longer than what is left, so the last one ends with
        // the call.
        let limit = per_attempt.min(left);
        attempts += 1;
        let result = match timeout(limit, attempt(limit)).await {
            Ok(result) => result,
            Err(_) => Err(Status::deadline_exceeded(format!(
                "attempt {attempts} did not answer within {} ms",
                limit.as_millis()
            ))),
        };
        // Successes refill the budget, failures drain it, whatever the code.
        let budget_allows = budget.lock().unwrap().record(result.is_ok());
        let status = match result {
            Ok(reply) => return Ok(reply),
            Err(status) => status,
        };
        // An attempt's DEADLINE_EXCEEDED is retried; the call's is caught at
        // the top of the loop, where no time is left.
        if !retryable(status.code()) || attempts >= max_attempts || !budget_allows {
            return Err(status);
        }
    }
}
// ANCHOR_END: call_with_retries
