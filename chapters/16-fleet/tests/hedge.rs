//! The hedge against a scripted service on a paused clock, where "the first
//! call takes a second" is exact and costs nothing. Hedging is only cheap if
//! the losing copy is cancelled rather than left to run, and only safe if no
//! copy is sent once the caller has stopped waiting; both are checked here,
//! through `Hedged` and through the policy alone.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use fleet::{
    client::{Answer, Call},
    hedge::{BeforeDeadline, Hedged, PERIOD},
};
use grpc_server::testing::within;
use tokio::time::Instant;
use tonic::{Code, Status};
use tower::{Service, ServiceExt, hedge::Hedge, hedge::Policy};

/// How long the service takes to answer its `index`th call (from 0).
type Script = Arc<dyn Fn(usize, &Call) -> Duration + Send + Sync>;

/// A stand-in for a replica: answers each call after the time the script
/// gives it, as `call-INDEX`, and records what became of every call.
#[derive(Clone)]
struct Scripted {
    script: Script,
    log: Arc<Log>,
}

#[derive(Debug, Default)]
struct Log {
    received: AtomicUsize,
    answered: Mutex<Vec<usize>>,
    /// Calls whose future was dropped before it answered: cancelled.
    dropped: Mutex<Vec<usize>>,
}

impl Log {
    fn received(&self) -> usize {
        self.received.load(Ordering::SeqCst)
    }
    fn answered(&self) -> Vec<usize> {
        self.answered.lock().unwrap().clone()
    }
    fn dropped(&self) -> Vec<usize> {
        self.dropped.lock().unwrap().clone()
    }
}

impl Scripted {
    fn new(script: impl Fn(usize, &Call) -> Duration + Send + Sync + 'static) -> Scripted {
        Scripted {
            script: Arc::new(script),
            log: Arc::default(),
        }
    }
}

/// Travels inside a call's future: dropped unanswered means cancelled.
struct Unanswered {
    index: usize,
    answered: bool,
    log: Arc<Log>,
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        if !self.answered {
            self.log.dropped.lock().unwrap().push(self.index);
        }
    }
}

impl Service<Call> for Scripted {
    type Response = Answer;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, Status>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Call) -> Self::Future {
        let index = self.log.received.fetch_add(1, Ordering::SeqCst);
        let wait = (self.script)(index, &call);
        let mut guard = Unanswered {
            index,
            answered: false,
            log: self.log.clone(),
        };
        Box::pin(async move {
            tokio::time::sleep(wait).await;
            guard.answered = true;
            guard.log.answered.lock().unwrap().push(index);
            Ok(Answer {
                replica: format!("call-{index}"),
            })
        })
    }
}

/// A call that asks the service for `delay_ms` and waits `deadline` for it.
fn call(delay_ms: u32, deadline: Duration) -> Call {
    Call {
        name: "test".into(),
        delay_ms,
        deadline: Instant::now() + deadline,
    }
}

#[tokio::test(start_paused = true)]
async fn a_hedge_is_cancelled_when_the_first_answer_arrives() {
    // The original is stuck for a second; the copy answers in 10 ms.
    let service = Scripted::new(|index, _| match index {
        0 => Duration::from_secs(1),
        _ => Duration::from_millis(10),
    });
    let log = service.log.clone();
    // No minimum of data points: with an empty histogram, tower's hedge
    // delay is its 0th value, 0 ms (hdrhistogram's `value_at_quantile` of
    // an empty histogram), so the copy is sent at once.
    let hedged = Hedged::new(service, 0.5, 0);

    let answer = within(
        "a hedged call",
        hedged.call(call(0, Duration::from_secs(10))),
    )
    .await
    .expect("the copy's answer");
    assert_eq!(answer.replica, "call-1", "the faster copy's answer wins");
    assert_eq!(hedged.copies(), 1);
    assert_eq!(log.received(), 2);
    // The original was not left to run to its end: its future was dropped,
    // which over gRPC is the RST_STREAM that stops the server's work.
    assert_eq!(log.answered(), [1]);
    assert_eq!(log.dropped(), [0]);
}

#[tokio::test(start_paused = true)]
async fn no_copy_is_sent_for_a_call_whose_deadline_comes_first() {
    // Every call takes what it asks for, originals and copies alike.
    let service = Scripted::new(|_, call| Duration::from_millis(call.delay_ms.into()));
    let log = service.log.clone();
    let hedged = Hedged::new(service, 0.5, 5);

    // Six periods of 100 ms answers, one after the other: tower's rotating
    // histogram reads only the last full period, so it now holds about ten
    // 100 ms points, above the minimum of five, and the hedge delay (the
    // median) is 100 ms.
    for _ in 0..60 {
        within(
            "a call that teaches the histogram",
            hedged.call(call(100, Duration::from_secs(10))),
        )
        .await
        .expect("a 100 ms call is answered");
    }
    println!("copies while learning: {}", hedged.copies());
    let (copies, received) = (hedged.copies(), log.received());

    // A 20 ms deadline ends the call before the 100 ms hedge delay: the
    // caller hears DEADLINE_EXCEEDED and the service only ever saw the
    // original, which was cancelled.
    let late = within(
        "a call that outlives its deadline",
        hedged.call(call(10_000, Duration::from_millis(20))),
    )
    .await;
    assert_eq!(
        late.expect_err("answered after 10 s?").code(),
        Code::DeadlineExceeded
    );
    assert_eq!(
        hedged.copies(),
        copies,
        "a copy was sent after the deadline"
    );
    assert_eq!(log.received(), received + 1);
    assert_eq!(log.dropped().last(), Some(&received));

    // The hedge was armed all along: the same slow call with time left does
    // get its copy once it has waited the 100 ms.
    within(
        "a slow call with time left",
        hedged.call(call(1000, Duration::from_secs(10))),
    )
    .await
    .expect("the slow call is answered");
    assert_eq!(hedged.copies(), copies + 1);
    assert_eq!(log.received(), received + 3);
}

#[tokio::test(start_paused = true)]
async fn once_the_deadline_has_passed_the_hedge_waits_for_the_original() {
    // tower's Hedge without `Hedged`'s own timeout: only the policy can stop
    // the copy. An empty histogram makes the hedge delay 0, so the policy is
    // asked at once, and this call's deadline is already now.
    let service = Scripted::new(|_, _| Duration::from_millis(50));
    let log = service.log.clone();
    let policy = BeforeDeadline::default();
    let copies = policy.copies.clone();
    let mut hedge = Hedge::new::<Call>(service, policy, 0, 0.5, PERIOD);

    let past_due = Call {
        deadline: Instant::now(),
        ..call(0, Duration::ZERO)
    };
    let ready = within("the hedge is ready", hedge.ready())
        .await
        .expect("ready");
    let answer = within("the original's answer", ready.call(past_due))
        .await
        .expect("the original answers");
    assert_eq!(answer.replica, "call-0");
    assert_eq!(copies.load(Ordering::Relaxed), 0);
    assert_eq!(log.received(), 1, "a copy reached the service");
}

#[tokio::test(start_paused = true)]
async fn the_policy_allows_a_copy_only_while_time_is_left() {
    let policy = BeforeDeadline::default();
    let at = |deadline: Instant| Call {
        deadline,
        ..call(0, Duration::ZERO)
    };
    let now = Instant::now();
    // Every call may be copied; whether the copy goes is decided later.
    assert!(policy.clone_request(&at(now)).is_some());

    // The clock is paused, so "now" is exactly the deadline: no time left.
    assert!(!policy.can_retry(&at(now)));
    tokio::time::advance(Duration::from_millis(10)).await;
    assert!(!policy.can_retry(&at(now + Duration::from_millis(5))));
    assert_eq!(
        policy.copies.load(Ordering::Relaxed),
        0,
        "refused copies are not counted"
    );

    assert!(policy.can_retry(&at(Instant::now() + Duration::from_secs(1))));
    assert_eq!(policy.copies.load(Ordering::Relaxed), 1);
}
