//! Chapter 13: drop on dequeue (the solution).
//!
//! A call is worth starting only if its work, begun now, ends before its
//! caller stops waiting; a call with no deadline always is. The oldest calls
//! expire first, so the worker drops from the front until it finds one.
//! (Chapter 13's server keeps a margin for the reply's way back as well; see
//! `overload::core::Core::can_finish`.)

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
    while let Some(job) = queue.pop_front() {
        if job
            .deadline
            .is_none_or(|deadline| now + service <= deadline)
        {
            return Some(job);
        }
        dropped.push(job);
    }
    None
}
// ANCHOR_END: take
