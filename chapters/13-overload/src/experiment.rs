//! The experiment: every policy at every offered load, each (policy, load)
//! cell on a fresh server, so no cell inherits another's backlog.

use std::{
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, bail};
use loadgen::{
    cli::code_name,
    open_loop::{Counters, Outcome, SendError, SlotRecord, WhenFull, run_bounded},
    schedule::Schedule,
    summary::Percentiles,
};
use perf::retry::RetryThrottle;
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use serde::Serialize;
use tokio::time::{Instant, sleep};
use tonic::{Code, transport::Endpoint};

use crate::{
    client::{self, Retry, RetryRules},
    server::{Fate, Order, Rules, Running, Work},
};

/// What happens to calls beyond the server's capacity.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// A long FIFO queue; every queued call is worked on, whatever its deadline
    Wait,
    /// Workers plus a short queue; beyond that, RESOURCE_EXHAUSTED at once
    Reject,
    /// Like wait, but calls that cannot finish before their deadline are dropped unworked
    Drop,
    /// Like drop, but the newest call is served first (LIFO)
    DropLifo,
    /// Reject, and callers retry every refusal at once (up to max attempts)
    RetryNaive,
    /// Reject, and callers retry with backoff and jitter under a retry budget
    RetryBudget,
}

impl Policy {
    pub const ALL: [Policy; 6] = [
        Policy::Wait,
        Policy::Reject,
        Policy::Drop,
        Policy::DropLifo,
        Policy::RetryNaive,
        Policy::RetryBudget,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Wait => "wait",
            Policy::Reject => "reject",
            Policy::Drop => "drop",
            Policy::DropLifo => "drop-lifo",
            Policy::RetryNaive => "retry-naive",
            Policy::RetryBudget => "retry-budget",
        }
    }
}

/// Overload policies compared: a server of fixed capacity under open-loop load
/// from half its capacity to three times it; per policy and load, goodput,
/// latency, wasted work and attempts per call.
#[derive(clap::Parser, Debug, Clone)]
#[command(name = "overload", version)]
pub struct Args {
    /// Policies to compare, comma-separated; all run at every load
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "wait,reject,drop,drop-lifo,retry-naive,retry-budget"
    )]
    pub policies: Vec<Policy>,
    /// Offered loads as multiples of capacity, comma-separated
    /// [default: 0.5,1,1.5,2,2.5,3; with --quick: 0.5,1,2,3]
    #[arg(long, value_delimiter = ',')]
    pub loads: Vec<f64>,
    /// Server workers (calls worked on at once)
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Work per call: how long it occupies a worker
    #[arg(long, value_parser = program::duration::parse, default_value = "10ms")]
    pub service: Duration,
    /// Every call's overall deadline, from when it was due
    #[arg(long, value_parser = program::duration::parse, default_value = "300ms")]
    pub deadline: Duration,
    /// drop and drop-lifo start a call only if it can end this long before its deadline
    #[arg(long, value_parser = program::duration::parse, default_value = "5ms")]
    pub margin: Duration,
    /// Queue places for wait, drop and drop-lifo
    #[arg(long, default_value_t = 1024)]
    pub queue: usize,
    /// Queue places for reject and the retry policies
    #[arg(long, default_value_t = 4)]
    pub reject_queue: usize,
    /// How long each load is offered [default: 6s; with --quick: 1.5s]
    #[arg(long, value_parser = program::duration::parse)]
    pub step: Option<Duration>,
    /// The start of each step, left out of the figures
    /// [default: 1.5s; with --quick: 500ms]
    #[arg(long, value_parser = program::duration::parse)]
    pub warmup: Option<Duration>,
    /// Attempts per call under the retry policies, the first included
    #[arg(long, default_value_t = 5)]
    pub max_attempts: u32,
    /// Budgeted retries: backoff before retry n is random in [0, min(cap, base*2^(n-1))]
    #[arg(long, value_parser = program::duration::parse, default_value = "25ms")]
    pub backoff_base: Duration,
    #[arg(long, value_parser = program::duration::parse, default_value = "200ms")]
    pub backoff_cap: Duration,
    /// Budgeted retries: gRPC retry throttling's bucket size and refill per success
    #[arg(long, default_value_t = 10.0)]
    pub budget_tokens: f64,
    #[arg(long, default_value_t = 0.1)]
    pub budget_ratio: f64,
    /// Seed of the backoff jitter
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Shorter steps and fewer loads: under a minute, same shape
    #[arg(long)]
    pub quick: bool,
    /// Folder for the results
    #[arg(long, default_value = "target/experiments/ch13")]
    pub out: PathBuf,
}

/// The settings of a run, checked.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub policies: Vec<Policy>,
    pub loads: Vec<f64>,
    pub workers: usize,
    pub service: Duration,
    pub deadline: Duration,
    pub margin: Duration,
    pub queue: usize,
    pub reject_queue: usize,
    pub step: Duration,
    pub warmup: Duration,
    pub max_attempts: u32,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    pub budget_tokens: f64,
    pub budget_ratio: f64,
    pub seed: u64,
    pub quick: bool,
    pub out: PathBuf,
}

impl Args {
    pub fn config(&self) -> anyhow::Result<Config> {
        let loads = match (self.loads.is_empty(), self.quick) {
            (false, _) => self.loads.clone(),
            (true, false) => vec![0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
            (true, true) => vec![0.5, 1.0, 2.0, 3.0],
        };
        let step = self.step.unwrap_or(if self.quick {
            Duration::from_millis(1500)
        } else {
            Duration::from_secs(6)
        });
        let warmup = self.warmup.unwrap_or(if self.quick {
            Duration::from_millis(500)
        } else {
            Duration::from_millis(1500)
        });
        if let Some(bad) = loads
            .iter()
            .find(|l| !(l.is_finite() && **l > 0.0 && **l <= 20.0))
        {
            bail!(
                "--loads: {bad} is not a load; give multiples of capacity above 0 and at most 20"
            );
        }
        if self.policies.is_empty() {
            bail!("--policies: name at least one policy");
        }
        if self.workers == 0 || self.workers > 256 {
            bail!("--workers must be between 1 and 256");
        }
        if self.service < Duration::from_millis(1) || self.service > Duration::from_secs(1) {
            bail!("--service must be between 1ms and 1s");
        }
        if self.deadline <= self.service {
            bail!("--deadline must be longer than --service, or no call can succeed");
        }
        if warmup >= step {
            bail!("--warmup ({warmup:?}) must be shorter than --step ({step:?})");
        }
        if self.max_attempts == 0 || self.max_attempts > 100 {
            bail!("--max-attempts must be between 1 and 100");
        }
        if !(self.budget_tokens > 0.0 && self.budget_ratio >= 0.0) {
            bail!("--budget-tokens must be above 0 and --budget-ratio not below 0");
        }
        let config = Config {
            policies: self.policies.clone(),
            loads,
            workers: self.workers,
            service: self.service,
            deadline: self.deadline,
            margin: self.margin,
            queue: self.queue,
            reject_queue: self.reject_queue,
            step,
            warmup,
            max_attempts: self.max_attempts,
            backoff_base: self.backoff_base,
            backoff_cap: self.backoff_cap,
            budget_tokens: self.budget_tokens,
            budget_ratio: self.budget_ratio,
            seed: self.seed,
            quick: self.quick,
            out: self.out.clone(),
        };
        let top = config.loads.iter().copied().fold(0.0, f64::max) * config.capacity();
        if top > 20_000.0 {
            bail!("the highest load would offer {top:.0} calls/s; keep it under 20000");
        }
        Ok(config)
    }
}

// ANCHOR: policies
impl Config {
    /// Calls per second the server completes when it is never idle.
    pub fn capacity(&self) -> f64 {
        self.workers as f64 / self.service.as_secs_f64()
    }

    /// The server side of a policy.
    pub fn rules(&self, policy: Policy) -> Rules {
        let (queue, order, drop_expired) = match policy {
            Policy::Wait => (self.queue, Order::Fifo, false),
            Policy::Drop => (self.queue, Order::Fifo, true),
            Policy::DropLifo => (self.queue, Order::Lifo, true),
            Policy::Reject | Policy::RetryNaive | Policy::RetryBudget => {
                (self.reject_queue, Order::Fifo, false)
            }
        };
        Rules {
            workers: self.workers,
            queue,
            order,
            drop_expired,
            service: self.service,
            margin: self.margin,
        }
    }

    /// The caller's side of a policy.
    pub fn retry_rules(&self, policy: Policy) -> RetryRules {
        RetryRules {
            retry: match policy {
                Policy::RetryNaive => Retry::Naive,
                Policy::RetryBudget => Retry::Budgeted,
                _ => Retry::Off,
            },
            max_attempts: self.max_attempts,
            backoff_base: self.backoff_base,
            backoff_cap: self.backoff_cap,
        }
    }
}
// ANCHOR_END: policies

/// The server's figures for one cell, over the measured window.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerFigures {
    /// Worker time spent, as a share of all the workers' time in the window.
    pub busy_share: f64,
    /// The part of that work whose caller had given up before it ended.
    pub wasted_share: f64,
    pub busy_s: f64,
    pub wasted_s: f64,
    /// Calls that arrived in the window, by what became of them.
    pub served: u64,
    pub wasted: u64,
    pub dropped: u64,
    pub shed: u64,
    /// Calls that arrived in the window and were still waiting at the end.
    pub never_started: u64,
    /// Calls already waiting when a call arrived: median and maximum.
    pub queue_p50: usize,
    pub queue_max: usize,
}

/// One (policy, load) cell: what the callers saw, and what the server did.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub policy: Policy,
    /// Offered load as a multiple of capacity, and in calls per second.
    pub load: f64,
    pub offered_per_s: f64,
    /// Calls due in the measured window (after the warm-up).
    pub calls: u64,
    /// Calls due in the window that succeeded within their deadline.
    pub ok: u64,
    /// Successes within the deadline per second, counted when they ended
    /// (so the work done after the step ends is not counted).
    pub goodput_per_s: f64,
    /// From due to the reply, successes only.
    pub ok_latency: Percentiles,
    /// Calls that ended refused (RESOURCE_EXHAUSTED), and how fast they knew.
    pub refused: u64,
    pub refused_latency: Percentiles,
    /// Calls that ended at their deadline (DEADLINE_EXCEEDED), dropped ones included.
    pub timed_out: u64,
    /// Anything else: other codes, or not sent at all.
    pub other: u64,
    /// Attempts per offered call (1.0: no retries).
    pub attempts_per_call: f64,
    pub server: ServerFigures,
}

/// A cell, with the raw records it was computed from.
pub struct CellRun {
    pub cell: Cell,
    pub calls: Vec<(SlotRecord, u32)>,
    pub work: Vec<Work>,
    pub arrivals: Vec<(Instant, usize)>,
    /// The instant the cell's schedule started: the zero of every time above.
    pub base: Instant,
}

/// Calls a generator keeps in flight before it sheds; far above what any cell
/// needs (offered rate x deadline), so it never decides anything.
pub const MAX_IN_FLIGHT: usize = 20_000;

// ANCHOR: run_cell
/// Runs one cell: a fresh server with the policy's rules, open-loop calls at
/// `load` x capacity for `config.step`, each with the policy's retries.
pub async fn run_cell(config: &Config, policy: Policy, load: f64) -> anyhow::Result<CellRun> {
    let server = Running::start(config.rules(policy)).await?;
    let channel = Endpoint::from_shared(server.url())?
        .connect()
        .await
        .with_context(|| format!("cannot connect to our own server at {}", server.url()))?;
    let greeter = GreeterClient::new(channel);
    let slots = Schedule::constant(load * config.capacity(), config.step).slots();
    let attempts: Arc<Vec<AtomicU32>> = Arc::new(slots.iter().map(|_| AtomicU32::new(0)).collect());
    let shared = Arc::new(client::Shared::new(
        RetryThrottle::new(config.budget_tokens, config.budget_ratio),
        config.seed,
    ));
    let rules = config.retry_rules(policy);
    let deadline = config.deadline;
    let counters = Arc::new(Counters::default());
    let progress = tokio::spawn(loadgen::cli::progress(counters.clone()));

    let base = Instant::now();
    let records = run_bounded(
        &slots,
        MAX_IN_FLIGHT,
        WhenFull::Shed,
        deadline + Duration::from_secs(1),
        counters,
        |slot| {
            let (greeter, attempts, shared) = (greeter.clone(), attempts.clone(), shared.clone());
            // One overall deadline, counted from when the call was due.
            let call_deadline = base + slot.due + deadline;
            async move {
                let ended = client::call(&rules, &shared, call_deadline, |remaining| {
                    let mut greeter = greeter.clone();
                    let mut request = tonic::Request::new(HelloRequest {
                        name: format!("call {}", slot.index),
                        delay_ms: 0,
                    });
                    // Sent as grpc-timeout: the server learns when we give up.
                    request.set_timeout(remaining);
                    async move {
                        greeter
                            .say_hello(request)
                            .await
                            .map(drop)
                            .map_err(|s| match s.code() {
                                // tonic reports its own client-side timeout as CANCELLED.
                                Code::Cancelled => Code::DeadlineExceeded,
                                code => code,
                            })
                    }
                })
                .await;
                attempts[slot.index as usize].store(ended.attempts, Ordering::Relaxed);
                ended.result.map_err(|code| SendError {
                    code: code_name(code),
                    fatal: false,
                })
            }
        },
    )
    .await;
    progress.abort();
    // Let the calls in the workers' hands end, so their work is counted.
    sleep(config.service * 2).await;
    let work = server.pool.records();
    let arrivals = server.pool.arrivals();
    drop(server);

    let calls: Vec<(SlotRecord, u32)> = records
        .into_iter()
        .map(|r| {
            let n = attempts[r.index as usize].load(Ordering::Relaxed);
            (r, n)
        })
        .collect();
    let cell = figures(config, policy, load, &calls, &work, &arrivals, base);
    Ok(CellRun {
        cell,
        calls,
        work,
        arrivals,
        base,
    })
}
// ANCHOR_END: run_cell

/// The figures of one cell, over the window from the end of the warm-up to
/// the end of the step.
pub fn figures(
    config: &Config,
    policy: Policy,
    load: f64,
    calls: &[(SlotRecord, u32)],
    work: &[Work],
    arrivals: &[(Instant, usize)],
    base: Instant,
) -> Cell {
    let window = config.warmup..config.step;
    let measured: Vec<&(SlotRecord, u32)> = calls
        .iter()
        .filter(|(r, _)| window.contains(&r.due))
        .collect();
    let secs = (config.step - config.warmup).as_secs_f64();
    let code_is = |r: &SlotRecord, code: Code| {
        r.outcome == Outcome::Failed && r.code.as_deref() == Some(code_name(code).as_str())
    };
    let good: Vec<Duration> = measured
        .iter()
        .filter(|(r, _)| r.outcome == Outcome::Ok)
        .filter_map(|(r, _)| r.latency())
        .filter(|l| *l <= config.deadline)
        .collect();
    let refused: Vec<Duration> = measured
        .iter()
        .filter(|(r, _)| code_is(r, Code::ResourceExhausted))
        .filter_map(|(r, _)| r.latency())
        .collect();
    let ended_in_window = calls
        .iter()
        .filter(|(r, _)| r.outcome == Outcome::Ok)
        .filter(|(r, _)| r.latency().is_some_and(|l| l <= config.deadline))
        .filter(|(r, _)| r.ended.is_some_and(|e| window.contains(&e)))
        .count();
    let timed_out = measured
        .iter()
        .filter(|(r, _)| code_is(r, Code::DeadlineExceeded))
        .count() as u64;
    let ok = good.len() as u64;
    let calls_n = measured.len() as u64;
    Cell {
        policy,
        load,
        offered_per_s: load * config.capacity(),
        calls: calls_n,
        ok,
        goodput_per_s: ended_in_window as f64 / secs,
        ok_latency: Percentiles::of(good),
        refused: refused.len() as u64,
        refused_latency: Percentiles::of(refused.iter().copied()),
        timed_out,
        other: calls_n - ok - refused.len() as u64 - timed_out,
        attempts_per_call: client::amplification(measured.iter().map(|(_, a)| *a)),
        server: server_figures(
            config,
            work,
            arrivals,
            base + config.warmup,
            base + config.step,
        ),
    }
}

/// Worker time inside [from, to], and the part of it spent on calls whose
/// caller had given up before the work ended. Counted by time, not by call,
/// so a backlog left at the end of the step does not count, and work that
/// spans the window's edges counts only for the part inside it.
pub fn server_figures(
    config: &Config,
    work: &[Work],
    arrivals: &[(Instant, usize)],
    from: Instant,
    to: Instant,
) -> ServerFigures {
    let mut busy = Duration::ZERO;
    let mut wasted = Duration::ZERO;
    for w in work {
        let (Some(started), Some(ended)) = (w.started, w.ended) else {
            continue;
        };
        let inside = ended.min(to).saturating_duration_since(started.max(from));
        busy += inside;
        if w.fate == Fate::Wasted {
            wasted += inside;
        }
    }
    let arrived: Vec<&Work> = work
        .iter()
        .filter(|w| w.arrived >= from && w.arrived < to)
        .collect();
    let count = |fate: Fate| arrived.iter().filter(|w| w.fate == fate).count() as u64;
    let mut depths: Vec<usize> = arrivals
        .iter()
        .filter(|(at, _)| *at >= from && *at < to)
        .map(|(_, depth)| *depth)
        .collect();
    depths.sort_unstable();
    let worker_time = (to - from).as_secs_f64() * config.workers as f64;
    ServerFigures {
        busy_share: busy.as_secs_f64() / worker_time,
        wasted_share: if busy.is_zero() {
            0.0
        } else {
            wasted.as_secs_f64() / busy.as_secs_f64()
        },
        busy_s: busy.as_secs_f64(),
        wasted_s: wasted.as_secs_f64(),
        served: count(Fate::Served),
        wasted: count(Fate::Wasted),
        dropped: count(Fate::Dropped),
        shed: count(Fate::Shed),
        never_started: (depths.len() as u64).saturating_sub(arrived.len() as u64),
        queue_p50: depths.get(depths.len() / 2).copied().unwrap_or(0),
        queue_max: depths.last().copied().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn config() -> Config {
        Args::parse_from(["overload"]).config().unwrap()
    }

    #[test]
    fn defaults_are_the_chapter_scenario() {
        let c = config();
        assert_eq!(c.capacity(), 400.0);
        assert_eq!(c.loads, [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]);
        assert_eq!(c.policies, Policy::ALL);
        let quick = Args::parse_from(["overload", "--quick"]).config().unwrap();
        assert_eq!(quick.loads, [0.5, 1.0, 2.0, 3.0]);
        assert!(quick.step < c.step);
        assert!(c.rules(Policy::Drop).drop_expired && !c.rules(Policy::Wait).drop_expired);
        assert_eq!(c.rules(Policy::DropLifo).order, Order::Lifo);
        assert_eq!(c.rules(Policy::RetryNaive), c.rules(Policy::Reject));
        assert_eq!(c.retry_rules(Policy::Reject).retry, Retry::Off);
    }

    #[test]
    fn bad_settings_are_refused_with_the_flag_named() {
        for (args, flag) in [
            (vec!["--loads", "0"], "--loads"),
            (vec!["--loads", "NaN"], "--loads"),
            (vec!["--workers", "0"], "--workers"),
            (vec!["--deadline", "5ms"], "--deadline"),
            (vec!["--step", "1s", "--warmup", "2s"], "--warmup"),
            (vec!["--max-attempts", "0"], "--max-attempts"),
        ] {
            let parsed =
                Args::try_parse_from(std::iter::once("overload").chain(args.iter().copied()))
                    .unwrap();
            let error = parsed.config().unwrap_err().to_string();
            assert!(error.contains(flag), "{args:?}: {error}");
        }
        assert!(Args::try_parse_from(["overload", "--policies", "pray"]).is_err());
    }

    #[test]
    fn wasted_work_is_the_late_part_of_the_busy_time_inside_the_window() {
        let c = config();
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let w = |start: u64, fate: Fate| Work {
            arrived: ms(start),
            deadline: None,
            started: Some(ms(start)),
            ended: Some(ms(start + 10)),
            waiting_ahead: start as usize,
            fate,
        };
        let work = [
            w(95, Fate::Served), // half inside the window
            w(200, Fate::Wasted),
            w(300, Fate::Served),
            w(995, Fate::Wasted), // half inside
        ];
        let arrivals: Vec<(Instant, usize)> = [95, 200, 300, 995, 996]
            .into_iter()
            .map(|t| (ms(t), t as usize))
            .collect();
        let s = server_figures(&c, &work, &arrivals, ms(100), ms(1000));
        assert!((s.busy_s - 0.030).abs() < 1e-9, "{s:?}");
        assert!((s.wasted_s - 0.015).abs() < 1e-9, "{s:?}");
        assert!((s.wasted_share - 0.5).abs() < 1e-9);
        // Calls counted by arrival: the first arrived before the window.
        assert_eq!((s.served, s.wasted), (1, 2));
        assert_eq!(s.queue_max, 996);
        assert_eq!(s.never_started, 1, "996 arrived and was still waiting");
    }
}
