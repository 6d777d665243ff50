//! Chapter 11's exercise, `exercises::ch11::admit`, in virtual time: a stream
//! that counts the messages taken from it, a gate, and a worker that takes
//! messages only when the test says so.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use exercises::ch11::{Queued, admit};
use ingest::admission::Gate;
use tokio::{sync::mpsc, task::JoinHandle, time::sleep};
use tokio_stream::StreamExt;

/// `admit` over a stream of `messages` numbered messages and a gate of
/// `budget`, running in its own task; the counter says how many messages it
/// has taken out of the stream.
struct Call {
    taken: Arc<AtomicUsize>,
    gate: Arc<Gate>,
    queue: mpsc::UnboundedReceiver<Queued<u32>>,
    task: JoinHandle<usize>,
}

fn start(messages: u32, budget: usize) -> Call {
    let taken = Arc::new(AtomicUsize::new(0));
    let counter = taken.clone();
    let incoming = tokio_stream::iter(0..messages).map(move |message| {
        counter.fetch_add(1, Ordering::SeqCst);
        message
    });
    let gate = Gate::new(budget);
    let (tx, queue) = mpsc::unbounded_channel();
    let task = tokio::spawn(admit(incoming, gate.clone(), tx));
    Call {
        taken,
        gate,
        queue,
        task,
    }
}

impl Call {
    fn taken(&self) -> usize {
        self.taken.load(Ordering::SeqCst)
    }
}

/// Long enough, in virtual time, for `admit` to do all it can.
async fn settle() {
    sleep(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn with_the_budget_full_the_stream_is_not_read() {
    let call = start(10, 2);
    settle().await;
    assert_eq!(call.gate.pending(), 2);
    assert!(
        call.taken() <= 2,
        "still to do (ch11): with the budget of 2 full, admit took message {} out \
         of the stream and holds it, waiting for a place. Reserve a place before \
         asking the stream for the next message.",
        call.taken()
    );
    assert_eq!(call.taken(), 2, "admit should fill the budget");
}

#[tokio::test(start_paused = true)]
async fn each_place_the_worker_frees_lets_exactly_one_more_message_in() {
    let mut call = start(10, 2);
    settle().await;
    for freed in 1..=3 {
        // The worker takes the oldest message; its reservation goes with it.
        let (message, place) = call.queue.recv().await.expect("a queued message");
        assert_eq!(message, freed as u32 - 1, "messages keep their order");
        drop(place);
        settle().await;
        assert_eq!(
            call.taken(),
            2 + freed,
            "still to do (ch11): after the worker freed {freed} place(s) under a \
             budget of 2, admit should have taken {} messages from the stream; \
             a message must not leave the stream before its place is reserved.",
            2 + freed
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_end_of_the_stream_gives_back_the_place_it_reserved() {
    let mut call = start(1, 4);
    let admitted = tokio::time::timeout(Duration::from_secs(5), &mut call.task)
        .await
        .expect("admit returns when the stream ends")
        .unwrap();
    assert_eq!(admitted, 1);
    // Only the queued message holds a place; the one reserved for a message
    // that never came was given back.
    assert_eq!(call.gate.pending(), 1);
    call.queue.recv().await.unwrap();
    assert_eq!(call.gate.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_worker_that_has_gone_ends_the_call_even_with_the_budget_full() {
    let call = start(10, 2);
    settle().await;
    drop(call.queue);
    let admitted = tokio::time::timeout(Duration::from_secs(5), call.task)
        .await
        .expect("admit stops waiting for a place once the worker has gone")
        .unwrap();
    assert_eq!(admitted, 2);
}
