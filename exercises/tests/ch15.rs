//! Chapter 15's exercise, `exercises::ch15::due`: chunks with scripted
//! arrival times and delays, on a clock that is only ever passed in.

use std::time::Duration;

use exercises::ch15::due;
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_chunk_leaves_one_delay_after_it_arrived() {
    let t0 = Instant::now();
    assert_eq!(due(t0 + ms(5), ms(10), t0, t0), t0 + ms(15));
}

#[test]
fn jitter_never_lets_a_chunk_overtake_the_one_before() {
    let t0 = Instant::now();
    // Chunk 1 arrived at 0 ms and drew 40 ms: it leaves at 40 ms. Chunk 2
    // arrived at 1 ms and drew 5 ms; alone it would leave at 6 ms.
    let first = due(t0, ms(40), t0, t0);
    let second = due(t0 + ms(1), ms(5), t0, first);
    assert!(
        second >= first,
        "still to do (ch15): the second chunk would leave {:?} before the first; \
         a TCP byte stream cannot be reordered, so a chunk never leaves before \
         `previous`.",
        first - second
    );
    assert_eq!(second, first, "and no later than it has to");
}

#[test]
fn nothing_leaves_before_the_handshake_is_over() {
    let t0 = Instant::now();
    // Accepted at 0 ms on a 20 ms round trip: the client's first bytes
    // arrive at once, but a real handshake would have let them leave only at
    // 20 ms, and they take 10 ms more on the way.
    let opens_at = t0 + ms(20);
    let first = due(t0, ms(10), opens_at, t0);
    assert!(
        first >= opens_at + ms(10),
        "still to do (ch15): the first chunk leaves {:?} after the accept, \
         before the handshake's round trip is over; it may start its one-way \
         delay only at `opens_at`.",
        first - t0
    );
    assert_eq!(first, opens_at + ms(10));
    // Later chunks pay only their own delay.
    assert_eq!(due(t0 + ms(50), ms(10), opens_at, first), t0 + ms(60));
}

#[test]
fn a_stream_of_chunks_with_jitter_leaves_in_order() {
    let t0 = Instant::now();
    let opens_at = t0 + ms(2);
    // Arrivals every 1 ms, delays jumping between 1 and 30 ms.
    let delays = [30, 1, 17, 3, 29, 2, 8, 25, 1, 12];
    let mut previous = t0;
    let mut leaves = Vec::new();
    for (i, delay) in delays.into_iter().enumerate() {
        previous = due(t0 + ms(i as u64), ms(delay), opens_at, previous);
        leaves.push(previous);
    }
    assert!(
        leaves.windows(2).all(|w| w[0] <= w[1]),
        "still to do (ch15): chunks leave out of order: {:?} ms",
        leaves
            .iter()
            .map(|t| (*t - t0).as_millis())
            .collect::<Vec<_>>()
    );
    // The first chunk (open at 2 ms, then 30 ms) holds up those behind it
    // that drew less; from the fifth on (4 + 29 ms) every chunk waits for it.
    assert_eq!(leaves[1], t0 + ms(32));
    assert_eq!(leaves[9], t0 + ms(33));
}
