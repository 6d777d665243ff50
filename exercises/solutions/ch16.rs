//! Chapter 16: a hedge that stays inside its deadline (the solution).
//!
//! The rule of `fleet::hedge` in one place: the chapter splits it between the
//! policy (`BeforeDeadline::can_retry`: no copy after the deadline), the
//! `Caller` (each copy sends the time left) and `Hedged::call` (the bound).

use std::{future::Future, time::Duration};

use fleet::client::{Answer, Call};
use tokio::time::{Instant, sleep, timeout_at};
use tonic::Status;

// ANCHOR: hedged
/// Sends `call` through `send`, and a copy if no answer has come after
/// `delay`; the first answer wins. `send` is given the copy's timeout, to
/// send as its `grpc-timeout` (the replicas answer when they answer).
pub async fn hedged<F, Fut>(call: Call, delay: Duration, mut send: F) -> Result<Answer, Status>
where
    F: FnMut(Call, Duration) -> Fut,
    Fut: Future<Output = Result<Answer, Status>>,
{
    let deadline = call.deadline;
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Status::deadline_exceeded("no time left to send the call"));
    }
    let race = async {
        let first = send(call.clone(), left);
        tokio::pin!(first);
        tokio::select! {
            answer = &mut first => return answer,
            () = sleep(delay) => {}
        }
        // The delay has passed: a copy only if there is time left, and only that.
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return first.await;
        }
        let copy = send(call, left);
        tokio::select! {
            answer = &mut first => answer,
            answer = copy => answer,
        }
    };
    // Whatever the replicas do with their timeouts, the caller stops here.
    timeout_at(deadline, race)
        .await
        .unwrap_or_else(|_| Err(Status::deadline_exceeded("the deadline passed")))
}
// ANCHOR_END: hedged
