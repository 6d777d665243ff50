//! Chapter 16: a hedge that stays inside its deadline.
//!
//! `hedged` sends a call, and when no answer has come after `delay`, a second
//! copy; whichever answers first is the answer, and the other is dropped
//! (cancelled). This version hedges as if the call had no deadline: it sends
//! a copy whenever the delay passes, hands the copy the timeout the call
//! started with, and waits for an answer however long it takes. Make it keep
//! the chapter's rule (`fleet::hedge`): no copy once the deadline has passed,
//! each copy carries only the time that is left, and the call ends at its
//! deadline with DEADLINE_EXCEEDED.
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch16`.

use std::{future::Future, time::Duration};

use fleet::client::{Answer, Call};
use tokio::time::{Instant, sleep};
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
    let timeout = call.deadline.saturating_duration_since(Instant::now());
    let first = send(call.clone(), timeout);
    tokio::pin!(first);
    tokio::select! {
        answer = &mut first => return answer,
        () = sleep(delay) => {}
    }
    // No answer yet: a copy, and whichever answers first.
    let copy = send(call, timeout);
    tokio::select! {
        answer = &mut first => answer,
        answer = copy => answer,
    }
}
// ANCHOR_END: hedged
