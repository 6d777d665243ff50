//! The experiment: every arm, both shapes, a ramp each, repeats interleaved.

use std::{
    fmt::Write as _,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context, bail};
use clap::Parser;
use harness::{
    RunMeta,
    plot::{Bar, BarPanel, Panel, Series, bars, panels},
    records::{write, write_json},
};
use loadgen::{Counters, Schedule, SlotRecord, WhenFull, run_bounded};
use program::proc::{self, Pid};
use proto::greeter::v1::greeter_client::GreeterClient;
use serde::Serialize;

use crate::{
    arm::{Arm, Flavour},
    h2load::{CrossCheck, cross_check},
    load::{Streams, connect, unary_call},
    ramp::{KneeReason, PerUnit, Ramp, Shape, Spread, StepResult, knee, plateau},
    server::{Placement, ServerInfo, ServerProcess, Snapshot},
    syscalls::{SyscallCount, count},
};

// ANCHOR: args
/// The per-call price: a tiny echo served as unary calls and as messages on
/// persistent bidirectional streams, by a server pinned to one core, under an
/// open-loop ramp of offered load, for each runtime arm. Writes CSV, JSON,
/// Markdown and SVG to --out.
#[derive(Parser, Debug, Clone)]
#[command(name = "per_call", version)]
pub struct Args {
    /// Server arms, FLAVOUR-HANDLER: `ct` (current-thread runtime) or `mtN`
    /// (multi-thread, N workers), `inline` or `spawn` (a task per call or message)
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ct-inline,ct-spawn,mt2-inline,mt2-spawn"
    )]
    pub arms: Vec<Arm>,
    /// Ramps per arm and shape; arms are interleaved within each repeat (A B A B)
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Unary calls per second, FROM:TO:STEPS (geometric)
    #[arg(long, default_value = "8000:128000:9")]
    pub unary_ramp: Ramp,
    /// Streamed messages per second, FROM:TO:STEPS (geometric)
    #[arg(long, default_value = "32000:724000:10")]
    pub stream_ramp: Ramp,
    /// How long each step offers its rate
    #[arg(long, value_parser = program::duration::parse, default_value = "2s")]
    pub step: Duration,
    /// Load at the ramp's first rate before the ramp, not recorded
    #[arg(long, value_parser = program::duration::parse, default_value = "1s")]
    pub warmup: Duration,
    /// Persistent Echo streams the messages are spread over
    #[arg(long, default_value_t = 20)]
    pub streams: usize,
    /// Calls (or messages) in flight at most; beyond that a slot waits or is
    /// shed. Little's law: it must exceed rate x latency, or the bound, not
    /// the server, sets the plateau (724k msg/s x 0.5 ms = 362)
    #[arg(long, default_value_t = 1024)]
    pub max_in_flight: usize,
    /// What a slot does when --max-in-flight are busy
    #[arg(long, value_enum, default_value = "defer")]
    pub when_full: WhenFull,
    /// Deadline of each call (or each message's echo)
    #[arg(long, value_parser = program::duration::parse, default_value = "1s")]
    pub deadline: Duration,
    /// Rate of the strace runs, for both shapes (strace slows the server several-fold)
    #[arg(long, default_value_t = 2000.0)]
    pub strace_rate: f64,
    /// Skip counting system calls per unit with strace (done only when strace is installed)
    #[arg(long)]
    pub no_strace: bool,
    /// Do not pin the server to CPU 0 and the generator to CPU 1
    #[arg(long)]
    pub no_pin: bool,
    /// A short version that keeps the shape of the result: one repeat, shorter
    /// and fewer steps, and only ct-inline and mt2-spawn when more arms are named
    #[arg(long)]
    pub quick: bool,
    /// Keep every Nth slot's record in samples.csv (all slots count in the
    /// summaries; a full run has tens of millions of slots)
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub raw_every: u64,
    /// Folder for the results
    #[arg(long, default_value = "target/experiments/ch14")]
    pub out: PathBuf,
    /// Run as the server process for ARM (the experiment starts these itself)
    #[arg(long, hide = true, value_name = "ARM")]
    pub serve: Option<Arm>,
}
// ANCHOR_END: args

impl Args {
    /// The settings a run really uses: --quick shortens them.
    pub fn effective(&self) -> Args {
        let mut a = self.clone();
        if a.quick {
            a.repeats = 1;
            a.no_strace = true;
            a.step = a.step.min(Duration::from_millis(800));
            a.warmup = a.warmup.min(Duration::from_millis(300));
            a.unary_ramp.steps = a.unary_ramp.steps.min(5);
            a.stream_ramp.steps = a.stream_ramp.steps.min(6);
            if a.arms.len() > 2 {
                // The two ends of the spectrum: everything on one thread, and
                // a hop to a pool of two per unit of work.
                a.arms = vec![
                    "ct-inline".parse().expect("valid"),
                    "mt2-spawn".parse().expect("valid"),
                ];
            }
        }
        a
    }

    pub fn check(&self) -> anyhow::Result<()> {
        if self.arms.is_empty() {
            bail!("--arms names no arm");
        }
        if self.repeats == 0 {
            bail!("--repeats must be at least 1");
        }
        if self.step < Duration::from_millis(100) {
            bail!("--step must be at least 100ms");
        }
        if self.streams == 0 || self.streams > 1000 {
            bail!("--streams must be between 1 and 1000");
        }
        if self.max_in_flight == 0 {
            bail!("--max-in-flight must be at least 1");
        }
        if !(self.strace_rate.is_finite() && self.strace_rate >= 1.0) {
            bail!("--strace-rate must be at least 1");
        }
        if self.deadline.is_zero() {
            bail!("--deadline must be above 0");
        }
        Ok(())
    }
}

/// One ramp of one arm and shape.
#[derive(Debug, Clone, Serialize)]
pub struct RampResult {
    pub arm: String,
    pub shape: Shape,
    pub repeat: usize,
    pub server: ServerInfo,
    /// The machine's 1-minute load average when the ramp started: on a
    /// shared machine, how much else was running.
    pub loadavg_1m: f64,
    pub plateau: f64,
    pub knee_offered: Option<f64>,
    pub knee_reason: Option<KneeReason>,
    pub steps: Vec<StepResult>,
}

/// The summary of one arm over its repeats.
#[derive(Debug, Clone, Serialize)]
pub struct ArmSummary {
    pub arm: String,
    pub unary_plateau: Spread,
    pub unary_knee: Spread,
    pub stream_plateau: Spread,
    pub stream_knee: Spread,
    /// Streamed messages/s over unary calls/s, per repeat.
    pub ratio: Spread,
    /// Units one core could answer at the plateau step's CPU cost per unit
    /// (1 s / CPU per unit): a capacity that does not depend on who else
    /// used the core, nor on whether the generator kept up.
    pub unary_cpu_capacity: Spread,
    pub stream_cpu_capacity: Spread,
    pub cpu_ratio: Spread,
    /// Server and generator CPU (fraction of one core) at the plateau step.
    pub unary_cpu_at_plateau: (Spread, Spread),
    pub stream_cpu_at_plateau: (Spread, Spread),
    pub unary_low: PerUnit,
    pub unary_high: PerUnit,
    pub stream_low: PerUnit,
    pub stream_high: PerUnit,
}

/// The progress line's subject, and the counters of the step under way.
type Now = Arc<Mutex<(String, Arc<Counters>)>>;

async fn progress(now: Now) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        tick.tick().await;
        let (label, counters) = now.lock().expect("not poisoned").clone();
        eprintln!("{label}  {}", counters.line());
    }
}

/// Checks the server's own account of its configuration against the arm, and
/// counts its threads from outside, in /proc/PID/task.
pub fn verify(info: &ServerInfo, arm: Arm) -> anyhow::Result<()> {
    let outside = proc::thread_names(Pid::Of(info.pid));
    let named = outside
        .iter()
        .filter(|n| *n == crate::arm::WORKER_THREAD_NAME)
        .count();
    let expected_named = match arm.flavour {
        Flavour::CurrentThread => 0,
        Flavour::MultiThread(n) => n,
    };
    if info.workers != arm.workers()
        || named != expected_named
        || info.named_worker_threads != named
    {
        bail!(
            "server for {arm} runs {} workers and {named} worker threads (it says {}); expected {} and {expected_named}",
            info.workers,
            info.named_worker_threads,
            arm.workers()
        );
    }
    Ok(())
}

struct Ctx<'a> {
    args: &'a Args,
    exe: PathBuf,
    server_cpu: Option<usize>,
    now: Now,
    raw: String,
}

// ANCHOR: one_ramp
async fn one_ramp(
    ctx: &mut Ctx<'_>,
    arm: Arm,
    shape: Shape,
    repeat: usize,
    label: &str,
) -> anyhow::Result<RampResult> {
    let args = ctx.args;
    let loadavg_1m = proc::loadavg_1m().unwrap_or(f64::NAN);
    let mut server = ServerProcess::start(&ctx.exe, arm, ctx.server_cpu)?;
    verify(&server.info, arm)?;
    let channel = connect(server.info.addr).await?;
    let ramp = match shape {
        Shape::Unary => args.unary_ramp,
        Shape::Stream => args.stream_ramp,
    };
    // Both shapes go through the same bounded open-loop driver; only what one
    // slot does differs.
    let client = GreeterClient::new(channel.clone());
    let streams = match shape {
        Shape::Stream => Some(Streams::open(channel, args.streams, args.deadline).await?),
        Shape::Unary => None,
    };
    let unary = unary_call(&client, args.deadline);
    let drive = |slots: Vec<loadgen::Slot>, counters: Arc<Counters>| {
        let streams = streams.clone();
        let unary = &unary;
        async move {
            match &streams {
                Some(s) => {
                    run_bounded(
                        &slots,
                        args.max_in_flight,
                        args.when_full,
                        args.deadline,
                        counters,
                        |slot| s.call(slot),
                    )
                    .await
                }
                None => {
                    run_bounded(
                        &slots,
                        args.max_in_flight,
                        args.when_full,
                        args.deadline,
                        counters,
                        unary,
                    )
                    .await
                }
            }
        }
    };
    let rates = ramp.rates();
    *ctx.now.lock().expect("not poisoned") = (format!("{label} warm-up"), Arc::default());
    drive(
        Schedule::constant(rates[0], args.warmup).slots(),
        Arc::default(),
    )
    .await;

    let mut steps = Vec::new();
    for (i, &rate) in rates.iter().enumerate() {
        let counters = Arc::new(Counters::default());
        *ctx.now.lock().expect("not poisoned") = (
            format!("{label} step {}/{} {rate}/s", i + 1, rates.len()),
            counters.clone(),
        );
        let slots = Schedule::constant(rate, args.step).slots();
        let before = server.snapshot()?;
        let client_before = proc::cpu_ns(Pid::This);
        let started = std::time::Instant::now();
        let records = drive(slots, counters).await;
        let wall = started.elapsed();
        let delta: Snapshot = server.snapshot()?.since(&before);
        let client_cpu = (proc::cpu_ns(Pid::This) - client_before) as f64 / wall.as_nanos() as f64;
        let units = match shape {
            Shape::Unary => delta.unary_calls,
            Shape::Stream => delta.messages,
        };
        let step = StepResult {
            arm: arm.to_string(),
            shape,
            repeat,
            step: i,
            server_cpu: delta.cpu_ns as f64 / wall.as_nanos() as f64,
            client_cpu,
            per_unit: PerUnit::of(&delta, units),
            ..StepResult::from_records(&records, rate, args.step)
        };
        keep_raw(&mut ctx.raw, &step, &records, args.raw_every);
        let saturated = step.saturated();
        steps.push(step);
        if saturated {
            break; // past capacity: more steps would only say so again
        }
    }
    let info = server.info.clone();
    server.stop()?;
    let knee = knee(&steps);
    Ok(RampResult {
        arm: arm.to_string(),
        shape,
        repeat,
        server: info,
        loadavg_1m,
        plateau: plateau(&steps),
        knee_offered: knee.map(|(i, _)| steps[i].offered),
        knee_reason: knee.map(|(_, r)| r),
        steps,
    })
}
// ANCHOR_END: one_ramp

/// Appends every `every`th record of a step to the raw CSV rows.
fn keep_raw(raw: &mut String, step: &StepResult, records: &[SlotRecord], every: u64) {
    let ms = |d: Option<Duration>| {
        d.map(|d| format!("{:.3}", d.as_secs_f64() * 1e3))
            .unwrap_or_default()
    };
    for r in records.iter().filter(|r| r.index % every == 0) {
        let outcome = serde_json::to_value(r.outcome).unwrap_or_default();
        let _ = writeln!(
            raw,
            "{},{},{},{},{},{},{},{},{},{},{}",
            step.arm,
            step.shape,
            step.repeat,
            step.offered,
            r.index,
            ms(Some(r.due)),
            ms(r.started),
            ms(r.ended),
            outcome.as_str().unwrap_or_default(),
            r.deferred,
            r.code.as_deref().unwrap_or_default().replace(',', ";"),
        );
    }
}

/// Everything a run wrote into results.json.
#[derive(Debug, Serialize)]
pub struct Results<'a> {
    pub meta: RunMeta,
    pub parameters: Parameters<'a>,
    pub placement: &'a Placement,
    pub arms: &'a [ArmSummary],
    pub h2load: &'a CrossCheck,
    pub syscalls: &'a Syscalls,
    pub ramps: &'a [RampResult],
}

#[derive(Debug, Serialize)]
pub struct Parameters<'a> {
    pub arms: Vec<String>,
    pub repeats: usize,
    pub unary_rates: Vec<f64>,
    pub stream_rates: Vec<f64>,
    pub step_s: f64,
    pub warmup_s: f64,
    pub streams: usize,
    pub max_in_flight: usize,
    pub when_full: &'a WhenFull,
    pub deadline_s: f64,
    pub quick: bool,
    pub raw_every: u64,
}

/// System calls per unit, or why they were not counted.
#[derive(Debug, Clone, Serialize)]
pub struct Syscalls {
    pub note: String,
    pub counts: Vec<SyscallCount>,
}

/// The seed's figure: a 1-CPU grpc-java pod, ~2,060-2,140 unary calls/s
/// against ~15,000-16,000 streamed messages/s.
pub const SEED_RATIO: f64 = 7.5;

// ANCHOR: run
/// Runs the experiment; `exe` is this program, started again as the server.
pub async fn run(args: Args, exe: PathBuf, placement: Placement) -> anyhow::Result<()> {
    args.check()?;
    let args = args.effective();
    eprintln!("placement: {}", placement.note);
    let now: Now = Arc::new(Mutex::new(("starting".into(), Arc::default())));
    let ticker = tokio::spawn(progress(now.clone()));
    let mut ctx = Ctx {
        args: &args,
        exe,
        server_cpu: placement.pinned.then_some(0),
        now,
        raw: String::from(
            "arm,shape,repeat,offered,index,due_ms,started_ms,ended_ms,outcome,deferred,code\n",
        ),
    };
    let total = args.repeats * args.arms.len() * 2;
    let mut ramps = Vec::new();
    // Interleaved: every arm once per repeat, so that a slow minute on a
    // shared machine hits all arms alike instead of one arm's whole sample.
    for repeat in 0..args.repeats {
        for &arm in &args.arms {
            for shape in [Shape::Unary, Shape::Stream] {
                let label = format!(
                    "[{}/{total}] {arm} {shape} #{}",
                    ramps.len() + 1,
                    repeat + 1
                );
                let ramp = one_ramp(&mut ctx, arm, shape, repeat, &label)
                    .await
                    .with_context(|| format!("{arm} {shape}, repeat {}", repeat + 1))?;
                eprintln!(
                    "{label}: plateau {:.0}/s, knee {}",
                    ramp.plateau,
                    ramp.knee_offered.map_or("not reached".into(), |k| format!(
                        "at {k}/s ({:?})",
                        ramp.knee_reason.expect("with knee")
                    ))
                );
                ramps.push(ramp);
            }
        }
    }
    // The cross-check against the first arm, on a fresh server.
    let check = {
        let arm = args.arms[0];
        let server = ServerProcess::start(&ctx.exe, arm, ctx.server_cpu)?;
        let calls = (args.unary_ramp.to * args.step.as_secs_f64()).max(1000.0) as u64;
        let check = cross_check(server.info.addr, calls, args.max_in_flight, &args.out);
        server.stop()?;
        check
    };
    let syscalls = if args.no_strace {
        Syscalls {
            note: "skipped: --no-strace (or --quick)".into(),
            counts: vec![],
        }
    } else if !crate::server::have("strace") {
        Syscalls {
            note: "skipped: strace not installed (Debian: apt install strace)".into(),
            counts: vec![],
        }
    } else {
        let mut counts = Vec::new();
        for &arm in &args.arms {
            for shape in [Shape::Unary, Shape::Stream] {
                let rate = args.strace_rate;
                *ctx.now.lock().expect("not poisoned") =
                    (format!("strace {arm} {shape} {rate}/s"), Arc::default());
                counts.push(
                    count(
                        &ctx.exe,
                        arm,
                        shape,
                        ctx.server_cpu,
                        rate,
                        args.step,
                        &args.out,
                    )
                    .await
                    .with_context(|| format!("counting system calls of {arm} {shape}"))?,
                );
            }
        }
        Syscalls { note: "strace -f -c around the server process; counts only (strace slows the server several-fold)".into(), counts }
    };
    ticker.abort();
    let summaries: Vec<ArmSummary> = args
        .arms
        .iter()
        .map(|arm| summarize(&arm.to_string(), &ramps))
        .collect();
    write_outputs(
        &args, &placement, &summaries, &check, &syscalls, &ramps, &ctx.raw,
    )?;
    Ok(())
}
// ANCHOR_END: run

/// Per-unit costs at the lowest step, and at the step of highest goodput.
fn per_unit(ramps: &[&RampResult]) -> (PerUnit, PerUnit) {
    let median = |pick: &dyn Fn(&RampResult) -> Option<PerUnit>| {
        let v: Vec<PerUnit> = ramps.iter().filter_map(|r| pick(r)).collect();
        let m = |f: fn(&PerUnit) -> f64| Spread::of(v.iter().map(f)).median;
        PerUnit {
            cpu_us: m(|p| p.cpu_us),
            busy_us: m(|p| p.busy_us),
            context_switches: m(|p| p.context_switches),
            parks: m(|p| p.parks),
            spawned: m(|p| p.spawned),
        }
    };
    let low = median(&|r| r.steps.first().map(|s| s.per_unit));
    let high = median(&|r| {
        r.steps
            .iter()
            .max_by(|a, b| a.goodput.total_cmp(&b.goodput))
            .map(|s| s.per_unit)
    });
    (low, high)
}

pub fn summarize(arm: &str, ramps: &[RampResult]) -> ArmSummary {
    let of = |shape: Shape| -> Vec<&RampResult> {
        ramps
            .iter()
            .filter(|r| r.arm == arm && r.shape == shape)
            .collect()
    };
    let (unary, stream) = (of(Shape::Unary), of(Shape::Stream));
    let ratio = unary.iter().filter_map(|u| {
        let s = stream.iter().find(|s| s.repeat == u.repeat)?;
        (u.plateau > 0.0).then(|| s.plateau / u.plateau)
    });
    let top = |r: &RampResult| -> Option<StepResult> {
        r.steps
            .iter()
            .max_by(|a, b| a.goodput.total_cmp(&b.goodput))
            .cloned()
    };
    let capacity = |ramps: &[&RampResult]| -> Vec<f64> {
        ramps
            .iter()
            .filter_map(|r| top(r))
            .map(|s| 1e6 / s.per_unit.cpu_us)
            .collect()
    };
    let cpus = |ramps: &[&RampResult]| {
        let tops: Vec<StepResult> = ramps.iter().filter_map(|r| top(r)).collect();
        (
            Spread::of(tops.iter().map(|s| s.server_cpu)),
            Spread::of(tops.iter().map(|s| s.client_cpu)),
        )
    };
    let cpu_ratio = unary.iter().filter_map(|u| {
        let s = stream.iter().find(|s| s.repeat == u.repeat)?;
        Some(top(u)?.per_unit.cpu_us / top(s)?.per_unit.cpu_us)
    });
    let (unary_low, unary_high) = per_unit(&unary);
    let (stream_low, stream_high) = per_unit(&stream);
    ArmSummary {
        arm: arm.to_string(),
        unary_plateau: Spread::of(unary.iter().map(|r| r.plateau)),
        unary_knee: Spread::of(unary.iter().filter_map(|r| r.knee_offered)),
        stream_plateau: Spread::of(stream.iter().map(|r| r.plateau)),
        stream_knee: Spread::of(stream.iter().filter_map(|r| r.knee_offered)),
        ratio: Spread::of(ratio),
        unary_cpu_capacity: Spread::of(capacity(&unary)),
        stream_cpu_capacity: Spread::of(capacity(&stream)),
        cpu_ratio: Spread::of(cpu_ratio),
        unary_cpu_at_plateau: cpus(&unary),
        stream_cpu_at_plateau: cpus(&stream),
        unary_low,
        unary_high,
        stream_low,
        stream_high,
    }
}

/// One offered rate of one arm: p99 and goodput over repeats, and the share
/// of slots deferred or shed.
type Point = (f64, Spread, Spread, f64);

/// p99 (median over repeats) of every arm at every offered rate of one shape.
fn p99_curves(args: &Args, shape: Shape, ramps: &[RampResult]) -> Vec<(String, Vec<Point>)> {
    args.arms
        .iter()
        .map(|arm| {
            let arm = arm.to_string();
            let mut rates: Vec<f64> = ramps
                .iter()
                .filter(|r| r.arm == arm && r.shape == shape)
                .flat_map(|r| r.steps.iter().map(|s| s.offered))
                .collect();
            rates.sort_by(f64::total_cmp);
            rates.dedup();
            let points = rates
                .into_iter()
                .map(|rate| {
                    let steps: Vec<&StepResult> = ramps
                        .iter()
                        .filter(|r| r.arm == arm && r.shape == shape)
                        .flat_map(|r| &r.steps)
                        .filter(|s| s.offered == rate)
                        .collect();
                    let deferred: u64 = steps.iter().map(|s| s.deferred + s.shed).sum();
                    let scheduled: u64 = steps.iter().map(|s| s.scheduled).sum();
                    (
                        rate,
                        Spread::of(steps.iter().map(|s| s.p99_ms)),
                        Spread::of(steps.iter().map(|s| s.goodput)),
                        100.0 * deferred as f64 / scheduled.max(1) as f64,
                    )
                })
                .collect();
            (arm, points)
        })
        .collect()
}

fn write_outputs(
    args: &Args,
    placement: &Placement,
    summaries: &[ArmSummary],
    check: &CrossCheck,
    syscalls: &Syscalls,
    ramps: &[RampResult],
    raw: &str,
) -> anyhow::Result<()> {
    let out = &args.out;
    // steps.csv: one row per step of every ramp.
    let mut csv = String::from(
        "arm,shape,repeat,step,offered,scheduled,ok,failed,shed,deferred,unfinished,goodput,p50_ms,p99_ms,max_ms,late_p50_ms,server_cpu,client_cpu,cpu_us_per_unit,busy_us_per_unit,ctx_switches_per_unit,parks_per_unit,spawned_per_unit\n",
    );
    for s in ramps.iter().flat_map(|r| &r.steps) {
        let p = &s.per_unit;
        writeln!(
            csv,
            "{},{},{},{},{},{},{},{},{},{},{},{:.1},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.2},{:.2},{:.3},{:.3},{:.3}",
            s.arm,
            s.shape,
            s.repeat,
            s.step,
            s.offered,
            s.scheduled,
            s.ok,
            s.failed,
            s.shed,
            s.deferred,
            s.unfinished,
            s.goodput,
            s.p50_ms,
            s.p99_ms,
            s.max_ms,
            s.late_p50_ms,
            s.server_cpu,
            s.client_cpu,
            p.cpu_us,
            p.busy_us,
            p.context_switches,
            p.parks,
            p.spawned
        )?;
    }
    write(&out.join("steps.csv"), csv.as_bytes())?;
    write(&out.join("samples.csv"), raw.as_bytes())?;
    let parameters = Parameters {
        arms: args.arms.iter().map(|a| a.to_string()).collect(),
        repeats: args.repeats,
        unary_rates: args.unary_ramp.rates(),
        stream_rates: args.stream_ramp.rates(),
        step_s: args.step.as_secs_f64(),
        warmup_s: args.warmup.as_secs_f64(),
        streams: args.streams,
        max_in_flight: args.max_in_flight,
        when_full: &args.when_full,
        deadline_s: args.deadline.as_secs_f64(),
        quick: args.quick,
        raw_every: args.raw_every,
    };
    write_json(
        &out.join("results.json"),
        &Results {
            meta: RunMeta::now(),
            parameters,
            placement,
            arms: summaries,
            h2load: check,
            syscalls,
            ramps,
        },
    )?;

    let md = markdown(args, placement, summaries, check, syscalls, ramps);
    write(&out.join("results.md"), md.as_bytes())?;
    print!("{md}");

    // p99 against offered load, every arm on one chart per shape. p99 spans
    // three orders of magnitude, so the chart shows its logarithm.
    let log_panel = |shape: Shape, label: &str| Panel {
        y_label: label.into(),
        series: p99_curves(args, shape, ramps)
            .into_iter()
            .map(|(arm, points)| {
                Series::line(
                    arm,
                    points
                        .iter()
                        .map(|(rate, p99, _, _)| {
                            (rate / 1000.0, (p99.median.max(0.01)).log10() + 2.0)
                        })
                        .collect(),
                )
            })
            .collect(),
    };
    panels(
        &out.join("p99-unary.svg"),
        "Unary: p99 against offered load (median of repeats)",
        "offered unary calls per second (thousands)",
        &[log_panel(
            Shape::Unary,
            "p99, log10(ms) + 2 (2 = 1 ms, 5 = 1 s)",
        )],
    )?;
    panels(
        &out.join("p99-stream.svg"),
        "Streams: p99 against offered load (median of repeats)",
        "offered streamed messages per second (thousands)",
        &[log_panel(
            Shape::Stream,
            "p99, log10(ms) + 2 (2 = 1 ms, 5 = 1 s)",
        )],
    )?;
    let bar = |label: &str, s: &Spread| Bar {
        label: label.into(),
        value: s.median,
        low: s.min,
        high: s.max,
    };
    bars(
        &out.join("capacity.svg"),
        "Plateau goodput per arm (bar: median of repeats; whisker: min to max)",
        &[
            BarPanel {
                y_label: "unary calls/s".into(),
                bars: summaries
                    .iter()
                    .map(|s| bar(&s.arm, &s.unary_plateau))
                    .collect(),
            },
            BarPanel {
                y_label: "streamed messages/s".into(),
                bars: summaries
                    .iter()
                    .map(|s| bar(&s.arm, &s.stream_plateau))
                    .collect(),
            },
        ],
    )?;
    println!(
        "\nwrote steps.csv, samples.csv, results.json, results.md, p99-unary.svg, p99-stream.svg and capacity.svg to {}",
        out.display()
    );
    Ok(())
}

/// The Markdown summary: the tables the chapter shows.
pub fn markdown(
    args: &Args,
    placement: &Placement,
    summaries: &[ArmSummary],
    check: &CrossCheck,
    syscalls: &Syscalls,
    ramps: &[RampResult],
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Placement: {}. Steps of {} s, {} repeat(s) interleaved, {} streams, at most {} in flight ({:?} when full), deadline {} s, {} build.\n",
        placement.note,
        args.step.as_secs_f64(),
        args.repeats,
        args.streams,
        args.max_in_flight,
        args.when_full,
        args.deadline.as_secs_f64(),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
    );
    let load = Spread::of(ramps.iter().map(|r| r.loadavg_1m));
    let _ = writeln!(
        md,
        "1-minute load average of the machine at the start of each ramp: median {:.2}, from {:.2} to {:.2} (anything above 0 is other work sharing the two cores).\n",
        load.median, load.min, load.max
    );
    let _ = writeln!(md, "### Capacity\n");
    let _ = writeln!(
        md,
        "| arm | unary plateau (calls/s) | unary knee (offered/s) | stream plateau (msg/s) | stream knee (offered/s) | stream / unary |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|");
    for s in summaries {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            s.arm, s.unary_plateau, s.unary_knee, s.stream_plateau, s.stream_knee, s.ratio
        );
    }
    let _ = writeln!(
        md,
        "\nMedian (min–max, n = repeats). The seed's grpc-java pod: ~2,060–2,140 unary calls/s, ~15,000–16,000 streamed msg/s, ratio ~{SEED_RATIO}x. A knee is the first step whose goodput fell below 95% of offered, or that deferred or shed over 1% of its slots, or whose p99 passed 4x the first step's (and 2 ms); n counts the ramps that reached one.\n"
    );
    let _ = writeln!(
        md,
        "### Capacity from CPU cost (one core / server CPU per unit at the plateau step)\n"
    );
    let _ = writeln!(
        md,
        "| arm | unary calls per CPU-s | streamed msg per CPU-s | ratio | server / generator CPU at unary plateau | same, stream plateau |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|");
    let limit = |(server, client): &(Spread, Spread)| {
        let who = if server.median >= 0.9 {
            "server-bound"
        } else if client.median >= 0.9 {
            "generator-bound"
        } else {
            "neither at 0.9"
        };
        format!("{:.2} / {:.2} ({who})", server.median, client.median)
    };
    for s in summaries {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            s.arm,
            s.unary_cpu_capacity,
            s.stream_cpu_capacity,
            s.cpu_ratio,
            limit(&s.unary_cpu_at_plateau),
            limit(&s.stream_cpu_at_plateau),
        );
    }
    let _ = writeln!(
        md,
        "\nCPU is a fraction of one core over the step's wall time (1.00 = the core was busy throughout). A plateau is the server's capacity only where the server's core was busy (server-bound); where the generator's core was full first, it is the generator's, and the CPU-cost column is the better estimate of the server's. Where neither reaches 0.9, the step ended with the run behind schedule (the wall time includes the deferred tail) or the cores were shared with other work.\n"
    );
    let _ = writeln!(
        md,
        "h2load cross-check: {}\n",
        match check.calls_per_s {
            Some(r) => format!(
                "{r:.0} unary calls/s against {} ({})",
                args.arms[0], check.note
            ),
            None => check.note.clone(),
        }
    );
    for shape in [Shape::Unary, Shape::Stream] {
        let _ = writeln!(
            md,
            "### {} p99 (ms) / goodput (per s) / deferred+shed (%) against offered load\n",
            match shape {
                Shape::Unary => "Unary:",
                Shape::Stream => "Streams:",
            }
        );
        let curves = p99_curves(args, shape, ramps);
        let _ = write!(md, "| offered/s |");
        for (arm, _) in &curves {
            let _ = write!(md, " {arm} |");
        }
        let _ = write!(md, "\n|---|");
        for _ in &curves {
            let _ = write!(md, "---|");
        }
        let _ = writeln!(md);
        let mut rates: Vec<f64> = curves
            .iter()
            .flat_map(|(_, p)| p.iter().map(|x| x.0))
            .collect();
        rates.sort_by(f64::total_cmp);
        rates.dedup();
        for rate in rates {
            let _ = write!(md, "| {rate} |");
            for (_, points) in &curves {
                match points.iter().find(|p| p.0 == rate) {
                    Some((_, p99, goodput, queued)) => {
                        let _ = write!(
                            md,
                            " {:.2} / {:.0} / {:.1} |",
                            p99.median, goodput.median, queued
                        );
                    }
                    None => {
                        let _ = write!(md, " – |");
                    }
                }
            }
            let _ = writeln!(md);
        }
        let _ = writeln!(
            md,
            "\nMedians over the repeats that reached the step (a ramp stops after a step whose goodput is under 80% of offered).\n"
        );
    }
    let _ = writeln!(
        md,
        "### Server cost per unit (a unary call, or one streamed message)\n"
    );
    let _ = writeln!(
        md,
        "| arm | shape | load | CPU µs | worker busy µs | context switches | worker parks | tasks we spawned |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for s in summaries {
        for (shape, load, p) in [
            ("unary", "lowest step", s.unary_low),
            ("unary", "plateau", s.unary_high),
            ("stream", "lowest step", s.stream_low),
            ("stream", "plateau", s.stream_high),
        ] {
            let _ = writeln!(
                md,
                "| {} | {shape} | {load} | {:.2} | {:.2} | {:.3} | {:.3} | {:.2} |",
                s.arm, p.cpu_us, p.busy_us, p.context_switches, p.parks, p.spawned
            );
        }
    }
    let _ = writeln!(
        md,
        "\nMedians over repeats. CPU is the server process's (every thread, /proc/PID/task/*/schedstat); busy and parks are Tokio's stable runtime metrics; hyper's own task per HTTP/2 stream is not counted (Tokio counts spawns only under `--cfg tokio_unstable`)."
    );
    let _ = writeln!(md, "\n### System calls per unit (server process)\n");
    if syscalls.counts.is_empty() {
        let _ = writeln!(md, "{}", syscalls.note);
    } else {
        let _ = writeln!(
            md,
            "| arm | shape | offered/s | syscalls per unit | most frequent (per unit) |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|");
        for c in &syscalls.counts {
            let top: Vec<String> = c.top.iter().map(|(n, v)| format!("{n} {v:.2}")).collect();
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.2} | {} |",
                c.arm,
                c.shape,
                c.rate,
                c.per_unit,
                top.join(", ")
            );
        }
        let _ = writeln!(
            md,
            "\n{}; a run of 2x the step minus a run of 1x, divided by the units answered in between, so start-up and connection set-up cancel out.",
            syscalls.note
        );
    }
    md
}
