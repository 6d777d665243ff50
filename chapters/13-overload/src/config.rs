//! The command line and the checked configuration it becomes: which
//! policies, which loads, the server's capacity, the callers' deadline and
//! retry rules. `--quick` changes only defaults.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::bail;
use harness::{Experiment, experiment::Flags, live::LiveArgs};
use serde::{Deserialize, Serialize};

use crate::{
    client::{Retry, RetryRules},
    server::{Order, Rules},
};

/// What happens to calls beyond the server's capacity.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Reject saying when to come back (RetryInfo, Retry-After); callers wait that long
    RetryAfter,
}

// A policy and a transport are printed as `--policies` and `--transports`
// take them, in tables, file names and metric labels alike; serde's
// kebab-case must spell them the same (a test checks that it does).
program::clap_name_display!(Policy);

/// How the callers reach the server: the same pool of workers behind each.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// gRPC's SayHello, every call a stream on one HTTP/2 connection
    Grpc,
    /// POST /v1/greetings over HTTP/1.1: a pool of connections, one call at a time on each
    RestH1,
    /// POST /v1/greetings over HTTP/2: every call a stream on one connection
    RestH2,
}

program::clap_name_display!(Transport);

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
        default_value = "wait,reject,drop,drop-lifo,retry-naive,retry-budget,retry-after"
    )]
    pub policies: Vec<Policy>,
    /// How callers reach the server, comma-separated; every policy and load runs on each
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "grpc,rest-h1,rest-h2"
    )]
    pub transports: Vec<Transport>,
    /// HTTP/1.1 connections the REST caller may open: one call at a time on
    /// each, so a call that finds them all busy waits for one
    #[arg(long, default_value_t = 100)]
    pub h1_connections: usize,
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
    /// Shorter steps and fewer loads (under a minute), or an earlier run rendered again
    #[command(flatten)]
    pub flags: Flags,
    /// Folder for the results (an earlier run there is replaced)
    #[arg(long, default_value = "target/experiments/ch13")]
    pub out: PathBuf,
    /// Serve the running cell's metrics (`GET /metrics`, plain HTTP) on
    /// this address while the experiment runs; off by default
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    #[command(flatten)]
    pub live: LiveArgs,
}

/// The settings of a run, checked: what `config.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub policies: Vec<Policy>,
    pub transports: Vec<Transport>,
    pub h1_connections: usize,
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
        let quick = self.flags.quick;
        let loads = match (self.loads.is_empty(), quick) {
            (false, _) => self.loads.clone(),
            (true, false) => vec![0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
            (true, true) => vec![0.5, 1.0, 2.0, 3.0],
        };
        let step = self.step.unwrap_or(if quick {
            Duration::from_millis(1500)
        } else {
            Duration::from_secs(6)
        });
        let warmup = self.warmup.unwrap_or(if quick {
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
        if self.transports.is_empty() {
            bail!("--transports: name at least one transport");
        }
        if self.h1_connections == 0 || self.h1_connections > 5000 {
            bail!("--h1-connections must be between 1 and 5000");
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
            transports: self.transports.clone(),
            h1_connections: self.h1_connections,
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
            quick,
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
            Policy::Reject | Policy::RetryNaive | Policy::RetryBudget | Policy::RetryAfter => {
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
                Policy::RetryAfter => Retry::WhenTold,
                _ => Retry::Off,
            },
            max_attempts: self.max_attempts,
            backoff_base: self.backoff_base,
            backoff_cap: self.backoff_cap,
        }
    }
}
// ANCHOR_END: policies

impl Experiment for Config {
    fn out(&self) -> &Path {
        &self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Parser, ValueEnum};

    fn config() -> Config {
        Args::parse_from(["overload"]).config().unwrap()
    }

    #[test]
    fn defaults_are_the_chapter_scenario() {
        let c = config();
        assert_eq!(c.capacity(), 400.0);
        assert_eq!(c.loads, [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]);
        assert_eq!(c.policies, Policy::value_variants());
        assert_eq!(c.transports, Transport::value_variants());
        let quick = Args::parse_from(["overload", "--quick"]).config().unwrap();
        assert_eq!(quick.loads, [0.5, 1.0, 2.0, 3.0]);
        assert!(quick.step < c.step);
        assert!(c.rules(Policy::Drop).drop_expired && !c.rules(Policy::Wait).drop_expired);
        assert_eq!(c.rules(Policy::DropLifo).order, Order::Lifo);
        assert_eq!(c.rules(Policy::RetryNaive), c.rules(Policy::Reject));
        assert_eq!(c.retry_rules(Policy::Reject).retry, Retry::Off);
        assert_eq!(c.rules(Policy::RetryAfter), c.rules(Policy::Reject));
        assert_eq!(c.retry_rules(Policy::RetryAfter).retry, Retry::WhenTold);
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
            (vec!["--h1-connections", "0"], "--h1-connections"),
        ] {
            let parsed =
                Args::try_parse_from(std::iter::once("overload").chain(args.iter().copied()))
                    .unwrap();
            let error = parsed.config().unwrap_err().to_string();
            assert!(error.contains(flag), "{args:?}: {error}");
        }
        assert!(Args::try_parse_from(["overload", "--policies", "pray"]).is_err());
        assert!(Args::try_parse_from(["overload", "--transports", "carrier-pigeon"]).is_err());
    }

    #[test]
    fn policies_and_transports_are_spelled_alike_on_the_command_line_and_on_disk() {
        for policy in Policy::value_variants() {
            let on_disk = serde_json::to_value(policy).unwrap();
            assert_eq!(on_disk, serde_json::json!(policy.to_string()));
        }
        for transport in Transport::value_variants() {
            let on_disk = serde_json::to_value(transport).unwrap();
            assert_eq!(on_disk, serde_json::json!(transport.to_string()));
        }
    }
}
