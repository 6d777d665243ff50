//! The measurement. First what a runtime sees inside pods of several sizes,
//! then the price of one call, then every arm at every load, blocks
//! interleaved. Each arm at each load gets a fresh pod and a fresh server,
//! so its throttling counts are its own.

use std::{sync::Arc, time::Duration};

use anyhow::Context;
use harness::{
    Folder,
    child::{Child, Spawn},
    pod::{Pod, Throttling},
};
use loadgen::{Counters, Slot, SlotRecord, Summary, Timer, WhenFull, run_bounded};
use per_call::{
    load::{rest_client, unary_call},
    placement::{have, pin_self},
    rest::Http,
};
use program::proc::{self, Pid};
use proto::greeter::v1::greeter_client::GreeterClient;
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::{Deserialize, Serialize};
use tonic::transport::{Channel, Endpoint};

use crate::{
    config::{Arm, Config},
    remote::Scrape,
    server::Serve,
};

/// What the runtime saw in pods of each size (`sees.csv`).
pub const SEES: &str = "sees.csv";
/// The CPU time of one call, measured (`calibration.json`).
pub const CALIBRATION: &str = "calibration.json";
/// One row per arm, load and block (`cells.csv`): the run's table.
pub const CELLS: &str = "cells.csv";
/// Every call of half a second at the highest load, per arm (`window.csv`).
pub const WINDOW: &str = "window.csv";

/// The pod sizes the runtime is started in to see what it sees.
const SEES_LIMITS: [Option<f64>; 6] = [None, Some(0.5), Some(1.0), Some(1.5), Some(2.0), Some(4.0)];
/// A call that takes longer has failed: the worst stall is a period.
const DEADLINE: Duration = Duration::from_secs(2);
/// Calls still running this long after the last is due are cancelled.
const DRAIN: Duration = Duration::from_secs(3);
/// Half a second: five periods, every call in them, per arm.
const WINDOW_LENGTH: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeesRow {
    /// The pod's CPU limit; empty: no pod.
    pub limit_cpus: Option<f64>,
    pub cpus_allowed: String,
    pub parallelism: usize,
    /// Tokio's default multi-thread runtime's worker threads.
    pub workers: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub work_us: u64,
    /// The server process's CPU time per call: the work plus the call's own.
    pub cpu_per_call_us: f64,
    pub calls: u64,
    /// The rate that would fill the quota exactly: load 1.
    pub full_rate: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRow {
    pub block: usize,
    /// Calls per arrival.
    pub together: usize,
    pub load: f64,
    /// Calls a second, on average (arrivals are random: Poisson).
    pub rate: f64,
    pub arm: Arm,
    pub workers: usize,
    pub scheduled: u64,
    pub ok: u64,
    pub failed: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The generator's own lateness: how far behind schedule it sent.
    pub late_p99_ms: f64,
    /// The server's CPU time over the quota it was given in that time.
    pub cpu_of_quota: f64,
    pub periods: u64,
    pub throttled: u64,
    pub throttled_ms: f64,
    pub loadavg_1m: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowRow {
    pub arm: Arm,
    /// From the start of the window.
    pub due_ms: f64,
    pub latency_ms: f64,
}

/// Where the generator runs: alone on the last CPU when it can be pinned.
/// The pod's processes may run on every CPU (a pod without the static CPU
/// manager gets a quota, not cores), so on a 2-core machine the server's
/// second thread shares the generator's core; the lateness column says
/// whether that mattered.
fn place(machine_cpus: usize) -> anyhow::Result<(Vec<String>, String)> {
    if machine_cpus < 2 || !have("taskset") {
        return Ok((
            Vec::new(),
            "generator not pinned (one CPU, or no taskset): it shares the server's CPUs".into(),
        ));
    }
    let last = machine_cpus - 1;
    pin_self(last)?;
    // The server is started by this pinned process, so it would inherit the
    // pin: give it back every CPU.
    let all = format!("0-{last}");
    let note = format!("generator pinned to CPU {last}; the pod may run on CPUs {all}");
    Ok((vec!["taskset".into(), "-c".into(), all], note))
}

struct Ctx<'a> {
    config: &'a Config,
    exe: std::path::PathBuf,
    placement: Vec<String>,
    /// Reads a remote server's metrics.
    http: reqwest::Client,
}

/// The server under test: started here in a fresh pod, or running elsewhere.
enum Server {
    Local(Pod, Box<Child<Serve>>),
    Remote { addr: String, metrics: String },
}

/// A server's counters at one moment.
struct Reading {
    cpu_ns: u64,
    throttling: Throttling,
    workers: usize,
}

impl Ctx<'_> {
    /// A fresh pod of `cpus` (with CFS burst if the arm asks) and the server
    /// of `arm` started inside it; with `--target`, the server out there.
    async fn server(&self, cpus: f64, arm: Arm) -> anyhow::Result<Server> {
        if let Some((addr, metrics)) = &self.config.target {
            return Ok(Server::Remote {
                addr: addr.clone(),
                metrics: metrics.clone(),
            });
        }
        let pod = Pod::create("ch17", cpus)?;
        if arm.burst {
            pod.set_burst(cpus)?;
        }
        let server = self.start(arm, Some(&pod)).await?;
        Ok(Server::Local(pod, Box::new(server)))
    }

    /// The server of `arm` in `pod` (none: outside any), as this run places it.
    async fn start(&self, arm: Arm, pod: Option<&Pod>) -> anyhow::Result<Child<Serve>> {
        let mut wrapper = self.placement.clone();
        wrapper.extend(pod.map(Pod::wrapper).unwrap_or_default());
        let how = Spawn {
            wrapper,
            ..Spawn::default()
        };
        let serve = Serve {
            arm,
            work_us: self.config.work_us,
        };
        Child::start(&self.exe, &serve, &how).await
    }

    /// The server's CPU time so far, and its pod's throttling.
    async fn read(&self, server: &Server) -> anyhow::Result<Reading> {
        match server {
            Server::Local(pod, child) => Ok(Reading {
                cpu_ns: proc::cpu_ns(Pid::Of(child.ready.pid)),
                throttling: pod.throttling()?,
                workers: child.ready.workers,
            }),
            Server::Remote { metrics, .. } => {
                let scrape = Scrape::of(&self.http, metrics).await?;
                Ok(Reading {
                    cpu_ns: scrape.cpu_ns,
                    throttling: scrape.throttling.unwrap_or_default(),
                    workers: scrape.workers,
                })
            }
        }
    }
}

impl Server {
    /// A client on one HTTP/2 connection to it.
    async fn client(&self) -> anyhow::Result<GreeterClient<Channel>> {
        let addr = match self {
            Server::Local(_, child) => child.ready.addr.to_string(),
            Server::Remote { addr, .. } => addr.clone(),
        };
        let channel = Endpoint::from_shared(format!("http://{addr}"))?
            .tcp_nodelay(true)
            .connect()
            .await
            .with_context(|| format!("cannot connect to the server at {addr}"))?;
        Ok(GreeterClient::new(channel))
    }

    /// Stops a local server (its pod goes with it); a remote one runs on.
    async fn stop(self) -> anyhow::Result<()> {
        match self {
            Server::Local(_pod, child) => child.stop().await,
            Server::Remote { .. } => Ok(()),
        }
    }
}

/// Arrival times of a Poisson process: independent callers, as a real
/// service sees them, `together` calls at each arrival (a page that fans
/// out into that many calls at once), `rate` calls a second on average.
/// The same seed gives every arm the same calls.
pub fn arrivals(rate: f64, together: usize, length: Duration, seed: u64) -> Vec<Slot> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut slots = Vec::new();
    let mut at = 0.0;
    loop {
        // 1 - U is in (0, 1]: its logarithm is finite.
        at += -(1.0 - rng.random::<f64>()).ln() * together as f64 / rate;
        if at >= length.as_secs_f64() {
            return slots;
        }
        for _ in 0..together {
            slots.push(Slot {
                index: slots.len() as u64,
                step: 0,
                due: Duration::from_secs_f64(at),
            });
        }
    }
}

/// Unary calls at `slots`' times; prints how it goes every two seconds.
async fn drive(client: &GreeterClient<Channel>, slots: &[Slot], label: &str) -> Vec<SlotRecord> {
    let counters = Arc::new(Counters::default());
    let ticker = {
        let (counters, label) = (counters.clone(), label.to_string());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(2));
            tick.tick().await;
            loop {
                tick.tick().await;
                eprintln!("{label}  {}", counters.line());
            }
        })
    };
    let records = run_bounded(
        slots,
        Timer::Precise,
        100_000,
        WhenFull::Defer,
        DRAIN,
        counters,
        |slot| unary_call(client, DEADLINE, slot),
    )
    .await;
    ticker.abort();
    records
}

/// What a default runtime sees in pods of several sizes, and outside any;
/// a remote server, what it says it sees in its own.
async fn sees(ctx: &Ctx<'_>) -> anyhow::Result<Vec<SeesRow>> {
    if let Some((_, metrics)) = &ctx.config.target {
        let scrape = Scrape::of(&ctx.http, metrics).await?;
        return Ok(vec![SeesRow {
            limit_cpus: scrape.quota_cpus,
            cpus_allowed: scrape.cpus_allowed,
            parallelism: scrape.parallelism,
            workers: scrape.workers,
        }]);
    }
    let auto: Arm = "auto".parse().map_err(anyhow::Error::msg)?;
    let mut rows = Vec::new();
    for limit in SEES_LIMITS {
        let pod = limit.map(|cpus| Pod::create("ch17", cpus)).transpose()?;
        let server = ctx.start(auto, pod.as_ref()).await?;
        let inside = server.ready.clone();
        server.stop().await?;
        rows.push(SeesRow {
            limit_cpus: limit,
            cpus_allowed: inside.cpus_allowed,
            parallelism: inside.parallelism,
            workers: inside.workers,
        });
    }
    Ok(rows)
}

/// The CPU time of one call: `ct` in the pod (or the remote server) at
/// about a third of the quota (`cpus`: the pod's, or the remote one's).
async fn calibrate(ctx: &Ctx<'_>, cpus: f64) -> anyhow::Result<Calibration> {
    let c = ctx.config;
    let ct: Arm = "ct".parse().map_err(anyhow::Error::msg)?;
    let server = ctx.server(cpus, ct).await?;
    let client = server.client().await?;
    let rate = cpus * 1e6 / c.work_us as f64 / 3.0;
    drive(
        &client,
        &arrivals(rate, 1, c.warmup, c.seed),
        "calibration warm-up",
    )
    .await;
    let before = ctx.read(&server).await?;
    let records = drive(
        &client,
        &arrivals(rate, 1, Duration::from_secs(2), c.seed),
        "calibration",
    )
    .await;
    let after = ctx.read(&server).await?;
    server.stop().await?;
    let calls = Summary::of(&records).ok;
    anyhow::ensure!(calls > 0, "no call succeeded while calibrating");
    let cpu_per_call_us = after.cpu_ns.saturating_sub(before.cpu_ns) as f64 / 1e3 / calls as f64;
    anyhow::ensure!(
        cpu_per_call_us > 0.0,
        "the server's CPU time did not move while calibrating"
    );
    Ok(Calibration {
        work_us: c.work_us,
        cpu_per_call_us,
        calls,
        full_rate: cpus * 1e6 / cpu_per_call_us,
    })
}

/// Where a cell stands in the run.
#[derive(Debug, Clone, Copy)]
struct At {
    /// The quota the load is a fraction of.
    cpus: f64,
    block: usize,
    together: usize,
    load: f64,
    rate: f64,
    seed: u64,
}

/// One arm at one load: warm-up, then the measured cell.
async fn cell(
    ctx: &Ctx<'_>,
    arm: Arm,
    at: At,
    label: &str,
) -> anyhow::Result<(CellRow, Vec<SlotRecord>)> {
    let At {
        block,
        together,
        load,
        rate,
        seed,
        ..
    } = at;
    let c = ctx.config;
    let loadavg_1m = proc::loadavg_1m().unwrap_or(f64::NAN);
    let server = ctx.server(at.cpus, arm).await?;
    let client = server.client().await?;
    let warmup = arrivals(rate, together, c.warmup, seed ^ 1);
    drive(&client, &warmup, &format!("{label} warm-up")).await;
    let before = ctx.read(&server).await?;
    let started = std::time::Instant::now();
    let records = drive(&client, &arrivals(rate, together, c.cell, seed), label).await;
    let wall = started.elapsed();
    let after = ctx.read(&server).await?;
    let throttled = after.throttling.since(&before.throttling);
    server.stop().await?;
    let s = Summary::of(&records);
    let row = CellRow {
        block,
        together,
        load,
        rate,
        arm,
        workers: after.workers,
        scheduled: s.scheduled,
        ok: s.ok,
        failed: s.scheduled - s.ok,
        p50_ms: s.latency.p50_ms,
        p99_ms: s.latency.p99_ms,
        max_ms: s.latency.max_ms,
        late_p99_ms: s.lateness.p99_ms,
        cpu_of_quota: after.cpu_ns.saturating_sub(before.cpu_ns) as f64
            / (at.cpus * wall.as_nanos() as f64),
        periods: throttled.periods,
        throttled: throttled.throttled,
        throttled_ms: throttled.throttled_us as f64 / 1e3,
        loadavg_1m,
    };
    Ok((row, records))
}

/// Every call of one half-second of a cell, as dots for the plot.
fn window(arm: Arm, records: &[SlotRecord], cell: Duration) -> Vec<WindowRow> {
    let start = (cell / 2).min(Duration::from_secs(2));
    records
        .iter()
        .filter(|r| r.due >= start && r.due < start + WINDOW_LENGTH)
        .filter_map(|r| {
            Some(WindowRow {
                arm,
                due_ms: (r.due - start).as_secs_f64() * 1e3,
                latency_ms: r.latency()?.as_secs_f64() * 1e3,
            })
        })
        .collect()
}

// ANCHOR: run
/// Runs the experiment; this program is started again as each server.
pub async fn run(config: &Config, folder: &Folder) -> anyhow::Result<()> {
    let (placement, note) = match &config.target {
        None => place(config.machine_cpus)?,
        Some((addr, _)) => (Vec::new(), format!("the server runs elsewhere, at {addr}")),
    };
    eprintln!("{note}");
    folder.write_text("placement.txt", &format!("{note}\n"))?;
    let ctx = Ctx {
        config,
        exe: std::env::current_exe().context("cannot find this program's executable")?,
        placement,
        // Plain HTTP/1.1 for the metrics page (a client with the workspace's
        // crypto provider installed, as reqwest needs even without TLS).
        http: rest_client(Http::H1, 1)?,
    };
    eprintln!("what the runtime sees in pods of several sizes ...");
    let seen = sees(&ctx).await?;
    folder.write_csv(SEES, &seen)?;
    // Here every pod gets --cpus; a remote server's quota is its own.
    let (cpus, arms) = match &config.target {
        None => (config.cpus, config.arms.clone()),
        Some((_, metrics)) => {
            let scrape = Scrape::of(&ctx.http, metrics).await?;
            let arm: Arm = scrape.arm.parse().map_err(anyhow::Error::msg)?;
            (scrape.quota_cpus.unwrap_or(config.cpus), vec![arm])
        }
    };
    let calibration = calibrate(&ctx, cpus).await?;
    eprintln!(
        "one call costs {:.0} µs of CPU: load 1 is {:.0} calls/s in a {cpus}-CPU pod",
        calibration.cpu_per_call_us, calibration.full_rate
    );
    folder.write_json(CALIBRATION, &calibration)?;
    let top = config.loads.iter().copied().fold(f64::MIN, f64::max);
    let most = config.together.iter().copied().max().unwrap_or(1);
    let (mut cells, mut dots) = (Vec::new(), Vec::new());
    let total = config.blocks * config.together.len() * config.loads.len() * arms.len();
    for block in 0..config.blocks {
        for (g, &together) in config.together.iter().enumerate() {
            for (l, &load) in config.loads.iter().enumerate() {
                // Every arm meets the same arrivals; the order of the arms
                // turns by one each block, so that no arm always runs first.
                let at = At {
                    cpus,
                    block,
                    together,
                    load,
                    rate: load * calibration.full_rate,
                    seed: config.seed + 1000 * block as u64 + 100 * g as u64 + l as u64,
                };
                for i in 0..arms.len() {
                    let arm = arms[(i + block) % arms.len()];
                    let label = format!(
                        "[{}/{total}] block {} x{together} load {load} ({:.0}/s) {arm}",
                        cells.len() + 1,
                        block + 1,
                        at.rate
                    );
                    let (row, records) = cell(&ctx, arm, at, &label).await?;
                    eprintln!(
                        "{label}: p99 {:.2} ms, throttled in {} of {} periods",
                        row.p99_ms, row.throttled, row.periods
                    );
                    if block == 0 && load == top && together == most {
                        dots.extend(window(arm, &records, config.cell));
                    }
                    cells.push(row);
                }
            }
        }
    }
    folder.write_csv(CELLS, &cells)?;
    folder.write_csv(WINDOW, &dots)?;
    Ok(())
}
// ANCHOR_END: run

/// The rows of `cells` for one arm at one load and arrival shape, every block.
pub fn of(
    cells: &[CellRow],
    arm: Arm,
    together: usize,
    load: f64,
) -> impl Iterator<Item = &CellRow> {
    cells
        .iter()
        .filter(move |c| c.arm == arm && c.together == together && c.load == load)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_arrivals_keep_their_rate_and_order_and_repeat_with_their_seed() {
        let slots = arrivals(1000.0, 1, Duration::from_secs(10), 7);
        // 10,000 expected; a Poisson count's spread is its square root, 100.
        assert!((9_500..10_500).contains(&slots.len()), "{}", slots.len());
        assert!(slots.windows(2).all(|w| w[0].due <= w[1].due));
        assert!(slots.iter().enumerate().all(|(i, s)| s.index == i as u64));
        assert!(slots.last().unwrap().due < Duration::from_secs(10));
        let second = |seed| arrivals(1000.0, 1, Duration::from_secs(1), seed);
        assert_eq!(second(7), second(7));
        assert_ne!(second(7), second(8));
    }

    #[test]
    fn calls_that_arrive_together_share_their_due_time_and_keep_the_rate() {
        let slots = arrivals(1000.0, 20, Duration::from_secs(10), 7);
        // 500 arrivals expected (spread about 22), of 20 calls each.
        assert_eq!(slots.len() % 20, 0);
        assert!((8_000..12_000).contains(&slots.len()), "{}", slots.len());
        let groups: Vec<&[Slot]> = slots.chunks(20).collect();
        assert!(groups.iter().all(|g| g.iter().all(|s| s.due == g[0].due)));
        assert!(groups.windows(2).all(|w| w[0][0].due < w[1][0].due));
    }

    #[test]
    fn the_window_keeps_half_a_second_of_answered_calls() {
        let arm: Arm = "ct".parse().unwrap();
        let records: Vec<SlotRecord> = arrivals(1000.0, 1, Duration::from_secs(4), 1)
            .into_iter()
            .map(|slot| SlotRecord {
                index: slot.index,
                step: 0,
                due: slot.due,
                started: Some(slot.due),
                ended: Some(slot.due + Duration::from_millis(3)),
                outcome: loadgen::Outcome::Ok,
                deferred: false,
                code: None,
            })
            .collect();
        let dots = window(arm, &records, Duration::from_secs(4));
        let expected = records
            .iter()
            .filter(|r| r.due >= Duration::from_secs(2) && r.due < Duration::from_millis(2500))
            .count();
        assert_eq!(dots.len(), expected);
        assert!(dots.iter().all(|d| (0.0..500.0).contains(&d.due_ms)));
        assert!(dots.iter().all(|d| (d.latency_ms - 3.0).abs() < 1e-6));
    }
}
