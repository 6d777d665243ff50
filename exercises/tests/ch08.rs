//! Chapter 8's exercise, `exercises::ch08::count_down`, in virtual time: the
//! producer runs in its own task, as the handler spawns it, and the test plays
//! the client, reading ticks from the channel and then going away (dropping
//! the receiver, as hyper does when a call is cancelled).

use std::time::Duration;

use exercises::ch08::{TICK_OVERHEAD_BYTES, count_down};
use proto::streaming::v1::{CountdownRequest, Tick};
use streaming::{budget::ReplyBudget, service::REPLY_QUEUE};
use tokio::{
    sync::mpsc,
    task::JoinHandle,
    time::{sleep, timeout},
};
use tonic::Status;

type Replies = mpsc::Receiver<streaming::budget::Reply<Result<Tick, Status>>>;

/// A Countdown's producer in its own task, with the service's one-reply
/// channel and a reply budget of `budget_bytes`.
fn start(count: u32, interval_ms: u32, payload_bytes: u32, budget_bytes: usize) -> Call {
    let budget = ReplyBudget::new(budget_bytes, budget_bytes);
    let (tx, replies) = mpsc::channel(REPLY_QUEUE);
    let request = CountdownRequest {
        count,
        interval_ms,
        payload_bytes,
    };
    let producer = tokio::spawn(count_down(request, tx, budget.share(None)));
    Call {
        budget,
        replies,
        producer,
    }
}

struct Call {
    budget: ReplyBudget,
    replies: Replies,
    producer: JoinHandle<u32>,
}

/// Generous enough for any test's producer, never a budget that runs out.
const PLENTY: usize = 1 << 30;

#[tokio::test(start_paused = true)]
async fn a_client_that_reads_everything_gets_every_tick_in_order() {
    let mut call = start(5, 100, 8, PLENTY);
    let mut seen = Vec::new();
    for _ in 0..10 {
        let Some((tick, permit)) = call.replies.recv().await else {
            break;
        };
        let tick = tick.expect("a tick, not an error");
        assert_eq!(tick.payload.len(), 8);
        assert!(permit.is_some(), "every tick is paid for from the budget");
        seen.push(tick.remaining);
    }
    assert_eq!(seen, [4, 3, 2, 1, 0], "five ticks, counting down to 0");
    let made = timeout(Duration::from_secs(5), call.producer)
        .await
        .expect("the producer ends after its last tick")
        .unwrap();
    assert_eq!(made, 5);
    assert_eq!(
        call.budget.held_bytes(),
        0,
        "the permits went with the ticks"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_send_ends_the_producer() {
    // No pause between ticks: the producer only ever waits in `send`.
    let mut call = start(1_000, 0, 0, PLENTY);
    for _ in 0..3 {
        let _tick = call.replies.recv().await.expect("a tick");
    }
    drop(call.replies);
    let made = timeout(Duration::from_secs(5), call.producer)
        .await
        .expect("a producer with no pauses runs to its end either way")
        .unwrap();
    // 3 read, 1 in the channel, 1 in the send that failed.
    assert!(
        made <= 5,
        "still to do (ch08): the client went away after 3 ticks, yet the producer \
         made {made} of 1000, every one after the fifth for nobody. Return as \
         soon as `tx.send` fails: it fails once the receiver has been dropped."
    );
}

#[tokio::test(start_paused = true)]
async fn a_client_that_goes_away_between_ticks_ends_the_producer_at_once() {
    // One tick a second: after the third, the producer sleeps toward the fourth.
    let mut call = start(20, 1_000, 0, PLENTY);
    for _ in 0..3 {
        let _tick = call.replies.recv().await.expect("a tick");
    }
    drop(call.replies);
    let ended = timeout(Duration::from_millis(500), &mut call.producer).await;
    assert!(
        ended.is_ok(),
        "still to do (ch08): half a second after the client went away, the \
         producer was still sleeping toward its next tick, and would have gone on \
         for another 17 seconds. A sleep does not notice that the receiver is \
         gone: wait in a `tokio::select!` on the sleep and `tx.closed()`."
    );
    let made = ended.unwrap().unwrap();
    assert_eq!(made, 3, "no tick is made after the client has gone");
}

#[tokio::test(start_paused = true)]
async fn a_client_that_stops_reading_and_then_goes_away_frees_the_producer() {
    // A budget of exactly two ticks, which the client receives and keeps.
    let tick_bytes = TICK_OVERHEAD_BYTES + 100;
    let mut call = start(10, 0, 100, 2 * tick_bytes);
    let mut kept = Vec::new();
    for _ in 0..2 {
        kept.push(call.replies.recv().await.expect("a tick"));
    }
    // The producer now waits for room in the budget, which only `kept` can free.
    sleep(Duration::from_secs(1)).await;
    assert_eq!(call.budget.held_bytes(), 2 * tick_bytes);
    drop(call.replies);
    let ended = timeout(Duration::from_secs(5), &mut call.producer).await;
    assert!(
        ended.is_ok(),
        "still to do (ch08): the client went away with the reply budget full, and \
         the producer is still waiting in `share.reserve` for room that nobody \
         will make. Wait for the budget in a `tokio::select!` with `tx.closed()` \
         too."
    );
    assert_eq!(ended.unwrap().unwrap(), 2);
    drop(kept);
    assert_eq!(call.budget.held_bytes(), 0);
}
