//! What gRFC A6's `maxTokens` and `tokenRatio` allow, in attempts per call.
//!
//! grpc/grpc-go#7539 asked how to choose the two values and was told there
//! is no useful guidance. They can at least be turned into the amplification
//! they let through, which is what a chain of retrying hops multiplies.
//!
//! Model: each attempt fails independently with probability `f`; a call
//! makes up to `m` attempts (`maxAttempts`, at most 5 by A6's default cap).
//!
//! - Unthrottled, a call makes `1 + f + ... + f^(m-1)` attempts on average
//!   ([`unthrottled_attempts`]).
//! - Every attempt moves the bucket: `+tokenRatio` with probability `1 - f`,
//!   `-1` with probability `f`, a drift of `(1 - f) * r - f` per attempt,
//!   whether it is a first attempt or a retry. While the drift is positive
//!   the bucket stays near full and retries are (nearly) always allowed: `f`
//!   up to `f* = r / (1 + r)` ([`stop_rate`]).
//! - Above `f*` the drift is negative: the bucket falls to the threshold,
//!   and since first attempts alone keep draining it, it goes on down and
//!   retries stop. The long-run amplification falls to 1.
//! - So the worst long run is just below `f*`: `(1 - f*^m) / (1 - f*)`
//!   attempts per call ([`worst_attempts`]). It is a bound, reached when the
//!   bucket is large enough that its random walk seldom dips to half; with
//!   a small bucket (maxTokens 10) the walk dips often and the measured
//!   amplification stays below it (the tests measure by how much).
//! - At the start of an outage (`f = 1`) a full bucket lets a one-off burst
//!   through, not a rate: the failures that leave more than half the bucket,
//!   `ceil(maxTokens / 2) - 1` of them, may each be followed by a retry
//!   ([`outage_burst`]). A call's last attempt takes its token without
//!   earning a retry, so calls one after another get `T - floor(T / m)` of
//!   those `T`, and many calls at once up to all `T`.
//! - After a long outage the bucket is empty, and retries come back only
//!   once successes have refilled it above half: `maxTokens / (2 r)` of
//!   them (500 for 100 and 0.1).
//!
//! [`simulate`] runs the real [`A6`] bucket over many calls to check all of
//! this (see `tests/a6.rs`).

use std::fmt::Write as _;

use rand::Rng;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::throttle::{A6, Throttle};

/// Mean attempts per call without a throttle: `1 + f + ... + f^(m-1)`.
pub fn unthrottled_attempts(f: f64, max_attempts: u32) -> f64 {
    (0..max_attempts).map(|i| f.powi(i as i32)).sum()
}

/// `f* = r / (1 + r)`: the attempt failure rate above which the bucket
/// drains and retries stop, with `r` as the bucket keeps it (3 decimals).
pub fn stop_rate(token_ratio: f64) -> f64 {
    let r = A6::new(1.0, token_ratio).token_ratio();
    r / (1.0 + r)
}

/// The most attempts per call the throttle allows in the long run: the
/// unthrottled amplification at [`stop_rate`], approached from below.
pub fn worst_attempts(token_ratio: f64, max_attempts: u32) -> f64 {
    unthrottled_attempts(stop_rate(token_ratio), max_attempts)
}

/// Extra attempts (retries) a full bucket lets through when every attempt
/// fails: `(one call after another, all at once)`.
///
/// `T`, the failures after which more than half the bucket is left, is the
/// number of positive `k` with `maxTokens - k > maxTokens / 2`, counted in
/// thousandths as the bucket counts: `ceil(maxTokens / 2) - 1`. Each may be
/// followed by a retry, unless it ended the call's last attempt: calls one
/// after another lose every `m`-th.
pub fn outage_burst(max_tokens: f64, max_attempts: u32) -> (u64, u64) {
    let bucket = A6::new(max_tokens, 1.0);
    let max = (bucket.max_tokens() * 1000.0).round() as i64;
    let slack = max - max / 2;
    let t = ((slack - 1) / 1000).max(0) as u64;
    (t - t / u64::from(max_attempts), t)
}

/// Calls and attempts counted by [`simulate`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub calls: u64,
    pub attempts: u64,
}

impl Tally {
    pub fn attempts_per_call(&self) -> f64 {
        self.attempts as f64 / self.calls as f64
    }

    /// Attempts beyond one per call: the retries.
    pub fn retries(&self) -> u64 {
        self.attempts - self.calls
    }
}

/// Runs `calls` calls one after another through `throttle`: each attempt
/// fails with probability `failure`, a failed attempt is retried if the call
/// has attempts left and the throttle admits it.
///
/// The clock does not move (A6 has none); the draws come from `rng`, so a
/// seeded generator gives the same tally every time. A first attempt the
/// throttle refuses (only [`crate::throttle::Sre`] does) counts as a call
/// with no attempt.
pub fn simulate<T: Throttle>(
    throttle: &mut T,
    failure: f64,
    max_attempts: u32,
    calls: u64,
    rng: &mut impl Rng,
) -> Tally {
    let now = Instant::now();
    let mut tally = Tally::default();
    for _ in 0..calls {
        tally.calls += 1;
        for attempt in 0..max_attempts {
            if !throttle.admit(now, attempt > 0, rng.random()) {
                break;
            }
            tally.attempts += 1;
            let accepted = rng.random::<f64>() >= failure;
            throttle.record(now, accepted);
            if accepted {
                break;
            }
        }
    }
    tally
}

/// One line of [`table`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub max_tokens: f64,
    pub token_ratio: f64,
    /// [`stop_rate`].
    pub stop_rate: f64,
    /// [`worst_attempts`].
    pub worst_attempts: f64,
    /// [`outage_burst`]: calls one after another.
    pub burst_sequential: u64,
    /// [`outage_burst`]: many calls at once.
    pub burst_concurrent: u64,
}

pub fn row(max_tokens: f64, token_ratio: f64, max_attempts: u32) -> Row {
    let (burst_sequential, burst_concurrent) = outage_burst(max_tokens, max_attempts);
    Row {
        max_tokens,
        token_ratio,
        stop_rate: stop_rate(token_ratio),
        worst_attempts: worst_attempts(token_ratio, max_attempts),
        burst_sequential,
        burst_concurrent,
    }
}

// ANCHOR: table
/// A Markdown table: one row per `(maxTokens, tokenRatio)`, each call
/// making up to `max_attempts`; the worst long run through `layers` hops
/// that each throttle their own retries is the product of theirs.
pub fn table(pairs: &[(f64, f64)], max_attempts: u32, layers: u32) -> String {
    let mut out = format!(
        "| maxTokens | tokenRatio | retries stop above failure rate \
         | worst long-run attempts per call | through {layers} layers \
         | extra attempts at the start of an outage |\n\
         |---:|---:|---:|---:|---:|---:|\n",
    );
    for &(max_tokens, token_ratio) in pairs {
        let row = row(max_tokens, token_ratio, max_attempts);
        // A range: which end an outage gets depends on how its calls overlap.
        let burst = if row.burst_sequential == row.burst_concurrent {
            row.burst_concurrent.to_string()
        } else {
            format!("{} to {}", row.burst_sequential, row.burst_concurrent)
        };
        writeln!(
            out,
            "| {} | {} | {:.1} % | {:.3} | {:.3} | {} |",
            row.max_tokens,
            row.token_ratio,
            row.stop_rate * 100.0,
            row.worst_attempts,
            row.worst_attempts.powi(layers as i32),
            burst,
        )
        .expect("writing to a String cannot fail");
    }
    out
}
// ANCHOR_END: table
