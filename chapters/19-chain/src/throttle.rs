//! Three client-side retry throttles behind one interface.
//!
//! A retry is sent by a client that has just been told the server could not
//! serve it. One hop's retries multiply its load by at most `maxAttempts`;
//! a chain of hops that each retry multiplies the multipliers. The three
//! throttles here are the standard answers, each from its own source:
//!
//! - [`Sre`]: the SRE book's client-side adaptive throttling. It gates every
//!   request, first attempts and retries alike, at random, by the recent
//!   ratio of requests to accepts.
//! - [`A6`]: gRFC A6's retry throttling, what gRPC clients run when the
//!   service config has a `retryThrottling` entry. A token bucket: failures
//!   take tokens, successes give a fraction back, and below half full no
//!   retry (or hedge) is sent. First attempts always go.
//! - [`TowerBudget`]: tower's `TpsBudget`, used as it is: retries may be a
//!   share of recent requests, plus a small reserve per second.
//!
//! All three answer the same two questions, so the chapter's client can take
//! any of them ([`Throttle`]): may this attempt be sent, and how did the one
//! that was sent end. Time is tokio's [`Instant`], so tests run on a paused
//! clock; randomness is a draw the caller passes in, so they are
//! deterministic too.

use std::{collections::VecDeque, fmt, time::Duration};

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tower::retry::budget::{Budget, TpsBudget};

/// A client-side throttle: asked before each attempt, told after each one.
pub trait Throttle {
    /// May this attempt be sent now? `retry` is false for a call's first
    /// attempt. `draw` is uniform in `[0, 1)`, used only by the throttles
    /// that decide at random ([`Sre`]); passing it in keeps a run
    /// reproducible from its seed. A throttle may count the question itself
    /// (the SRE throttle counts every request asked about, tower's budget
    /// spends its balance on a retry it allows).
    fn admit(&mut self, now: Instant, retry: bool, draw: f64) -> bool;

    /// An attempt that was sent has ended: `accepted` if the server served
    /// it, false if it failed in a way that the client would retry
    /// (UNAVAILABLE, RESOURCE_EXHAUSTED, a deadline). A failure the client
    /// would not retry (INVALID_ARGUMENT...) says nothing about overload and
    /// is not reported.
    fn record(&mut self, now: Instant, accepted: bool);
}

/// The SRE book's client-side adaptive throttling.
///
/// Source: *Site Reliability Engineering* (O'Reilly, 2016), chapter 21
/// "Handling Overload", section "Client-Side Throttling"
/// (<https://sre.google/sre-book/handling-overload/>). Each client keeps,
/// for the last two minutes of its history, `requests` (the requests the
/// application layer attempted, whether or not the throttle then let them
/// through) and `accepts` (the requests the backend accepted), and rejects a
/// request locally with probability
///
/// ```text
/// max(0, (requests - K * accepts) / (requests + 1))
/// ```
///
/// with `K = 2` in the book (`K = 1.1` is its example of a more aggressive
/// setting). So a client sends freely until requests reach K times accepts:
/// with K = 2 the backend may fail up to half of what it receives before
/// the client holds anything back, and from then on about one request in K
/// still reaches it, which is how the client finds out that it has recovered.
///
/// Counting locally rejected requests in `requests` is what makes the
/// probability climb towards 1 while the backend accepts nothing: every
/// rejected request adds to `requests` and nothing adds to `accepts`.
///
/// The book applies the formula to every request; it has no separate notion
/// of a retry. So [`Throttle::admit`] ignores `retry` here: a retry is one
/// more request (the book bounds retries by other means: at most three
/// attempts per request, and retries at most 10 % of a client's requests).
///
/// Modelling choices (the book leaves them open):
/// - a request the throttle rejects is counted at once; a request it lets
///   through is counted when it ends ([`Throttle::record`]), together with
///   its accept if it was accepted. Counted when asked about instead, the
///   calls in flight would read as failures: a client starting with a
///   burst (140 calls a second, ~45 ms each) sees requests but no accepts
///   yet, and with K = 1.1 it throttled itself to a few percent of its
///   calls, a hole the formula climbs out of by a factor of K per window
///   (this chapter's first run did exactly that). go-zero's
///   `googlebreaker.go` counts the same way (`markSuccess`/`markFailure`
///   after the call, `markDrop` for a rejection);
/// - the probability is computed before the request is counted;
/// - the window slides: each request and accept is remembered with its time
///   and forgotten `window` later (the book says "the last two minutes").
///
/// The formula itself was checked (through the `search` tool, which returned
/// the chapter's opening but not this section) against write-ups that quote
/// it: <https://para.ngpcloud.org/adaptive-client-side-throttling>
/// ("requests = attempted in last 2 minutes, accepts = accepted by backend,
/// K ... default 2"; K = 1.1: "only 1 rejected per 10 accepted") and
/// go-zero issue #5011 ("Increment requests as soon as the call is attempted
/// ... Increment accepts only after the backend returns success").
#[derive(Debug, Clone)]
pub struct Sre {
    /// The multiplier K.
    pub k: f64,
    /// How far back requests and accepts are counted (2 minutes in the book).
    pub window: Duration,
    /// The times of the requests asked about, oldest first.
    requests: VecDeque<Instant>,
    /// The times of the accepts, oldest first.
    accepts: VecDeque<Instant>,
}

impl Sre {
    /// The book's setting: K = 2 over the last two minutes.
    pub fn book() -> Self {
        Self::new(2.0, Duration::from_secs(120))
    }

    pub fn new(k: f64, window: Duration) -> Self {
        assert!(
            k >= 1.0,
            "K below 1 rejects requests the backend would accept"
        );
        Self {
            k,
            window,
            requests: VecDeque::new(),
            accepts: VecDeque::new(),
        }
    }

    /// The probability that a request asked about now is rejected locally.
    pub fn rejection_probability(&mut self, now: Instant) -> f64 {
        self.forget(now);
        let requests = self.requests.len() as f64;
        let accepts = self.accepts.len() as f64;
        ((requests - self.k * accepts) / (requests + 1.0)).max(0.0)
    }

    /// `(requests, accepts)` in the window ending now.
    pub fn counts(&mut self, now: Instant) -> (usize, usize) {
        self.forget(now);
        (self.requests.len(), self.accepts.len())
    }

    fn forget(&mut self, now: Instant) {
        // An event exactly `window` old has left the window.
        let Some(horizon) = now.checked_sub(self.window) else {
            return;
        };
        for events in [&mut self.requests, &mut self.accepts] {
            while events.front().is_some_and(|&t| t <= horizon) {
                events.pop_front();
            }
        }
    }
}

// ANCHOR: sre
impl Throttle for Sre {
    fn admit(&mut self, now: Instant, _retry: bool, draw: f64) -> bool {
        let p = self.rejection_probability(now);
        // `draw < p` rejects with probability p; with p = 0 nothing is rejected,
        // not even a draw of 0.
        let sent = draw >= p;
        if !sent {
            // Rejected here: a request the backend never saw, and never
            // accepted. Counting it is what drives p towards 1 in an outage.
            self.requests.push_back(now);
        }
        sent
    }

    fn record(&mut self, now: Instant, accepted: bool) {
        self.requests.push_back(now);
        if accepted {
            self.accepts.push_back(now);
        }
    }
}
// ANCHOR_END: sre

/// gRFC A6's retry throttling (the service config's `retryThrottling`).
///
/// Source: gRFC A6 "gRPC Retry Design", section "Throttling Retry Attempts
/// and Hedged RPCs" (<https://github.com/grpc/proposal/blob/master/A6-client-retries.md>):
/// per server name, `token_count` starts at `maxTokens` and stays within
/// `[0, maxTokens]`; every failed RPC takes 1, every successful one gives
/// `tokenRatio`; while `token_count <= maxTokens / 2` no RPC is retried and
/// no hedge is sent. The first attempt of a call is always sent. Only
/// failures with a retryable (or, for hedging, non-fatal) status, or with a
/// pushback saying not to retry, count. `tokenRatio`: "Up to 3 decimal
/// places are supported."
///
/// The implementations agree on the details the prose leaves open:
/// - the count is per **attempt**: every attempt that fails with a retryable
///   status takes a token, including the call's first and its last (grpc-go
///   `stream.go`, `(*clientStream).shouldRetry`, calls
///   `cs.retryThrottler.throttle()` before it compares the attempts made with
///   `maxAttempts`; grpc-java `RetriableStream.Sublistener.makeRetryDecision`
///   likewise calls `throttle.onQualifiedFailureThenCheckIsAboveThreshold()`
///   before its `maxAttempts` check);
/// - a success is counted once per call, when the call finishes OK (grpc-go
///   `(*clientStream).finish` calls `successfulRPC()` if `err == nil`; only a
///   call's last attempt can succeed, so this is also once per successful
///   attempt);
/// - the decision after a failure uses the count **after** that failure's
///   token is taken: grpc-go `clientconn.go`, `(*retryThrottler).throttle`:
///   `tokens--`, floored at 0, then throttled if `tokens <= thresh`; grpc-java
///   `RetriableStream.Throttle.onQualifiedFailureThenCheckIsAboveThreshold`:
///   retry only if `decremented > threshold`;
/// - grpc-java keeps tokens in thousandths (`THREE_DECIMAL_PLACES_SCALE_UP =
///   1000`: `maxTokens`, `tokenRatio` and the count are `int`s, the ratio cut
///   with `(int) (tokenRatio * 1000)`, `threshold = maxTokens / 2` in integer
///   division), as gRPC C-core does (`ServerRetryThrottleData`:
///   `max_milli_tokens`, `milli_token_ratio`); grpc-go keeps `float64`s.
///
/// Here the count is in thousandths too, so a boundary is exact: from an
/// empty bucket, 50 successes at 0.1 make exactly 5.000, which is not above
/// the threshold 5 of `maxTokens = 10` (summed in `f64`, 50 × 0.1 makes
/// 4.999999999999998). The ratio is rounded to the nearest thousandth
/// (grpc-java truncates; the two differ only beyond the 3 decimals the spec
/// supports).
#[derive(Clone, PartialEq, Eq)]
pub struct A6 {
    /// `maxTokens`, in thousandths.
    max: i64,
    /// `tokenRatio`, in thousandths.
    ratio: i64,
    /// `maxTokens / 2`, in thousandths (integer division, as grpc-java).
    threshold: i64,
    /// `token_count`, in thousandths.
    count: i64,
}

/// Thousandths: the unit of an [`A6`] bucket.
const MILLI: i64 = 1000;

impl A6 {
    /// A full bucket. A6 requires both values to be greater than zero.
    pub fn new(max_tokens: f64, token_ratio: f64) -> Self {
        assert!(
            max_tokens > 0.0 && token_ratio > 0.0,
            "A6: both must be > 0"
        );
        let max = milli(max_tokens);
        Self {
            max,
            ratio: milli(token_ratio).max(1),
            threshold: max / 2,
            count: max,
        }
    }

    /// `maxTokens`.
    pub fn max_tokens(&self) -> f64 {
        self.max as f64 / MILLI as f64
    }

    /// `tokenRatio`, as the bucket uses it (to 3 decimals).
    pub fn token_ratio(&self) -> f64 {
        self.ratio as f64 / MILLI as f64
    }

    /// `token_count` now.
    pub fn tokens(&self) -> f64 {
        self.count as f64 / MILLI as f64
    }

    /// Whether retries and hedges are allowed now: `token_count > maxTokens / 2`.
    pub fn above_threshold(&self) -> bool {
        self.count > self.threshold
    }
}

fn milli(x: f64) -> i64 {
    (x * MILLI as f64).round() as i64
}

impl Throttle for A6 {
    fn admit(&mut self, _now: Instant, retry: bool, _draw: f64) -> bool {
        // The failure that prompted this retry has already taken its token
        // (`record`), so this reads the count after it, as both
        // implementations decide.
        !retry || self.above_threshold()
    }

    fn record(&mut self, _now: Instant, accepted: bool) {
        self.count = if accepted {
            (self.count + self.ratio).min(self.max)
        } else {
            (self.count - MILLI).max(0)
        };
    }
}

impl fmt::Debug for A6 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("A6")
            .field("max_tokens", &self.max_tokens())
            .field("token_ratio", &self.token_ratio())
            .field("tokens", &self.tokens())
            .finish()
    }
}

/// When [`TowerBudget`] deposits into tower's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DepositOn {
    /// On every call's first attempt, as Finagle (where the design comes
    /// from) does: retries are then a share of requests, whatever their fate.
    FirstAttempt,
    /// On every accepted attempt, as the example in tower's
    /// `retry::budget` documentation does: in a total outage nothing is
    /// deposited and only the reserve is left.
    Accepted,
}

/// tower's retry budget, [`TpsBudget`], behind [`Throttle`].
///
/// Read in tower 0.5.3, `src/retry/budget/tps_budget.rs`:
/// - `TpsBudget::new(ttl, min_per_sec, retry_percent)`: `ttl` (1 to 60 s) is
///   how long a deposit counts; `min_per_sec` is a reserve of retries for
///   clients that send little; `retry_percent` (0 to 1000) is how many
///   retries each deposit allows (0.2: one per 5 deposits; 2.0: two per
///   deposit).
/// - In integers: for `retry_percent <= 1` a deposit is worth 1 and a
///   withdrawal costs `(1.0 / retry_percent) as isize`, **truncated** (0.3
///   costs 3: one retry per 3 deposits, 33 %); above 1 a deposit is worth
///   1000 and a withdrawal costs `(1000.0 / retry_percent) as isize`; 0 makes
///   deposits worthless, leaving only the reserve.
/// - The reserve is `min_per_sec * ttl.as_secs() * withdraw_amount`: not a
///   rate refilled every second but a constant added to the balance, so
///   `min_per_sec * ttl` retries may go at once, and come back as those
///   withdrawals expire.
/// - `deposit()` adds to the current slot; `withdraw()` succeeds if the
///   balance (reserve + the live slots + the current one) covers a
///   withdrawal, and then subtracts it from the current slot. It returns
///   whether the retry may go.
/// - Slots: the ttl is cut into 10 slots of `ttl / 10`; `expire()`, run by
///   both calls, commits the current slot and clears the ones the clock has
///   passed, so a deposit or a withdrawal is forgotten between `ttl` and
///   `ttl` plus a slot or two after it was made.
/// - The clock is `tokio::time::Instant::now()`, read inside: the `now`
///   passed to [`Throttle`] is ignored, and a paused tokio clock drives it.
pub struct TowerBudget {
    budget: TpsBudget,
    deposit_on: DepositOn,
}

impl TowerBudget {
    /// Starts its slots at tokio's `Instant::now()`.
    pub fn new(ttl: Duration, min_per_sec: u32, retry_percent: f32, deposit_on: DepositOn) -> Self {
        Self {
            budget: TpsBudget::new(ttl, min_per_sec, retry_percent),
            deposit_on,
        }
    }

    /// tower's defaults (`TpsBudget::default()`: 10 s, 10 per second, 20 %).
    pub fn tower_default(deposit_on: DepositOn) -> Self {
        Self::new(Duration::from_secs(10), 10, 0.2, deposit_on)
    }
}

impl Throttle for TowerBudget {
    fn admit(&mut self, _now: Instant, retry: bool, _draw: f64) -> bool {
        if retry {
            return self.budget.withdraw();
        }
        if self.deposit_on == DepositOn::FirstAttempt {
            self.budget.deposit();
        }
        true
    }

    fn record(&mut self, _now: Instant, accepted: bool) {
        if accepted && self.deposit_on == DepositOn::Accepted {
            self.budget.deposit();
        }
    }
}

impl fmt::Debug for TowerBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TowerBudget")
            .field("budget", &self.budget)
            .field("deposit_on", &self.deposit_on)
            .finish()
    }
}
