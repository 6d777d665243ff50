//! The arithmetic of `chain::a6`, checked against the A6 bucket itself: many
//! calls, seeded draws, attempts that fail independently.

use chain::a6::{self, simulate};
use chain::throttle::{A6, Throttle};
use rand::{SeedableRng, rngs::StdRng};
use tokio::time::Instant;

/// A6's default cap on `maxAttempts`.
const M: u32 = 5;

const PAIRS: [(f64, f64); 4] = [(10.0, 0.1), (100.0, 0.1), (100.0, 1.0), (1000.0, 0.5)];

/// Attempts per call once the bucket has settled: `calls` calls to let it
/// (a full bucket takes a while to drain when the drift is small), then
/// `calls` more, measured.
fn long_run(max_tokens: f64, token_ratio: f64, f: f64, calls: u64) -> f64 {
    let mut a6 = A6::new(max_tokens, token_ratio);
    let mut rng = StdRng::seed_from_u64(19);
    simulate(&mut a6, f, M, calls, &mut rng);
    simulate(&mut a6, f, M, calls, &mut rng).attempts_per_call()
}

#[test]
fn below_the_stop_rate_retries_go_unthrottled() {
    for (max, ratio) in PAIRS {
        let stop = a6::stop_rate(ratio);
        // Half the stop rate: the bucket stays full, every retry goes.
        let f = 0.5 * stop;
        let measured = long_run(max, ratio, f, 200_000);
        let expected = a6::unthrottled_attempts(f, M);
        assert!(
            (measured - expected).abs() < 0.005,
            "{max}/{ratio} f={f}: {measured} vs {expected}"
        );
    }
    // Closer to it, only a large bucket keeps up: 90 % of the stop rate.
    for (max, ratio) in [(100.0, 0.1), (100.0, 1.0), (1000.0, 0.5)] {
        let f = 0.9 * a6::stop_rate(ratio);
        let measured = long_run(max, ratio, f, 200_000);
        let expected = a6::unthrottled_attempts(f, M);
        assert!(
            (measured - expected).abs() < 0.005,
            "{max}/{ratio} f={f}: {measured} vs {expected}"
        );
    }
    // A small one dips to half now and then, and throttles: maxTokens 10
    // gives 1.056 where unthrottled would be 1.089.
    let f = 0.9 * a6::stop_rate(0.1);
    let measured = long_run(10.0, 0.1, f, 200_000);
    assert!(
        measured < a6::unthrottled_attempts(f, M) - 0.02,
        "{measured}"
    );
}

#[test]
fn above_the_stop_rate_retries_stop() {
    for (max, ratio) in PAIRS {
        let f = 1.5 * a6::stop_rate(ratio);
        let measured = long_run(max, ratio, f, 200_000);
        assert!(measured < 1.001, "{max}/{ratio} f={f}: {measured}");
    }
    // Just above it a large bucket has drained for good, while a small one
    // still climbs back above half now and then (maxTokens 10: 1.019).
    for (max, ratio) in [(100.0, 0.1), (100.0, 1.0), (1000.0, 0.5)] {
        let f = 1.1 * a6::stop_rate(ratio);
        let measured = long_run(max, ratio, f, 200_000);
        assert!(measured < 1.001, "{max}/{ratio} f={f}: {measured}");
    }
}

#[test]
fn no_failure_rate_gets_more_than_the_bound() {
    for (max, ratio) in PAIRS {
        let bound = a6::worst_attempts(ratio, M);
        let stop = a6::stop_rate(ratio);
        let sweep = (1..=50).map(|i| f64::from(i) / 50.0);
        let near = [0.9, 0.95, 0.98, 1.0, 1.02, 1.05].map(|x| x * stop);
        let (worst_f, worst) = sweep
            .chain(near)
            .map(|f| (f, long_run(max, ratio, f, 50_000)))
            .fold((0.0, 0.0), |a, b| if b.1 > a.1 { b } else { a });
        println!(
            "{max}/{ratio}: worst measured {worst:.4} at f = {worst_f:.4}; bound {bound:.4} at {stop:.4}"
        );
        assert!(
            worst <= bound + 0.005,
            "{max}/{ratio}: {worst} at f={worst_f} > {bound}"
        );
        // And the worst is found below the stop rate, not above it.
        assert!(
            worst_f <= stop,
            "{max}/{ratio}: worst at {worst_f} > {stop}"
        );
    }
}

#[test]
fn an_outage_gets_a_burst_not_a_rate() {
    for (max, ratio) in PAIRS {
        let (sequential, concurrent) = a6::outage_burst(max, M);

        // Calls one after another, every attempt failing.
        let mut bucket = A6::new(max, ratio);
        let mut rng = StdRng::seed_from_u64(19);
        let first = simulate(&mut bucket, 1.0, M, 1000, &mut rng);
        assert_eq!(first.retries(), sequential, "{max}/{ratio}");
        // Then none, however long the outage lasts.
        let more = simulate(&mut bucket, 1.0, M, 100_000, &mut rng);
        assert_eq!(more.retries(), 0);

        // Many calls at once: every first attempt fails before any retry
        // would; the failures that leave more than half each earn one.
        let mut bucket = A6::new(max, ratio);
        let now = Instant::now();
        let mut retries = 0;
        for _ in 0..10_000 {
            bucket.record(now, false);
            if bucket.admit(now, true, 0.0) {
                retries += 1;
            }
        }
        assert_eq!(retries, concurrent, "{max}/{ratio}");
    }
}

#[test]
fn the_table() {
    let table = a6::table(&PAIRS, M, 3);
    println!("{table}");
    assert_eq!(
        table,
        "\
| maxTokens | tokenRatio | retries stop above failure rate | worst long-run attempts per call | through 3 layers | extra attempts at the start of an outage |
|---:|---:|---:|---:|---:|---:|
| 10 | 0.1 | 9.1 % | 1.100 | 1.331 | 4 |
| 100 | 0.1 | 9.1 % | 1.100 | 1.331 | 40 to 49 |
| 100 | 1 | 50.0 % | 1.938 | 7.273 | 40 to 49 |
| 1000 | 0.5 | 33.3 % | 1.494 | 3.334 | 400 to 499 |
"
    );
}
