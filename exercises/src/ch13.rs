//! Chapter 13: drop on dequeue.
//!
//! A free worker takes the oldest waiting call. Under overload a call can wait
//! so long that its caller has given up (its deadline has passed), or will
//! have by the time the work ends; serving it is wasted work, and it makes
//! every call behind it later too. This version serves whatever is oldest.
//! Make it throw such calls away, unworked, into `dropped`, and serve the
//! oldest call that can still finish in time.
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch13`.

use std::{collections::VecDeque, time::Duration};

use overload::core::Job;
use tokio::time::Instant;

// ANCHOR: take
/// The call a worker free at `now` starts on, if any, where one call's work
/// takes `service`. Calls it throws away are pushed onto `dropped`, oldest
/// first; the others stay in `queue`, in order.
pub fn take<T>(
    queue: &mut VecDeque<Job<T>>,
    now: Instant,
    service: Duration,
    dropped: &mut Vec<Job<T>>,
) -> Option<Job<T>> {
    let _ = (now, service, dropped); // not used yet
    queue.pop_front()
}
// ANCHOR_END: take
