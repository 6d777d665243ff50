//! `chain run`: users -> frontend -> middle -> leaf, the leaf's capacity
//! halved for a few seconds, under each retry variant in turn.
//!
//! Every variant gets three fresh processes and the same open-loop load
//! (chapter 11's generator, here in the experiment's own process, which plays
//! the users: each user request has a deadline, after which its user gives
//! up). The variants differ in one rule at a time; a block runs every variant
//! once, and the blocks repeat the whole list, so that a drift of the machine
//! shows up as a difference between blocks rather than between variants.

use std::{path::PathBuf, sync::Arc, time::Duration};

use anyhow::{Context, bail};
use harness::{
    Experiment, Folder,
    child::{Child, Spawn},
    experiment::Flags,
};
use loadgen::{
    Counters, SendError, Timer, WhenFull, cli::code_name, run_bounded, schedule::Schedule,
};
use program::proc::{Pid, cpu_ns};
use serde::{Deserialize, Serialize};
use tokio::time::{Instant, sleep, timeout_at};
use tonic::transport::Endpoint;

use crate::{
    hop::{Gate, Policy, Retrier, Second, Tally, now_us},
    servers::{Counts, Hop, Leaf, Part},
};

// ANCHOR: variants
/// Which layers retry, and what holds their retries back.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Retries {
    /// Every layer (users, frontend, middle) makes up to 3 attempts
    Naive,
    /// Only the middle retries (up to 3 attempts); the others try once
    OneHop,
    /// Naive, with tower's retry budget at every layer (20 % of requests)
    Tower,
    /// Naive, with the SRE book's adaptive throttle, K = 2, at every layer
    Sre2,
    /// Naive, with the SRE book's adaptive throttle, K = 1.1, at every layer
    Sre11,
    /// Naive, with gRFC A6 retry throttling (maxTokens 10, tokenRatio 0.1) at every layer
    A6,
}
// ANCHOR_END: variants

impl Retries {
    pub const ALL: [Retries; 6] = [
        Retries::Naive,
        Retries::OneHop,
        Retries::Tower,
        Retries::Sre2,
        Retries::Sre11,
        Retries::A6,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Retries::Naive => "naive",
            Retries::OneHop => "one hop",
            Retries::Tower => "tower budget",
            Retries::Sre2 => "SRE K=2",
            Retries::Sre11 => "SRE K=1.1",
            Retries::A6 => "A6 (10, 0.1)",
        }
    }

    fn gate(self, sre_window: Duration) -> Gate {
        match self {
            Retries::Naive | Retries::OneHop => Gate::None,
            Retries::Tower => Gate::Tower,
            Retries::Sre2 => Gate::Sre {
                k: 2.0,
                window: sre_window,
            },
            Retries::Sre11 => Gate::Sre {
                k: 1.1,
                window: sre_window,
            },
            Retries::A6 => Gate::A6 {
                max_tokens: 10.0,
                token_ratio: 0.1,
            },
        }
    }
}

/// One variant: the retry rule, and whether deadlines travel and abandoned
/// work stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Variant {
    pub retries: Retries,
    pub deadlines: bool,
}

impl Variant {
    pub fn label(self) -> String {
        let deadlines = if self.deadlines {
            "deadlines passed on"
        } else {
            "no deadlines"
        };
        format!("{}, {deadlines}", self.retries.label())
    }
}

/// The layers, in the order a call passes them.
pub const LAYERS: [&str; 4] = ["users", "frontend", "middle", "leaf"];

/// A three-hop chain under open-loop load, its leaf's capacity halved for a
/// few seconds, once per retry variant. Writes CSV, Markdown and SVG to --out.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// User requests per second (open loop: on schedule, whatever happens)
    #[arg(long, default_value_t = 140.0)]
    pub rate: f64,
    /// How long a user waits for an answer before giving up
    #[arg(long, value_parser = program::duration::parse, default_value = "2s")]
    pub deadline: Duration,
    /// The leaf's workers (its capacity is workers / service per second)
    #[arg(long, default_value_t = 8)]
    pub workers: usize,
    /// The leaf's work per call (a sleep: no CPU)
    #[arg(long, value_parser = program::duration::parse, default_value = "40ms")]
    pub service: Duration,
    /// Calls the leaf queues before it refuses
    #[arg(long, default_value_t = 200)]
    pub queue: usize,
    /// Attempt timeouts of the users, the frontend and the middle
    #[arg(long, value_delimiter = ',', value_parser = program::duration::parse,
          default_value = "1s,500ms,250ms")]
    pub attempt_timeouts: Vec<Duration>,
    /// Load before the trigger (the first --warmup of it is not counted)
    #[arg(long, value_parser = program::duration::parse, default_value = "8s")]
    pub before: Duration,
    /// The start of the load that no table counts: new processes,
    /// connections and throttles settle
    #[arg(long, value_parser = program::duration::parse, default_value = "3s")]
    pub warmup: Duration,
    /// How long the leaf's capacity is halved
    #[arg(long, value_parser = program::duration::parse, default_value = "3s")]
    pub trigger: Duration,
    /// Load after the trigger [default: 30s, the metastability test's span; quick: 10s]
    #[arg(long, value_parser = program::duration::parse)]
    pub after: Option<Duration>,
    /// The SRE throttle's window (the book's two minutes, scaled to the run)
    #[arg(long, value_parser = program::duration::parse, default_value = "10s")]
    pub sre_window: Duration,
    /// Retry rules to run, comma-separated [default: all; quick: naive,a6]
    #[arg(long, value_delimiter = ',', value_enum)]
    pub retries: Option<Vec<Retries>>,
    /// Deadline propagation and cancellation: off, on, or both (off,on)
    /// [default: off,on; quick: off]
    #[arg(long, value_delimiter = ',', value_parser = parse_switch)]
    pub deadlines: Option<Vec<bool>>,
    /// Times the whole list of variants is run [default: 2, quick: 1]
    #[arg(long)]
    pub blocks: Option<u32>,
    /// Seed of every random draw (throttles, backoff)
    #[arg(long, default_value_t = 19)]
    pub seed: u64,
    #[command(flatten)]
    pub flags: Flags,
    /// Folder for the results (an earlier run there is replaced)
    #[arg(long, default_value = "target/experiments/ch19")]
    pub out: PathBuf,
}

fn parse_switch(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("`{text}`: write on or off")),
    }
}

/// The checked configuration a run uses, stored with its results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub rate: f64,
    pub deadline: Duration,
    pub leaf: Leaf,
    /// Users, frontend, middle.
    pub attempt_timeouts: [Duration; 3],
    pub warmup: Duration,
    pub after: Duration,
    pub sre_window: Duration,
    pub variants: Vec<Variant>,
    pub blocks: u32,
    pub seed: u64,
    pub out: PathBuf,
}

impl Experiment for Config {
    fn out(&self) -> &std::path::Path {
        &self.out
    }
}

impl Args {
    pub fn config(&self) -> anyhow::Result<Config> {
        let quick = self.flags.quick;
        loadgen::schedule::check_rate(self.rate).map_err(|e| anyhow::anyhow!("--rate {e}"))?;
        if self.workers == 0 {
            bail!("--workers must be at least 1: a leaf with no worker serves nothing");
        }
        if self.service < Duration::from_millis(1) {
            bail!("--service must be at least 1ms: the leaf's timer has 1 ms ticks");
        }
        let [user, front, middle] = self.attempt_timeouts[..] else {
            bail!(
                "--attempt-timeouts takes three durations (users, frontend, middle), \
                 e.g. 1s,500ms,250ms; got {}",
                self.attempt_timeouts.len()
            );
        };
        if self.deadline.is_zero() || [user, front, middle].iter().any(|t| t.is_zero()) {
            bail!("--deadline and --attempt-timeouts must be above 0");
        }
        if self.warmup >= self.before {
            bail!(
                "--warmup ({:?}) must be shorter than --before ({:?}): some load before the \
                 trigger must be counted",
                self.warmup,
                self.before
            );
        }
        if self.trigger.is_zero() {
            bail!("--trigger must be above 0: a trigger of no time halves nothing");
        }
        let retries = self.retries.clone().unwrap_or(match quick {
            true => vec![Retries::Naive, Retries::A6],
            false => Retries::ALL.to_vec(),
        });
        let deadlines = self.deadlines.clone().unwrap_or(match quick {
            true => vec![false],
            false => vec![false, true],
        });
        let variants = deadlines
            .iter()
            .flat_map(|&deadlines| {
                retries
                    .iter()
                    .map(move |&retries| Variant { retries, deadlines })
            })
            .collect();
        Ok(Config {
            rate: self.rate,
            deadline: self.deadline,
            leaf: Leaf {
                workers: self.workers,
                service: self.service,
                queue: self.queue,
                trigger_at: self.before,
                trigger_for: self.trigger,
            },
            attempt_timeouts: [user, front, middle],
            warmup: self.warmup,
            after: self
                .after
                .unwrap_or(Duration::from_secs(if quick { 10 } else { 30 })),
            sre_window: self.sre_window,
            variants,
            blocks: self.blocks.unwrap_or(if quick { 1 } else { 2 }).max(1),
            seed: self.seed,
            out: self.out.clone(),
        })
    }
}

impl Config {
    /// How long the load runs per variant.
    pub fn span(&self) -> Duration {
        self.leaf.trigger_at + self.leaf.trigger_for + self.after
    }

    /// Each layer's policy: users, frontend, middle.
    pub fn policies(&self, variant: Variant) -> [Policy; 3] {
        let gate = variant.retries.gate(self.sre_window);
        std::array::from_fn(|layer| Policy {
            attempts: match variant.retries {
                Retries::OneHop if layer < 2 => 1,
                _ => 3,
            },
            gate,
            attempt_timeout: self.attempt_timeouts[layer],
            backoff_base: Duration::from_millis(10),
            backoff_cap: Duration::from_millis(100),
            propagate: variant.deadlines,
        })
    }
}

/// The raw records of one variant in one block.
pub fn raw_name(kind: &str, variant: Variant, block: u32) -> String {
    let deadlines = if variant.deadlines { "on" } else { "off" };
    let retries = serde_json::to_value(variant.retries).expect("a name");
    format!(
        "raw/{kind}-{}-{deadlines}-b{block}",
        retries.as_str().expect("a name")
    )
}

/// What each layer counted, second by second: one variant in one block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Counted {
    pub variant: Variant,
    pub block: u32,
    /// In [`LAYERS`]' order.
    pub layers: Vec<Vec<Second>>,
    /// CPU time each process used over the load, in seconds, in [`LAYERS`]'
    /// order (the users: the experiment's own process, the generator).
    pub cpu_s: Vec<f64>,
}

/// Every block, every variant, one after the other.
pub async fn run(config: &Config, folder: &Folder) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find this program's executable")?;
    folder.sub("raw")?;
    let total = config.blocks as usize * config.variants.len();
    for block in 1..=config.blocks {
        for (i, &variant) in config.variants.iter().enumerate() {
            let n = (block as usize - 1) * config.variants.len() + i + 1;
            eprintln!(
                "[{n}/{total}] block {block}: {} ({:.0} s) ...",
                variant.label(),
                config.span().as_secs_f64()
            );
            one(config, folder, &exe, variant, block).await?;
        }
    }
    Ok(())
}

fn pid(child: &Child<Hop>) -> anyhow::Result<Pid> {
    Ok(Pid::Of(child.id().context("a hop exited before the run")?))
}

/// Margin between starting the processes and the run's second 0.
const START_MARGIN: Duration = Duration::from_secs(1);

async fn one(
    config: &Config,
    folder: &Folder,
    exe: &std::path::Path,
    variant: Variant,
    block: u32,
) -> anyhow::Result<()> {
    let t0_us = now_us() + START_MARGIN.as_micros() as u64;
    let start_at = Instant::now() + START_MARGIN;
    let [user, front, middle] = config.policies(variant);
    let seed = config.seed ^ (u64::from(block) << 32);
    let spawn = |name: &str| Spawn {
        log: Some(folder.join(format!("{}-{name}.log", raw_name("hop", variant, block)))),
        ..Spawn::default()
    };
    let hop = |part, seed| Hop {
        part,
        propagate: variant.deadlines,
        t0_us,
        seed,
    };
    let mut leaf = Child::start(exe, &hop(Part::Leaf(config.leaf), seed), &spawn("leaf")).await?;
    let mut middle = Child::start(
        exe,
        &hop(
            Part::Pass {
                next: leaf.ready,
                policy: middle,
            },
            seed + 1,
        ),
        &spawn("middle"),
    )
    .await?;
    let mut front = Child::start(
        exe,
        &hop(
            Part::Pass {
                next: middle.ready,
                policy: front,
            },
            seed + 2,
        ),
        &spawn("frontend"),
    )
    .await?;
    let channel = Endpoint::from_shared(format!("http://{}", front.ready))?
        .tcp_nodelay(true)
        .connect()
        .await?;
    let tally = Arc::new(Tally::new(t0_us));
    let users = Arc::new(Retrier::new(channel, user, seed + 3, tally.clone()));
    if Instant::now() > start_at {
        bail!("the three processes took more than {START_MARGIN:?} to start; is the machine busy?");
    }
    tokio::time::sleep_until(start_at).await;
    let pids = [Pid::This, pid(&front)?, pid(&middle)?, pid(&leaf)?];
    let cpu_before = pids.map(cpu_ns);

    // ANCHOR: users
    let counters = Arc::new(Counters::default());
    let progress = tokio::spawn(loadgen::cli::progress(counters.clone()));
    let slots = Schedule::constant(config.rate, config.span()).slots();
    let deadline = config.deadline;
    let records = run_bounded(
        &slots,
        Timer::Precise,
        100_000,
        WhenFull::Shed,
        deadline + Duration::from_secs(1),
        counters,
        |slot| {
            let users = users.clone();
            // The user gives up `deadline` after the request was due.
            let gives_up = start_at + slot.due + deadline;
            let gives_up_us = t0_us + (slot.due + deadline).as_micros() as u64;
            async move {
                match timeout_at(gives_up, users.call(Some(gives_up_us), Some(gives_up))).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(status)) => Err(SendError {
                        code: code_name(status.code()),
                        fatal: false,
                    }),
                    Err(_) => Err(SendError {
                        code: "gave up".into(),
                        fatal: false,
                    }),
                }
            }
        },
    )
    .await;
    progress.abort();
    // ANCHOR_END: users

    // Abandoned work may still be going on downstream: let it end, so that
    // the counts say what it cost.
    sleep(Duration::from_secs(1)).await;
    let cpu_s = (0..4)
        .map(|i| (cpu_ns(pids[i]) - cpu_before[i]) as f64 / 1e9)
        .collect();
    let mut layers = vec![tally.seconds()];
    for child in [&mut front, &mut middle, &mut leaf] {
        layers.push(child.ask(&Counts).await?);
    }
    for child in [front, middle, leaf] {
        child.stop().await?;
    }
    // A hop logs only when something went wrong: keep the logs that say so.
    for name in ["leaf", "middle", "frontend"] {
        let log = spawn(name).log.expect("every hop has a log");
        if std::fs::metadata(&log).is_ok_and(|m| m.len() == 0) {
            std::fs::remove_file(&log)?;
        }
    }
    folder.write_csv(
        &format!("{}.csv", raw_name("users", variant, block)),
        &records,
    )?;
    folder.write_json(
        &format!("{}.json", raw_name("hops", variant, block)),
        &Counted {
            variant,
            block,
            layers,
            cpu_s,
        },
    )?;
    Ok(())
}
