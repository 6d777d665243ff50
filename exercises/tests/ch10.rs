//! Chapter 10's exercise, `exercises::ch10::call_with_retries`, in virtual
//! time, against a scripted server: each attempt answers, fails at once, fails
//! after a while, or never answers, as its script says, and the test records
//! when each attempt started and the timeout it was given.

use std::{sync::Mutex, time::Duration};

use exercises::ch10::call_with_retries;
use perf::retry::RetryThrottle;
use tokio::time::{Instant, sleep};
use tonic::{Code, Status};

#[derive(Clone, Copy, Debug)]
enum Step {
    /// Succeeds at once with this value.
    Answer(u32),
    /// Fails at once with this code.
    Fail(Code),
    /// Fails with this code after this many milliseconds.
    FailAfter(u64, Code),
    /// Never answers.
    Hang,
}

/// One attempt as the server saw it: when it started, in milliseconds from
/// the start of the call, and the timeout it was given.
#[derive(Debug, PartialEq)]
struct Attempt {
    at_ms: u128,
    timeout_ms: u128,
}

struct Outcome {
    result: Result<u32, Status>,
    attempts: Vec<Attempt>,
    /// When the call returned, in milliseconds from its start.
    ended_ms: u128,
}

impl Outcome {
    fn started_at(&self) -> Vec<u128> {
        self.attempts.iter().map(|a| a.at_ms).collect()
    }
    fn timeouts(&self) -> Vec<u128> {
        self.attempts.iter().map(|a| a.timeout_ms).collect()
    }
    fn code(&self) -> Code {
        match &self.result {
            Ok(_) => Code::Ok,
            Err(status) => status.code(),
        }
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One call with a deadline of `deadline_ms` and attempts of at most
/// `per_attempt_ms`; attempt n follows `script[n]`, or its last step.
async fn call(
    script: &[Step],
    deadline_ms: u64,
    per_attempt_ms: u64,
    max_attempts: u32,
    budget: &Mutex<RetryThrottle>,
) -> Outcome {
    let start = Instant::now();
    let mut attempts = Vec::new();
    let result = call_with_retries(
        start + ms(deadline_ms),
        ms(per_attempt_ms),
        max_attempts,
        budget,
        |timeout| {
            let step = script[attempts.len().min(script.len() - 1)];
            attempts.push(Attempt {
                at_ms: start.elapsed().as_millis(),
                timeout_ms: timeout.as_millis(),
            });
            async move {
                match step {
                    Step::Answer(value) => Ok(value),
                    Step::Fail(code) => Err(Status::new(code, "scripted")),
                    Step::FailAfter(after, code) => {
                        sleep(ms(after)).await;
                        Err(Status::new(code, "scripted"))
                    }
                    Step::Hang => std::future::pending().await,
                }
            }
        },
    )
    .await;
    Outcome {
        result,
        attempts,
        ended_ms: start.elapsed().as_millis(),
    }
}

/// A budget too large to run out in any test.
fn ample() -> Mutex<RetryThrottle> {
    Mutex::new(RetryThrottle::new(1_000.0, 0.1))
}

#[tokio::test(start_paused = true)]
async fn a_hung_attempt_is_cut_off_and_retried_in_time() {
    let budget = ample();
    let out = call(&[Step::Hang, Step::Answer(7)], 300, 100, 5, &budget).await;
    assert_eq!(
        out.started_at(),
        [0, 100],
        "still to do (ch10): the first attempt never answered and was given the \
         whole 300 ms deadline, so no second attempt could start. Give each \
         attempt at most `per_attempt` (100 ms here), so that a hung one leaves \
         time for a retry."
    );
    assert_eq!(out.result.as_ref().ok(), Some(&7));
    assert_eq!(out.timeouts(), [100, 100]);
    assert_eq!(out.ended_ms, 100);
}

#[tokio::test(start_paused = true)]
async fn each_attempt_gets_its_own_timeout_capped_by_what_is_left() {
    let budget = ample();
    let out = call(&[Step::Hang], 250, 100, 10, &budget).await;
    assert_eq!(
        out.timeouts(),
        [100, 100, 50],
        "still to do (ch10): with a 250 ms deadline and 100 ms per attempt, \
         three attempts should start, the last one given the 50 ms that are \
         left: `per_attempt.min(left)`, both for the timer and for the timeout \
         the attempt is given."
    );
    assert_eq!(out.started_at(), [0, 100, 200]);
    assert_eq!(out.code(), Code::DeadlineExceeded);
    assert_eq!(out.ended_ms, 250, "no attempt starts at the deadline");
}

#[tokio::test(start_paused = true)]
async fn no_attempt_starts_once_the_deadline_has_passed() {
    let budget = ample();
    // Each attempt fails after 120 ms: the third is cut off at 300 ms.
    let slow = Step::FailAfter(120, Code::Unavailable);
    let out = call(&[slow], 300, 200, 10, &budget).await;
    assert_eq!(out.started_at(), [0, 120, 240]);
    assert_eq!(out.code(), Code::DeadlineExceeded);
    assert_eq!(out.ended_ms, 300);
    assert_eq!(
        out.timeouts(),
        [200, 180, 60],
        "still to do (ch10): each attempt should be given 200 ms or what is left \
         of the 300 ms deadline, whichever is shorter"
    );
}

#[tokio::test(start_paused = true)]
async fn only_unavailable_and_deadline_exceeded_are_retried() {
    for code in [Code::Unavailable, Code::DeadlineExceeded] {
        let budget = ample();
        let out = call(&[Step::Fail(code), Step::Answer(1)], 300, 100, 5, &budget).await;
        assert_eq!(out.attempts.len(), 2, "{code:?} is retried");
        assert_eq!(out.result.as_ref().ok(), Some(&1));
    }
    for code in [
        Code::InvalidArgument,
        Code::NotFound,
        Code::PermissionDenied,
        Code::FailedPrecondition,
        Code::Unimplemented,
        Code::Internal,
    ] {
        let budget = ample();
        let out = call(&[Step::Fail(code), Step::Answer(1)], 300, 100, 5, &budget).await;
        assert_eq!(out.attempts.len(), 1, "{code:?} is not retried");
        assert_eq!(out.code(), code, "the attempt's own status is returned");
    }
}

#[tokio::test(start_paused = true)]
async fn max_attempts_bounds_the_attempts_and_the_first_is_always_made() {
    let budget = ample();
    let failing = [Step::Fail(Code::Unavailable)];
    let out = call(&failing, 1_000, 100, 3, &budget).await;
    assert_eq!(out.attempts.len(), 3);
    assert_eq!(out.code(), Code::Unavailable, "the last attempt's status");
    let out = call(&failing, 1_000, 100, 0, &budget).await;
    assert_eq!(out.attempts.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_call_whose_deadline_has_already_passed_makes_no_attempt() {
    let budget = ample();
    let out = call(&[Step::Answer(1)], 0, 100, 5, &budget).await;
    assert!(out.attempts.is_empty(), "no attempt without time left");
    assert_eq!(out.code(), Code::DeadlineExceeded);
}

#[tokio::test(start_paused = true)]
async fn an_empty_budget_stops_retries_for_every_call_until_successes_refill_it() {
    // gRFC A6's example: 10 tokens, a tenth of one back per success, no
    // retries while 5 or fewer are left.
    let budget = Mutex::new(RetryThrottle::a6_example());
    let failing = [Step::Fail(Code::Unavailable)];
    let out = call(&failing, 1_000, 100, 100, &budget).await;
    assert_eq!(
        out.attempts.len(),
        5,
        "10 tokens, 5 failures, then no retry"
    );
    let out = call(&failing, 1_000, 100, 100, &budget).await;
    assert_eq!(out.attempts.len(), 1, "the budget is shared by later calls");
    for _ in 0..35 {
        let out = call(&[Step::Answer(1)], 1_000, 100, 100, &budget).await;
        assert_eq!(out.attempts.len(), 1);
    }
    // 4 tokens left after the second call, plus 3.5.
    let out = call(&failing, 1_000, 100, 100, &budget).await;
    assert_eq!(out.attempts.len(), 3, "successes refilled the budget");
}

#[tokio::test(start_paused = true)]
async fn attempts_that_time_out_drain_the_budget_too() {
    // 4 tokens: retries stop once 2 or fewer are left, after two failures.
    let budget = Mutex::new(RetryThrottle::new(4.0, 0.1));
    let out = call(&[Step::Hang], 1_000, 100, 10, &budget).await;
    assert_eq!(
        out.attempts.len(),
        2,
        "still to do (ch10): with 100 ms per attempt, the first hung attempt \
         should time out at 100 ms and be retried, and the second's failure \
         empty the budget; instead {} attempt(s) were made, ending at {} ms",
        out.attempts.len(),
        out.ended_ms
    );
    assert_eq!(out.ended_ms, 200);
    assert_eq!(out.code(), Code::DeadlineExceeded);
    assert_eq!(budget.lock().unwrap().tokens(), 2.0);
}
