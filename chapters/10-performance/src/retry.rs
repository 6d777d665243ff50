//! Chapter 10, step 8, with numbers: retrying every
//! DEADLINE_EXCEEDED multiplies the load on a server that is already slow.
//! One simulation in one file (about 800 lines before its tests): the server,
//! the clients and the tally share one clock and one set of parameters, and
//! read best top to bottom.
//!
//! Everything runs in one process, on tokio's clock, so the same code runs in
//! real time (`cargo run -p perf --bin retry_storm`) and in virtual time (the
//! tests, with `tokio::time::pause`):
//!
//! - [`SlowServer`] serves at most `capacity` attempts at once; the rest wait
//!   in line. Its service time grows with the line (contention: every waiting
//!   request costs the busy ones a little), and for a while in the middle of
//!   the run it is several times slower (a slow dependency, a GC pause). An
//!   attempt whose caller gives up is dropped, as tonic drops a handler: it
//!   leaves the line, or stops mid-work (that work is wasted).
//! - Clients are open-loop: call `i` starts at its scheduled time whatever
//!   happened to earlier calls, like users who do not wait for each other.
//! - [`Policy::Naive`] retries every failure at once, each attempt with a fresh
//!   full timeout. Each later policy adds one rule to the one before it, so
//!   that a comparison (`--compare`) shows what each rule changes: one overall
//!   deadline with a timeout per attempt, then retrying only idempotent calls,
//!   then backoff with full jitter, then a retry budget shared by all calls
//!   ([`RetryThrottle`], gRPC's retry throttling).

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::{
    sync::Semaphore,
    time::{Instant, sleep, sleep_until, timeout},
};

// ANCHOR: policy
/// How failed calls are retried. Each policy is the one before it plus one
/// rule, so that two neighbours differ in one variable.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Policy {
    /// Retry every failure immediately, each attempt with a fresh full timeout
    Naive,
    /// + one overall deadline; each attempt gets at most the attempt timeout of what is left
    Deadline,
    /// + retry only calls that are idempotent
    Idempotent,
    /// + exponential backoff with full jitter before each retry
    Backoff,
    /// + a retry budget shared by all calls (gRPC's retry throttling)
    Budgeted,
}

impl Policy {
    pub const ALL: [Policy; 5] = [
        Policy::Naive,
        Policy::Deadline,
        Policy::Idempotent,
        Policy::Backoff,
        Policy::Budgeted,
    ];

    /// Whether this policy keeps the rule `added` (its own or an earlier one's).
    fn has(self, added: Policy) -> bool {
        self >= added
    }
}
// ANCHOR_END: policy

/// gRPC's retry throttling (gRFC A6): a token bucket shared by every call to one
/// server. Each failed attempt takes a token, each success gives back `ratio`
/// of one; while the bucket holds no more than half of `max_tokens`, no call
/// may retry. A healthy server keeps the bucket full; a failing one empties it
/// after a handful of failures, and retries stop until successes refill it.
/// gRPC clients throttle only when a service config asks them to, with the
/// numbers it gives; there is no default.
#[derive(Debug, Clone)]
pub struct RetryThrottle {
    max_tokens: f64,
    ratio: f64,
    tokens: f64,
}

impl RetryThrottle {
    /// The example values of gRFC A6: 10 tokens, 0.1 back per success.
    pub fn a6_example() -> RetryThrottle {
        RetryThrottle::new(10.0, 0.1)
    }

    pub fn new(max_tokens: f64, ratio: f64) -> RetryThrottle {
        RetryThrottle {
            max_tokens,
            ratio,
            tokens: max_tokens,
        }
    }

    pub fn on_success(&mut self) {
        self.tokens = (self.tokens + self.ratio).min(self.max_tokens);
    }

    pub fn on_failure(&mut self) {
        self.tokens = (self.tokens - 1.0).max(0.0);
    }

    pub fn allows_retry(&self) -> bool {
        self.tokens > self.max_tokens / 2.0
    }

    /// Records one attempt's result (a success deposits, a failure
    /// withdraws) and answers: may a failed call retry now?
    pub fn record(&mut self, ok: bool) -> bool {
        if ok {
            self.on_success();
        } else {
            self.on_failure();
        }
        self.allows_retry()
    }

    pub fn tokens(&self) -> f64 {
        self.tokens
    }
}

/// The wait before retry `attempt` (1, 2, ...) with "full jitter": uniform in
/// [0, min(cap, base * 2^(attempt-1))], given `random` uniform in [0, 1).
/// The random spread keeps callers that failed together from retrying together.
pub fn full_jitter(base: Duration, cap: Duration, attempt: u32, random: f64) -> Duration {
    let ceiling = base
        .saturating_mul(1 << attempt.saturating_sub(1).min(16))
        .min(cap);
    ceiling.mul_f64(random)
}

/// The whole experiment's settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub policy: Policy,
    /// How long new calls keep arriving.
    pub duration: Duration,
    /// Calls started per second (open loop, evenly spaced).
    pub rate: f64,
    /// Attempts the server works on at once.
    pub capacity: usize,
    /// Service time of one attempt on an idle server.
    pub service: Duration,
    /// Extra service time per attempt waiting in line, as a fraction of `service`.
    pub contention: f64,
    /// When the server is slow, and how many times slower.
    pub slow_from: Duration,
    pub slow_until: Duration,
    pub slow_factor: f64,
    /// The caller's deadline. Naive: per attempt. The others: for the whole
    /// call, all attempts and backoffs included.
    pub deadline: Duration,
    /// From `Deadline` on: one attempt's timeout, capped by what is left of
    /// the deadline. Shorter than the deadline, so that a retry has time left.
    pub attempt_timeout: Duration,
    /// At most this many attempts per call, under either policy.
    pub max_attempts: u32,
    /// Every n-th call changes state (not idempotent); 0 means none does.
    pub non_idempotent_every: u64,
    /// Backoff before retry n (n = 1, 2, ...): a random wait in
    /// [0, min(cap, base * 2^(n-1))] ("full jitter").
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// Retry budget: gRPC throttling's max tokens and token ratio (gRFC A6's
    /// example values by default).
    pub budget_tokens: f64,
    pub budget_ratio: f64,
    /// Seed of the jitter's random numbers, so a run can be repeated.
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            policy: Policy::Naive,
            duration: Duration::from_secs(12),
            rate: 60.0,
            capacity: 4,
            service: Duration::from_millis(40),
            contention: 0.02,
            slow_from: Duration::from_secs(3),
            slow_until: Duration::from_secs(5),
            slow_factor: 4.0,
            deadline: Duration::from_millis(300),
            attempt_timeout: Duration::from_millis(100),
            max_attempts: 5,
            non_idempotent_every: 5,
            backoff_base: Duration::from_millis(25),
            backoff_cap: Duration::from_millis(400),
            budget_tokens: 10.0,
            budget_ratio: 0.1,
            seed: 1,
        }
    }
}

/// Counters, shared by clients and server; [`Snapshot`] reads them.
#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    succeeded: AtomicU64,
    failed: AtomicU64,
    attempts: AtomicU64,
    retries: AtomicU64,
    rescued: AtomicU64,
    retries_refused_budget: AtomicU64,
    retries_refused_idempotency: AtomicU64,
    retries_refused_deadline: AtomicU64,
    queued: AtomicU64,
    in_service: AtomicU64,
    peak_queued: AtomicU64,
    work: Mutex<WorkClock>,
}

/// The server's work so far: service time spent, all of it and on attempts
/// whose caller gave up before the reply was ready. An attempt still being
/// worked on counts the time it has had, so the difference between two
/// snapshots is the work done between them. Counting an attempt's whole
/// service time when it ended put work done in one second into the next, and
/// the progress line could read `busy 101%`.
#[derive(Debug, Default)]
struct WorkClock {
    ended: Duration,
    wasted: Duration,
    /// Attempts being worked on, and the sum of their start times (since the
    /// run began): together, the time they have had at any moment.
    working: u32,
    started_sum: Duration,
}

impl WorkClock {
    fn begin(&mut self, at: Duration) {
        self.working += 1;
        self.started_sum += at;
    }

    fn end(&mut self, began: Duration, at: Duration, wasted: bool) {
        self.working -= 1;
        self.started_sum -= began;
        self.ended += at - began;
        if wasted {
            self.wasted += at - began;
        }
    }

    fn busy(&self, now: Duration) -> Duration {
        self.ended + (now * self.working).saturating_sub(self.started_sum)
    }
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Snapshot {
    pub elapsed: Duration,
    /// Calls started, and how they ended.
    pub calls: u64,
    pub succeeded: u64,
    pub failed: u64,
    /// Attempts sent to the server (first tries and retries).
    pub attempts: u64,
    pub retries: u64,
    /// Calls that failed at first and succeeded on a retry.
    pub rescued: u64,
    /// Retries not made, and why.
    pub retries_refused_budget: u64,
    pub retries_refused_idempotency: u64,
    pub retries_refused_deadline: u64,
    /// The server right now: waiting in line, and being worked on.
    pub queued: u64,
    pub in_service: u64,
    pub peak_queued: u64,
    /// Server work done so far (an attempt being worked on counts the time it
    /// has had), and the part of it whose caller had given up.
    pub busy: Duration,
    pub wasted: Duration,
    /// Tokens in the retry budget (Budgeted only).
    pub tokens: Option<f64>,
    /// The server's capacity, to turn busy time into a utilisation.
    pub capacity: usize,
}

impl Snapshot {
    /// Attempts per call: 1.0 means no retries at all.
    pub fn amplification(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.attempts as f64 / self.calls as f64
        }
    }

    /// The share of the server's work spent on attempts nobody waited for.
    pub fn wasted_share(&self) -> f64 {
        if self.busy.is_zero() {
            0.0
        } else {
            self.wasted.as_secs_f64() / self.busy.as_secs_f64()
        }
    }

    /// The share of the server's capacity spent working since `before`:
    /// never above 1, as work is counted in the interval it was done in.
    pub fn busy_share(&self, before: &Snapshot) -> f64 {
        let secs = (self.elapsed - before.elapsed).as_secs_f64();
        if secs <= 0.0 {
            0.0
        } else {
            (self.busy - before.busy).as_secs_f64() / secs / self.capacity.max(1) as f64
        }
    }

    /// The share of finished calls that succeeded.
    pub fn success_rate(&self) -> f64 {
        let done = self.succeeded + self.failed;
        if done == 0 {
            0.0
        } else {
            self.succeeded as f64 / done as f64
        }
    }
}

struct Shared {
    config: Config,
    started: Instant,
    counters: Counters,
    server: Semaphore,
    throttle: Mutex<RetryThrottle>,
    rng: Mutex<u64>,
}

impl Shared {
    fn snapshot(&self) -> Snapshot {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let now = self.started.elapsed();
        let work = c.work.lock().unwrap();
        Snapshot {
            elapsed: now,
            calls: get(&c.calls),
            succeeded: get(&c.succeeded),
            failed: get(&c.failed),
            attempts: get(&c.attempts),
            retries: get(&c.retries),
            rescued: get(&c.rescued),
            retries_refused_budget: get(&c.retries_refused_budget),
            retries_refused_idempotency: get(&c.retries_refused_idempotency),
            retries_refused_deadline: get(&c.retries_refused_deadline),
            queued: get(&c.queued),
            in_service: get(&c.in_service),
            peak_queued: get(&c.peak_queued),
            busy: work.busy(now),
            wasted: work.wasted,
            tokens: self
                .config
                .policy
                .has(Policy::Budgeted)
                .then(|| self.throttle.lock().unwrap().tokens()),
            capacity: self.config.capacity.max(1),
        }
    }

    /// A uniform random number in [0, 1): xorshift64*, seeded, no dependency.
    fn random(&self) -> f64 {
        let mut state = self.rng.lock().unwrap();
        let mut x = *state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *state = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Decrements `counter` when dropped: keeps gauges right however an attempt ends.
struct Gauge<'a>(&'a AtomicU64);

impl<'a> Gauge<'a> {
    fn up(counter: &'a AtomicU64) -> Gauge<'a> {
        counter.fetch_add(1, Ordering::Relaxed);
        Gauge(counter)
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The slow server: one attempt. Dropped when its caller gives up.
struct SlowServer;

impl SlowServer {
    async fn handle(shared: &Shared) {
        let c = &shared.counters;
        let config = &shared.config;
        let waiting = Gauge::up(&c.queued);
        c.peak_queued
            .fetch_max(c.queued.load(Ordering::Relaxed), Ordering::Relaxed);
        let _permit = shared.server.acquire().await.expect("never closed");
        drop(waiting);
        let _working = Gauge::up(&c.in_service);

        // Service time: slower during the slow spell, and slower the longer the
        // line (each waiting request costs the busy ones a little).
        let now = shared.started.elapsed();
        let slow = if now >= config.slow_from && now < config.slow_until {
            config.slow_factor
        } else {
            1.0
        };
        let line = c.queued.load(Ordering::Relaxed) as f64;
        let service = config
            .service
            .mul_f64(slow * (1.0 + config.contention * line));

        // Count the work as it is done, so an attempt cut off halfway counts
        // the half it did, as wasted.
        let work = Work::begin(shared);
        sleep(service).await;
        work.finish();
    }
}

struct Work<'a> {
    shared: &'a Shared,
    began: Duration,
    done: bool,
}

impl<'a> Work<'a> {
    fn begin(shared: &'a Shared) -> Work<'a> {
        let began = shared.started.elapsed();
        shared.counters.work.lock().unwrap().begin(began);
        Work {
            shared,
            began,
            done: false,
        }
    }

    fn finish(mut self) {
        self.done = true;
    }
}

impl Drop for Work<'_> {
    fn drop(&mut self) {
        let now = self.shared.started.elapsed();
        let mut clock = self.shared.counters.work.lock().unwrap();
        clock.end(self.began, now, !self.done);
    }
}

// ANCHOR: call
/// One call, with as many attempts as the policy allows.
async fn call(shared: &Shared, idempotent: bool) -> bool {
    let config = &shared.config;
    let policy = config.policy;
    let c = &shared.counters;
    let deadline = Instant::now() + config.deadline; // the one overall deadline
    let mut attempt = 1;
    loop {
        let limit = if policy.has(Policy::Deadline) {
            // An attempt's own timeout, never beyond what is left.
            let left = deadline.saturating_duration_since(Instant::now());
            config.attempt_timeout.min(left)
        } else {
            // A fresh full timeout per attempt: the caller waits up to
            // max_attempts times as long as it asked for.
            config.deadline
        };
        c.attempts.fetch_add(1, Ordering::Relaxed);
        let ok = timeout(limit, SlowServer::handle(shared)).await.is_ok();
        let budget_allows = shared.throttle.lock().unwrap().record(ok);
        if ok {
            if attempt > 1 {
                c.rescued.fetch_add(1, Ordering::Relaxed);
            }
            return true;
        }
        if attempt >= config.max_attempts {
            return false;
        }
        let refused = if policy.has(Policy::Deadline) && Instant::now() >= deadline {
            Some(&c.retries_refused_deadline)
        } else if policy.has(Policy::Idempotent) && !idempotent {
            // It may have happened: only the caller can check and decide.
            Some(&c.retries_refused_idempotency)
        } else if policy.has(Policy::Budgeted) && !budget_allows {
            Some(&c.retries_refused_budget)
        } else {
            None
        };
        if let Some(counter) = refused {
            counter.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if policy.has(Policy::Backoff) {
            let backoff = full_jitter(
                config.backoff_base,
                config.backoff_cap,
                attempt,
                shared.random(),
            );
            // Not worth waiting for if the wait alone uses up the deadline.
            if Instant::now() + backoff >= deadline {
                c.retries_refused_deadline.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            sleep(backoff).await;
        }
        c.retries.fetch_add(1, Ordering::Relaxed);
        attempt += 1;
    }
}
// ANCHOR_END: call

/// Runs the experiment: starts calls on schedule for `config.duration`, calls
/// `progress` with a snapshot every `every`, waits for the last calls to end,
/// and returns the final snapshot.
pub async fn run(config: Config, every: Duration, mut progress: impl FnMut(&Snapshot)) -> Snapshot {
    let shared = Arc::new(Shared {
        started: Instant::now(),
        counters: Counters::default(),
        server: Semaphore::new(config.capacity.max(1)),
        throttle: Mutex::new(RetryThrottle::new(
            config.budget_tokens,
            config.budget_ratio,
        )),
        rng: Mutex::new(config.seed.max(1)),
        config,
    });
    let total = (shared.config.rate * shared.config.duration.as_secs_f64()).round() as u64;
    let interval = Duration::from_secs_f64(1.0 / shared.config.rate.max(1e-9));

    let starter = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut calls = tokio::task::JoinSet::new();
            for i in 0..total {
                // Open loop: call i starts at its own time, not when call i-1 ends.
                sleep_until(shared.started + interval.mul_f64(i as f64)).await;
                shared.counters.calls.fetch_add(1, Ordering::Relaxed);
                let every = shared.config.non_idempotent_every;
                let idempotent = every == 0 || (i + 1) % every != 0;
                let shared = shared.clone();
                calls.spawn(async move {
                    let counter = if call(&shared, idempotent).await {
                        &shared.counters.succeeded
                    } else {
                        &shared.counters.failed
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                });
            }
            calls.join_all().await;
        })
    };

    let mut ticks = tokio::time::interval_at(shared.started + every, every);
    tokio::pin!(starter);
    loop {
        tokio::select! {
            _ = &mut starter => break,
            _ = ticks.tick() => progress(&shared.snapshot()),
        }
    }
    shared.snapshot()
}

/// One progress line: rates since `before`, and the server's state now. Busy
/// is the share of the server's capacity spent working since `before`, wasted
/// work included.
pub fn progress_line(now: &Snapshot, before: &Snapshot) -> String {
    let secs = (now.elapsed - before.elapsed).as_secs_f64().max(1e-9);
    let per_s = |a: u64, b: u64| (a - b) as f64 / secs;
    format!(
        "t={:>4.1}s  calls/s {:>5.0}  attempts/s {:>5.0}  ok/s {:>5.0}  failed/s {:>5.0}  \
         queued {:>4}  busy {:>3.0}%{}",
        now.elapsed.as_secs_f64(),
        per_s(now.calls, before.calls),
        per_s(now.attempts, before.attempts),
        per_s(now.succeeded, before.succeeded),
        per_s(now.failed, before.failed),
        now.queued,
        now.busy_share(before) * 100.0,
        now.tokens
            .map(|t| format!("  budget tokens {t:>4.1}"))
            .unwrap_or_default(),
    )
}

/// How often `--compare --plot` reads the counters: finer than the progress
/// lines' second, so that the plot shows how fast the storm starts and ends.
pub const PLOT_EVERY: Duration = Duration::from_millis(250);

/// [`run`] with no progress lines, keeping a snapshot every [`PLOT_EVERY`]
/// for [`plot`]: the final snapshot, and the run's timeline from all zeros
/// at the start to the end.
pub async fn run_sampled(config: Config) -> (Snapshot, Vec<Snapshot>) {
    let mut timeline = vec![Snapshot::default()];
    let last = run(config, PLOT_EVERY, |now| timeline.push(*now)).await;
    // The run ended less than one reading after the last; nothing changes
    // after it, so its end is drawn where the next reading would have been,
    // and the rates of that last interval are over a whole one.
    let next = timeline
        .last()
        .map_or(PLOT_EVERY, |s| s.elapsed + PLOT_EVERY);
    timeline.push(Snapshot {
        elapsed: next.max(last.elapsed),
        ..last
    });
    (last, timeline)
}

/// `--plot`: each policy's run over time, from its snapshots: attempts/s,
/// ok/s and the line of waiting attempts, the slow spell shaded. Naive and
/// budgeted, the two ends of the comparison, in bold.
pub fn plot(
    file: std::fs::File,
    path: &std::path::Path,
    config: &Config,
    runs: &[(Policy, Vec<Snapshot>)],
) -> anyhow::Result<()> {
    use crate::plot::{Line, Panel, timeline};
    use plotters::style::RGBColor;
    let panel = |y_label: &str, point: &dyn Fn(&Snapshot, &Snapshot) -> (f64, f64)| Panel {
        y_label: y_label.into(),
        lines: runs
            .iter()
            .map(|(policy, snapshots)| Line {
                name: format!("{policy:?}").to_lowercase(),
                points: snapshots
                    .windows(2)
                    .filter(|w| w[1].elapsed > w[0].elapsed)
                    .map(|w| point(&w[1], &w[0]))
                    .collect(),
                color: match policy {
                    Policy::Naive => RGBColor(214, 39, 40),
                    Policy::Deadline => RGBColor(255, 127, 14),
                    Policy::Idempotent => RGBColor(148, 103, 189),
                    Policy::Backoff => RGBColor(44, 160, 44),
                    Policy::Budgeted => RGBColor(31, 119, 180),
                },
                bold: matches!(policy, Policy::Naive | Policy::Budgeted),
            })
            .collect(),
    };
    // A rate over an interval is drawn at the interval's middle, so that a
    // rise starts where it did, not at the next reading.
    let rate = |count: fn(&Snapshot) -> u64| {
        move |now: &Snapshot, before: &Snapshot| {
            let secs = (now.elapsed - before.elapsed).as_secs_f64();
            let middle = (now.elapsed + before.elapsed).as_secs_f64() / 2.0;
            (middle, (count(now) - count(before)) as f64 / secs)
        }
    };
    let panels = [
        panel("attempts/s", &rate(|s| s.attempts)),
        panel("ok/s (calls that succeeded)", &rate(|s| s.succeeded)),
        panel("attempts waiting in line", &|now, _| {
            (now.elapsed.as_secs_f64(), now.queued as f64)
        }),
    ];
    let spell = config.slow_from.as_secs_f64()..config.slow_until.as_secs_f64();
    timeline(
        file,
        path,
        &format!(
            "retry storm: {} calls/s, capacity {:.0} attempts/s, each policy one rule more",
            config.rate,
            config.capacity as f64 / config.service.as_secs_f64()
        ),
        (spell, &format!("server {}x slower", config.slow_factor)),
        &panels,
    )
}

/// A slow server, open-loop callers, and what their retries do to it.
#[derive(clap::Parser, Clone, Debug)]
#[command(name = "retry_storm", version)]
pub struct Args {
    /// How failed calls are retried
    #[arg(long, value_enum, default_value_t = Policy::Naive)]
    pub policy: Policy,
    /// Seconds during which new calls arrive
    #[arg(long, default_value_t = 12.0)]
    pub duration: f64,
    /// New calls per second (open loop)
    #[arg(long, default_value_t = 60.0)]
    pub rate: f64,
    /// Attempts the server works on at once
    #[arg(long, default_value_t = 4)]
    pub capacity: usize,
    /// Service time of one attempt on an idle server, in milliseconds
    #[arg(long, default_value_t = 40)]
    pub service_ms: u64,
    /// The slow spell: from..until seconds into the run, and how many times slower
    #[arg(long, default_value_t = 3.0)]
    pub slow_from: f64,
    #[arg(long, default_value_t = 5.0)]
    pub slow_until: f64,
    #[arg(long, default_value_t = 4.0)]
    pub slow_factor: f64,
    /// The caller's deadline, in milliseconds
    #[arg(long, default_value_t = 300)]
    pub deadline_ms: u64,
    /// One attempt's timeout, in milliseconds (every policy from `deadline` on)
    #[arg(long, default_value_t = 100)]
    pub attempt_timeout_ms: u64,
    /// At most this many attempts per call
    #[arg(long, default_value_t = 5)]
    pub max_attempts: u32,
    /// Run every policy, one after the other on the same schedule, and print
    /// one row each instead of a timeline
    #[arg(long, conflicts_with = "policy")]
    pub compare: bool,
    /// With --compare: draw each policy's run over time (attempts/s, ok/s,
    /// attempts waiting in line) as an SVG file
    #[arg(long, value_name = "FILE.svg", requires = "compare")]
    pub plot: Option<std::path::PathBuf>,
    /// Run on tokio's virtual clock: the same experiment, in a fraction of the time
    #[arg(long)]
    pub virtual_time: bool,
}

impl Args {
    pub fn config(&self) -> Config {
        let secs = |s: f64| Duration::from_secs_f64(s.max(0.0));
        Config {
            policy: self.policy,
            duration: secs(self.duration),
            rate: self.rate,
            capacity: self.capacity,
            service: Duration::from_millis(self.service_ms),
            slow_from: secs(self.slow_from),
            slow_until: secs(self.slow_until),
            slow_factor: self.slow_factor,
            deadline: Duration::from_millis(self.deadline_ms),
            attempt_timeout: Duration::from_millis(self.attempt_timeout_ms),
            max_attempts: self.max_attempts.max(1),
            ..Config::default()
        }
    }
}

/// The final summary, a few lines a reader can compare between policies.
pub fn summary(config: &Config, s: &Snapshot) -> String {
    let capacity_per_s = config.capacity as f64 / config.service.as_secs_f64();
    format!(
        "policy {:?}: {} calls at {}/s for {:.0} s; server capacity {} x {} ms = {:.0} attempts/s when idle\n\
         calls      succeeded {} ({:.1}%), failed {}\n\
         attempts   {} = {:.2} per call (retries {}, of which rescued a call {}; refused: budget {}, not idempotent {}, deadline {})\n\
         server     busy {:.1} s, of which wasted on abandoned attempts {:.1} s ({:.0}%); longest line {}",
        config.policy,
        s.calls,
        config.rate,
        config.duration.as_secs_f64(),
        config.capacity,
        config.service.as_millis(),
        capacity_per_s,
        s.succeeded,
        s.success_rate() * 100.0,
        s.failed,
        s.attempts,
        s.amplification(),
        s.retries,
        s.rescued,
        s.retries_refused_budget,
        s.retries_refused_idempotency,
        s.retries_refused_deadline,
        s.busy.as_secs_f64(),
        s.wasted.as_secs_f64(),
        s.wasted_share() * 100.0,
        s.peak_queued,
    )
}

/// `--compare`: one row per policy, each the one above plus one rule.
pub fn comparison(rows: &[(Policy, Snapshot)]) -> String {
    let mut out = format!(
        "{:<11} {:>8} {:>13} {:>8} {:>8} {:>10} {:>8} {:>8}\n",
        "policy", "calls", "attempts/call", "retries", "rescued", "succeeded", "wasted", "line"
    );
    for (policy, s) in rows {
        out.push_str(&format!(
            "{:<11} {:>8} {:>13.2} {:>8} {:>8} {:>9.1}% {:>7.0}% {:>8}\n",
            format!("{policy:?}").to_lowercase(),
            s.calls,
            s.amplification(),
            s.retries,
            s.rescued,
            s.success_rate() * 100.0,
            s.wasted_share() * 100.0,
            s.peak_queued,
        ));
    }
    out.push_str("(wasted: the server's work on attempts whose caller had given up; line: the longest line of waiting attempts)");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_stops_retries_at_half_the_tokens_and_refills_on_success() {
        let mut t = RetryThrottle::a6_example();
        assert!(t.allows_retry());
        for _ in 0..4 {
            t.on_failure();
        }
        assert!(t.allows_retry(), "6 tokens > 5");
        t.on_failure();
        assert!(!t.allows_retry(), "5 tokens is not more than half of 10");
        for _ in 0..10 {
            t.on_success(); // +0.1 each: 6.0
        }
        assert!(t.allows_retry());
        for _ in 0..100 {
            t.on_failure();
        }
        assert_eq!(t.tokens(), 0.0);
    }

    #[tokio::test(start_paused = true)]
    async fn busy_is_the_work_done_in_the_interval_never_more_than_capacity() {
        // The naive storm keeps the server saturated with attempts of up to
        // ~0.4 s, so many of them straddle a progress line; read often, so
        // that work misplaced by a whole attempt would show.
        let mut before = Snapshot::default();
        let mut highest: f64 = 0.0;
        let mut lines = 0;
        run(Config::default(), Duration::from_millis(100), |now| {
            let share = now.busy_share(&before);
            assert!(share <= 1.0 + 1e-9, "busy {share} at {:?}", now.elapsed);
            highest = highest.max(share);
            lines += 1;
            before = *now;
        })
        .await;
        assert!(lines > 100, "{lines}");
        assert!(highest > 0.999, "the storm saturates the server: {highest}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_plot_of_a_comparison_names_each_policy_and_stays_small() {
        let config = Config::default();
        let mut runs = Vec::new();
        for policy in [Policy::Naive, Policy::Budgeted] {
            let config = Config {
                policy,
                ..config.clone()
            };
            let (last, timeline) = run_sampled(config).await;
            assert_eq!(timeline.last().unwrap().attempts, last.attempts);
            runs.push((policy, timeline));
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("storm.svg");
        plot(crate::plot::create(&path).unwrap(), &path, &config, &runs).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for text in [
            "naive",
            "budgeted",
            "attempts/s",
            "ok/s",
            "waiting in line",
            "4x slower",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert!(svg.len() < 300_000, "{} bytes", svg.len());
    }
}
