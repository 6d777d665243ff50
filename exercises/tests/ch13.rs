//! Chapter 13's exercise, `exercises::ch13::take`: queues of calls with
//! scripted deadlines, and a clock that is only ever passed in.

use std::{collections::VecDeque, time::Duration};

use exercises::ch13::take;
use overload::core::Job;
use tokio::time::Instant;

const SERVICE: Duration = Duration::from_millis(10);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Call `id`, which arrived at `t0` and whose caller waits until `t0 +
/// deadline_ms` (for ever with `None`).
fn call(t0: Instant, id: u32, deadline_ms: Option<u64>) -> Job<u32> {
    Job {
        arrived: t0,
        deadline: deadline_ms.map(|d| t0 + ms(d)),
        reply: id,
    }
}

fn ids(jobs: &[Job<u32>]) -> Vec<u32> {
    jobs.iter().map(|j| j.reply).collect()
}

#[test]
fn a_call_whose_caller_has_given_up_is_dropped_not_served() {
    let t0 = Instant::now();
    // At 100 ms, call 0's caller gave up 50 ms ago; call 1's waits until 500 ms.
    let mut queue = VecDeque::from([call(t0, 0, Some(50)), call(t0, 1, Some(500))]);
    let mut dropped = Vec::new();
    let served = take(&mut queue, t0 + ms(100), SERVICE, &mut dropped).map(|j| j.reply);
    assert_ne!(
        served,
        Some(0),
        "still to do (ch13): the worker started call 0 at 100 ms although its \
         caller stopped waiting at 50 ms. Drop such a call into `dropped` and \
         take the next one."
    );
    assert_eq!(served, Some(1));
    assert_eq!(ids(&dropped), [0]);
    assert!(queue.is_empty());
}

#[test]
fn a_call_that_cannot_finish_before_its_deadline_is_dropped_too() {
    let t0 = Instant::now();
    // Call 0's deadline is 5 ms away, but its work takes 10 ms.
    let mut queue = VecDeque::from([call(t0, 0, Some(105)), call(t0, 1, Some(110))]);
    let mut dropped = Vec::new();
    let served = take(&mut queue, t0 + ms(100), SERVICE, &mut dropped).map(|j| j.reply);
    assert_eq!(
        served,
        Some(1),
        "still to do (ch13): call 0's deadline is 5 ms away and its work takes \
         10 ms, so its answer would come too late. Start a call only if \
         `now + service` is at or before its deadline (call 1's ends exactly \
         at its own, in time)."
    );
    assert_eq!(ids(&dropped), [0]);
}

#[test]
fn calls_without_a_deadline_are_always_served_and_the_rest_keep_their_order() {
    let t0 = Instant::now();
    let mut queue = VecDeque::from([
        call(t0, 0, None),
        call(t0, 1, Some(1_000)),
        call(t0, 2, None),
    ]);
    let mut dropped = Vec::new();
    let now = t0 + ms(60_000);
    let served = take(&mut queue, now, SERVICE, &mut dropped).map(|j| j.reply);
    assert_eq!(served, Some(0), "a call with no deadline can always finish");
    assert_eq!(
        ids(queue.make_contiguous()),
        [1, 2],
        "the others wait, in order"
    );
    assert!(
        dropped.is_empty(),
        "nothing is dropped before the call served"
    );
    let served = take(&mut queue, now, SERVICE, &mut dropped).map(|j| j.reply);
    assert_eq!(
        served,
        Some(2),
        "still to do (ch13): call 1's caller stopped waiting at 1 s and it is now \
         60 s; drop it and serve call 2, which has no deadline"
    );
    assert_eq!(ids(&dropped), [1]);
}

#[test]
fn a_queue_of_expired_calls_gives_the_worker_nothing_and_empties() {
    let t0 = Instant::now();
    let mut queue: VecDeque<_> = (0..5).map(|id| call(t0, id, Some(20))).collect();
    let mut dropped = Vec::new();
    let served = take(&mut queue, t0 + ms(30), SERVICE, &mut dropped).map(|j| j.reply);
    assert_eq!(
        served, None,
        "still to do (ch13): every call's deadline had passed, so the worker \
         should start none of them"
    );
    assert_eq!(ids(&dropped), [0, 1, 2, 3, 4], "all dropped, oldest first");
    assert!(queue.is_empty());
    assert!(take(&mut queue, t0 + ms(30), SERVICE, &mut dropped).is_none());
}
