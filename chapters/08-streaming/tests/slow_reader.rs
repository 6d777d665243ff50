//! A reader that never reads cannot take the server's memory.
//!
//! One connection opens 256 Countdowns of 1 MiB ticks and reads none of them
//! (`streaming::slow_reader`, the program chapter 8 runs). HTTP/2 flow control
//! stops the bytes on the wire; the reply budget must stop what the server
//! makes behind them. The server runs in this process, so this process's
//! resident memory is the figure: it must stay within a bound during the
//! attack and come back near where it started once the attacker leaves, and a
//! well-behaved client must be served meanwhile (`run` fails if it is not).
//!
//! This is the only test in its binary: resident memory belongs to the whole
//! process, and another test running beside it would blur it.

use std::time::Duration;

use streaming::{
    budget::CONNECTION_REPLY_BYTES,
    service::MAX_PAYLOAD_BYTES,
    slow_reader::{Budget, Config, Report, run},
};

const MIB: u64 = 1024;

/// How far above its starting point the process may go during the attack, and
/// where it must be once the attacker has left. With the budget, the server
/// holds at most 8 MiB of replies for the connection plus the copies tonic
/// and h2 make of the few in flight; without it, it held about 3 MiB a stream.
const PEAK_GROWTH_KIB: u64 = 96 * MIB;
const FINAL_GROWTH_KIB: u64 = 48 * MIB;

async fn attack(budget: Budget) -> Report {
    let config = Config {
        budget,
        streams: 256,
        payload_bytes: MAX_PAYLOAD_BYTES,
        hold: Duration::from_secs(2),
    };
    run(&config, |_| {}).await.expect("the slow-reader run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_never_reads_cannot_take_the_servers_memory() {
    let bounded = attack(Budget::On).await;
    println!("with the budget: {bounded:?}");
    assert!(
        bounded.peak_held_bytes <= CONNECTION_REPLY_BYTES,
        "{} bytes held for one connection",
        bounded.peak_held_bytes
    );
    assert!(
        bounded.peak_kib < bounded.baseline_kib + PEAK_GROWTH_KIB,
        "during the attack memory grew by {} MiB",
        (bounded.peak_kib - bounded.baseline_kib) / MIB
    );
    assert!(
        bounded.after_kib < bounded.baseline_kib + FINAL_GROWTH_KIB,
        "after the attack memory stayed {} MiB above where it started",
        bounded.after_kib.saturating_sub(bounded.baseline_kib) / MIB
    );

    // The same attack without the budget, second because memory the
    // allocator has taken is rarely given back: it is what the bounds above
    // catch. The margin is wide; it held three ticks a stream.
    let unbounded = attack(Budget::Off).await;
    println!("without the budget: {unbounded:?}");
    assert!(
        unbounded.peak_held_bytes > 8 * CONNECTION_REPLY_BYTES,
        "without the budget the server held only {} bytes: the attack no longer tests anything",
        unbounded.peak_held_bytes
    );
}
