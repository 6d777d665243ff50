//! What happens around the queue: a client that cancels mid-stream, a worker
//! that stops, and an unbounded queue under more load than its worker can
//! serve. Real service, real tonic, paused clock; assertions on counts and
//! orderings, none on how long anything took in real time.

mod common;

use std::{sync::Arc, time::Duration};

use ingest::service::{Ingestor, Policy};
use loadgen::{Outcome, Schedule};
use proto::ingest::v1::{Payload, ingest_client::IngestClient};
use tokio::{sync::mpsc, time::sleep};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

const RESERVE_4: Policy = Policy::Reserve {
    capacity: 4,
    budget: 4,
};

/// Waits (in virtual time) until `done` holds, checking every millisecond.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..600_000 {
        if done() {
            return;
        }
        sleep(Duration::from_millis(1)).await;
    }
    panic!("never happened: {what}");
}

#[test]
fn cancelling_the_stream_releases_every_reservation_and_the_worker_carries_on() {
    common::paused_runtime().block_on(async {
        let (ingestor, channel) = common::start(RESERVE_4, "50ms@0s").await;
        let gate = ingestor.gate().unwrap().clone();
        let mut client = IngestClient::new(channel);
        let (tx, rx) = mpsc::channel(1);
        let call = tokio::spawn(async move { client.ingest(ReceiverStream::new(rx)).await });
        // Offer far more than the worker can take: the handler fills the
        // budget and then sits holding a reservation, waiting for a message
        // or for room.
        let feeder = tokio::spawn(async move {
            for seq in 0.. {
                let payload = Payload {
                    seq,
                    data: vec![0; 512],
                };
                if tx.send(payload).await.is_err() {
                    return;
                }
                sleep(Duration::from_millis(5)).await;
            }
        });
        until("the queue is full", || ingestor.sample_now().queued == 4).await;
        assert_eq!(gate.pending(), 4);

        // The client goes away mid-stream: the whole call future is dropped.
        call.abort();
        feeder.abort();
        let _ = call.await;
        until("the handler has ended", || {
            *ingestor.calls_done.borrow() == 1
        })
        .await;

        // With the handler gone, nothing is reserved: pending is exactly
        // what is still queued, and it drains to zero as the worker serves.
        let s = ingestor.sample_now();
        assert_eq!(s.pending, s.queued, "{s:?}");
        assert!(s.queued > 0, "the cancel should leave work queued: {s:?}");
        until("the queue has drained", || {
            ingestor.sample_now().queued == 0
        })
        .await;
        assert_eq!(gate.pending(), 0);
        // Admitted work is still served, to the last message.
        until("every admitted message is served", || {
            let s = ingestor.sample_now();
            s.processed == s.received
        })
        .await;

        // A new call is served as before, and stop() ends the worker cleanly.
        let slots = Schedule::constant(20.0, Duration::from_millis(500)).slots();
        let channel = common::serve(ingestor.clone()).await;
        let run = common::call(channel, &slots, 256).await;
        assert_eq!(run.reply.expect("second call").processed, 10);
        tokio::time::timeout(Duration::from_secs(5), ingestor.stop())
            .await
            .expect("stop() returns");
    });
}

/// A worker that stops mid-call ends the call with UNAVAILABLE and says why;
/// the client does not hang. Both policies: the handler may be waiting for
/// room (reserve) or for the next message (either).
#[test]
fn a_stopped_worker_ends_the_call_with_unavailable() {
    for policy in [Policy::Unbounded, RESERVE_4] {
        common::paused_runtime().block_on(async {
            let (ingestor, channel) = common::start(policy, "30ms@0s").await;
            let stopper = {
                let ingestor: Arc<Ingestor> = ingestor.clone();
                tokio::spawn(async move {
                    sleep(Duration::from_secs(1)).await;
                    ingestor.stop().await;
                })
            };
            let slots = Schedule::constant(80.0, Duration::from_secs(5)).slots();
            let run =
                tokio::time::timeout(Duration::from_secs(60), common::call(channel, &slots, 1024))
                    .await
                    .expect("the call ends instead of hanging");
            stopper.await.unwrap();
            let status = run.reply.expect_err("the call cannot succeed");
            assert_eq!(status.code(), Code::Unavailable, "{policy:?}: {status:?}");
            assert!(
                status.message().contains("worker stopped"),
                "{policy:?}: {}",
                status.message()
            );
            // The client saw its stream close and stopped sending.
            assert!(
                run.records.iter().any(|r| r.outcome == Outcome::Aborted),
                "{policy:?}"
            );
        });
    }
}

/// 80 messages/s against a 40 ms worker (25/s): the unbounded queue grows by
/// about 55 a second and never stops the client; the reserve queue stays at
/// K and, once the HTTP/2 window is full too, the client skips slots instead
/// (6 s: 480 due, about 150 served, 8 queued, 64 in the window).
#[test]
fn an_unbounded_queue_grows_under_overload_and_a_reserved_one_does_not() {
    let slots = Schedule::constant(80.0, Duration::from_secs(6)).slots();
    let queued_at = |policy| {
        common::paused_runtime().block_on(async {
            let (ingestor, channel) = common::start(policy, "40ms@0s").await;
            // 16 KiB messages: hyper's 1 MiB stream window holds 64 of them.
            let run = common::call(channel, &slots, 16 * 1024).await;
            assert!(run.reply.is_ok(), "{:?}", run.reply);
            let samples = ingestor.recorder().samples();
            ingestor.stop().await;
            let skipped = run
                .records
                .iter()
                .filter(|r| r.outcome == Outcome::Skipped)
                .count();
            // Queue depth at each whole second of the sending phase.
            let depth: Vec<usize> = (1..=6)
                .map(|s| {
                    samples
                        .iter()
                        .rfind(|x| x.at <= Duration::from_secs(s))
                        .map_or(0, |x| x.queued)
                })
                .collect();
            let max_pending = samples.iter().map(|x| x.pending).max().unwrap_or(0);
            (depth, max_pending, skipped)
        })
    };

    let (depth, max_pending, skipped) = queued_at(Policy::Unbounded);
    assert_eq!(skipped, 0, "the unbounded handler reads everything at once");
    assert!(
        depth.windows(2).all(|w| w[1] > w[0]),
        "the queue grows every second: {depth:?}"
    );
    // Roughly linear: 55/s expected; accept anything from half to double.
    let slope = (depth[5] - depth[1]) as f64 / 4.0;
    assert!((27.0..=110.0).contains(&slope), "{slope}/s: {depth:?}");
    assert!(max_pending >= 200, "{max_pending}");

    let (depth, max_pending, skipped) = queued_at(Policy::Reserve {
        capacity: 8,
        budget: 8,
    });
    assert!(max_pending <= 8, "{max_pending}: {depth:?}");
    assert!(depth.iter().all(|d| *d <= 8), "{depth:?}");
    assert!(
        skipped > 100,
        "the waiting moved to the client: {skipped} skipped"
    );
}
