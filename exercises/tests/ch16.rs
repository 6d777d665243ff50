//! Chapter 16's exercise, `exercises::ch16::hedged`, on a paused clock,
//! against scripted replicas: copy n answers after `latencies[n]` whatever
//! timeout it was handed (a replica that never checks its deadline, like
//! chapter 5's before its exercise), and the test records when each copy
//! was sent, the timeout it carried, and whether it was cancelled.

use std::{cell::RefCell, time::Duration};

use exercises::ch16::hedged;
use fleet::client::{Answer, Call};
use tokio::time::{Instant, sleep};
use tonic::Code;

/// One copy as the replicas saw it, in milliseconds from the call's start.
#[derive(Debug)]
struct Sent {
    sent_ms: u128,
    timeout_ms: u128,
    cancelled: bool,
}

struct Outcome {
    /// Who answered (`copy-N`), or the status's code.
    result: Result<String, Code>,
    ended_ms: u128,
    copies: Vec<Sent>,
}

impl Outcome {
    fn timeouts(&self) -> Vec<u128> {
        self.copies.iter().map(|c| c.timeout_ms).collect()
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Marks a copy cancelled if its future is dropped before it answers.
struct Pending<'a> {
    log: &'a RefCell<Vec<Sent>>,
    index: usize,
    answered: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.log.borrow_mut()[self.index].cancelled = true;
        }
    }
}

/// One call due to end `deadline_ms` after it starts, hedged after
/// `delay_ms`, against replicas that take `latencies` (in order of sending).
async fn call(latencies: &[u64], delay_ms: u64, deadline_ms: u64) -> Outcome {
    let start = Instant::now();
    let call = Call {
        name: "Ada".into(),
        delay_ms: 0,
        deadline: start + ms(deadline_ms),
    };
    let log = RefCell::new(Vec::new());
    let result = hedged(call, ms(delay_ms), |_call, timeout| {
        let index = log.borrow().len();
        log.borrow_mut().push(Sent {
            sent_ms: start.elapsed().as_millis(),
            timeout_ms: timeout.as_millis(),
            cancelled: false,
        });
        let pending = Pending {
            log: &log,
            index,
            answered: false,
        };
        let latency = ms(latencies[index.min(latencies.len() - 1)]);
        async move {
            // The whole guard, not only its field, travels in the future.
            let mut pending = pending;
            sleep(latency).await;
            pending.answered = true;
            Ok(Answer {
                replica: format!("copy-{index}"),
            })
        }
    })
    .await;
    Outcome {
        result: result.map(|a| a.replica).map_err(|s| s.code()),
        ended_ms: start.elapsed().as_millis(),
        copies: log.into_inner(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_fast_answer_sends_no_copy() {
    let out = call(&[10], 30, 100).await;
    assert_eq!(out.result, Ok("copy-0".into()));
    assert_eq!(out.ended_ms, 10);
    assert_eq!(out.copies.len(), 1, "no copy before the delay");
    assert_eq!(
        out.timeouts(),
        [100],
        "the first copy carries the whole deadline"
    );
}

#[tokio::test(start_paused = true)]
async fn the_first_answer_wins_and_the_other_copy_is_cancelled() {
    // The first copy would answer at 80 ms; the second, sent at 30 ms, at 40 ms.
    let out = call(&[80, 10], 30, 100).await;
    assert_eq!(out.result, Ok("copy-1".into()));
    assert_eq!(out.ended_ms, 40);
    assert_eq!(out.copies.len(), 2);
    assert_eq!(out.copies[1].sent_ms, 30);
    assert!(out.copies[0].cancelled, "the slower copy is dropped");
    assert!(!out.copies[1].cancelled);
}

#[tokio::test(start_paused = true)]
async fn a_copy_carries_only_the_time_that_is_left() {
    let out = call(&[80, 10], 30, 100).await;
    assert_eq!(
        out.timeouts(),
        [100, 70],
        "still to do (ch16): the copies carried timeouts of {:?} ms; the copy sent \
         at 30 ms may then be worked on past the call's 100 ms deadline. A copy \
         sent later carries only what is left of the deadline",
        out.timeouts()
    );
}

#[tokio::test(start_paused = true)]
async fn the_call_ends_at_its_deadline() {
    // Both copies are slower than the deadline.
    let out = call(&[200, 200], 30, 100).await;
    assert_eq!(
        (&out.result, out.ended_ms),
        (&Err(Code::DeadlineExceeded), 100),
        "still to do (ch16): the call ended at {} ms with {:?}, but its caller \
         stopped waiting at 100 ms; end the call at its deadline with \
         DEADLINE_EXCEEDED, whatever the replicas do with their timeouts",
        out.ended_ms,
        out.result
    );
    assert!(
        out.copies.iter().all(|c| c.cancelled),
        "both copies are cancelled"
    );
}

#[tokio::test(start_paused = true)]
async fn no_copy_when_the_delay_ends_after_the_deadline() {
    // The hedge delay, 80 ms, is longer than the 50 ms the call has.
    let out = call(&[200, 200], 80, 50).await;
    let sent: Vec<u128> = out.copies.iter().map(|c| c.sent_ms).collect();
    assert_eq!(
        sent,
        [0],
        "still to do (ch16): copies were sent at {sent:?} ms, for a call whose \
         deadline is 50 ms; a copy after the deadline is load that no caller \
         waits for"
    );
    assert_eq!(out.result, Err(Code::DeadlineExceeded));
    assert_eq!(out.ended_ms, 50);
}

#[tokio::test(start_paused = true)]
async fn a_call_already_late_sends_nothing() {
    let start = Instant::now();
    let call = Call {
        name: "Ada".into(),
        delay_ms: 0,
        deadline: start + ms(20),
    };
    // It waited 30 ms for a replica: its deadline passed 10 ms ago.
    sleep(ms(30)).await;
    let mut sent = Vec::new();
    let result = hedged(call, ms(30), |_call, timeout| {
        sent.push(timeout.as_millis());
        async {
            Ok(Answer {
                replica: "copy-0".into(),
            })
        }
    })
    .await;
    assert!(
        sent.is_empty(),
        "still to do (ch16): a call whose deadline passed before it was sent went \
         out anyway, with timeouts {sent:?} ms; with no time left, send nothing \
         and fail with DEADLINE_EXCEEDED"
    );
    assert_eq!(
        result.map_err(|s| s.code()).err(),
        Some(Code::DeadlineExceeded)
    );
    assert_eq!(start.elapsed(), ms(30), "and at once");
}
