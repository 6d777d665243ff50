//! The measurement: every arm, every shape, a ramp each, repeats
//! interleaved; then h2load's cross-check and the system-call counts of the
//! gRPC shapes. Writes the records
//! of [`crate::records`] and nothing else.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context, bail};
use harness::{
    Folder,
    child::{Child, Spawn},
    pod::{Pod, Version},
};
use loadgen::{Counters, Schedule, SlotRecord, pacing};
use program::proc::{self, Pid};

use crate::{
    arm::{Arm, Flavour},
    config::Config,
    h2load::cross_check,
    load::{Load, Rest, connect},
    placement::{Placement, have, place},
    ramp::{PerUnit, Shape, StepResult, knee, plateau},
    records::{
        H2LOAD, PLACEMENT, RAMPS, RampRecord, SAMPLES, STEPS, SYSCALLS, SampleRow, Syscalls,
    },
    remote::Remote,
    rest::Http,
    server::{ServeArm, ServerInfo, Snapshot, Stats},
    syscalls::{Probe, count},
};

/// Starts the server for `arm`, on `cpu` if given, under `wrapper` if any.
pub async fn start_server(
    exe: &Path,
    arm: Arm,
    cpu: Option<usize>,
    wrapper: Vec<String>,
) -> anyhow::Result<Child<ServeArm>> {
    let how = Spawn {
        cpu,
        wrapper,
        log: None,
    };
    Child::start(exe, &ServeArm { arm }, &how).await
}

/// Asks a server for its totals so far.
pub async fn snapshot(server: &mut Child<ServeArm>) -> anyhow::Result<Snapshot> {
    server.ask(&Stats).await
}

/// The progress line's subject, and the counters of the step under way.
type Now = Arc<Mutex<(String, Arc<Counters>)>>;

async fn progress(now: Now) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        tick.tick().await;
        let (label, counters) = now.lock().expect("not poisoned").clone();
        // Between steps there is nothing under way to report.
        if !label.is_empty() {
            eprintln!("{label}  {}", counters.line());
        }
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
    check(info, arm, named)
}

/// Checks the server's account against the arm, with `named` worker threads
/// counted by whoever could see its threads.
fn check(info: &ServerInfo, arm: Arm, named: usize) -> anyhow::Result<()> {
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

/// The server a ramp drives.
enum Server {
    /// A fresh process for each ramp, in a fresh pod with `--server-cpus`
    /// (dropped after the process: the pod kills what is left in it).
    Local {
        child: Box<Child<ServeArm>>,
        _pod: Option<Pod>,
    },
    /// With `--target`: the one server out there, for every ramp.
    Remote(Remote, ServerInfo),
}

impl Server {
    async fn start(ctx: &Ctx<'_>, arm: Arm) -> anyhow::Result<Server> {
        if let Some((remote, info)) = &ctx.remote {
            if info.arm != arm.to_string() {
                bail!(
                    "the server at --target runs {}, not {arm}: give --arms {}",
                    info.arm,
                    info.arm
                );
            }
            // Its threads are out of sight: its own count has to do.
            check(info, arm, info.named_worker_threads)?;
            return Ok(Server::Remote(remote.clone(), info.clone()));
        }
        let pod = ctx
            .config
            .server_cpus
            .map(|cpus| Pod::create("ch14", cpus))
            .transpose()?;
        let wrapper = pod.as_ref().map(Pod::wrapper).unwrap_or_default();
        let child = start_server(&ctx.exe, arm, ctx.server_cpu, wrapper).await?;
        verify(&child.ready, arm)?;
        Ok(Server::Local {
            child: Box::new(child),
            _pod: pod,
        })
    }

    fn info(&self) -> &ServerInfo {
        match self {
            Server::Local { child, .. } => &child.ready,
            Server::Remote(_, info) => info,
        }
    }

    async fn snapshot(&mut self) -> anyhow::Result<Snapshot> {
        match self {
            Server::Local { child, .. } => snapshot(child).await,
            Server::Remote(remote, _) => remote.snapshot().await,
        }
    }

    async fn stop(self) -> anyhow::Result<()> {
        match self {
            Server::Local { child, .. } => child.stop().await,
            Server::Remote(..) => Ok(()),
        }
    }
}

struct Ctx<'a> {
    config: &'a Config,
    exe: PathBuf,
    server_cpu: Option<usize>,
    remote: Option<(Remote, ServerInfo)>,
    now: Now,
    samples: Vec<SampleRow>,
}

async fn one_ramp(
    ctx: &mut Ctx<'_>,
    arm: Arm,
    shape: Shape,
    repeat: usize,
    label: &str,
) -> anyhow::Result<(RampRecord, Vec<StepResult>)> {
    let c = ctx.config;
    let loadavg_1m = proc::loadavg_1m().unwrap_or(f64::NAN);
    let mut server = Server::start(ctx, arm).await?;
    let at_start = server.snapshot().await?;
    let ramp = c.ramp(shape);
    // Every shape goes through the same bounded open-loop driver; only what
    // one slot does differs.
    let load = match shape.http() {
        None => {
            let channel = connect(server.info().addr).await?;
            Load::open(shape, channel, c.streams, c.deadline).await?
        }
        Some(http) => {
            let addr = match http {
                Http::H1 => server.info().rest.h1,
                Http::H2 => server.info().rest.h2,
            };
            Load::Rest(Rest::new(http, addr, c.h1_connections, c.deadline)?)
        }
    };
    let drive = |slots: Vec<loadgen::Slot>, counters: Arc<Counters>| {
        let load = &load;
        async move {
            load.run(&slots, c.max_in_flight, c.when_full, c.deadline, counters)
                .await
        }
    };
    let rates = ramp.rates();
    let warming = Arc::new(Counters::default());
    *ctx.now.lock().expect("not poisoned") = (format!("{label} warm-up"), warming.clone());
    drive(Schedule::constant(rates[0], c.warmup).slots(), warming).await;

    let mut steps = Vec::new();
    for (i, &rate) in rates.iter().enumerate() {
        let counters = Arc::new(Counters::default());
        *ctx.now.lock().expect("not poisoned") = (
            format!("{label} step {}/{} {rate}/s", i + 1, rates.len()),
            counters.clone(),
        );
        let slots = Schedule::constant(rate, c.step).slots();
        let before = server.snapshot().await?;
        let client_before = sends_cpu_ns();
        let started = std::time::Instant::now();
        let records: Vec<SlotRecord> = drive(slots, counters).await;
        let wall = started.elapsed();
        *ctx.now.lock().expect("not poisoned") = Default::default();
        let delta = server.snapshot().await?.since(&before);
        let client_cpu = (sends_cpu_ns() - client_before) as f64 / wall.as_nanos() as f64;
        let units = match shape {
            Shape::Unary => delta.unary_calls,
            Shape::Stream => delta.messages,
            Shape::RestH1 | Shape::RestH2 => delta.rest_requests,
        };
        let step = StepResult {
            arm: arm.to_string(),
            shape,
            repeat,
            step: i,
            server_cpu: delta.cpu_ns as f64 / wall.as_nanos() as f64,
            client_cpu,
            connections_opened: delta.connections,
            connections_open: delta.open_connections,
            connections_failed: delta.failed_connections,
            listen_overflows: delta.listen_overflows,
            periods: delta.throttling.map(|t| t.periods),
            throttled_periods: delta.throttling.map(|t| t.throttled),
            ..StepResult::from_records(&records, rate, c.step)
        }
        .with_per_unit(PerUnit::of(&delta, units));
        ctx.samples
            .extend(SampleRow::of(&step, &records, c.raw_every));
        let saturated = step.saturated();
        steps.push(step);
        if saturated {
            break; // past capacity: more steps would only say so again
        }
    }
    let record = RampRecord {
        arm: arm.to_string(),
        shape,
        repeat,
        server: server.info().clone(),
        loadavg_1m,
        throttling: server.snapshot().await?.since(&at_start).throttling,
    };
    server.stop().await?;
    Ok((record, steps))
}

/// Runs the experiment; this program is started again as the server.
pub async fn run(config: &Config, folder: &Folder) -> anyhow::Result<()> {
    let remote = match &config.target {
        Some(target) => Some(Remote::connect(target).await?),
        None => None,
    };
    let mut placement = match &remote {
        Some((_, info)) => Placement {
            pinned: false,
            note: format!(
                "the server runs elsewhere (--target {}): {}, runtime workers: {}, its CPUs {}; \
                 the generator not pinned",
                config.target.as_deref().unwrap_or_default(),
                info.arm,
                info.workers,
                info.cpus_allowed
            ),
        },
        None => place(config.pin)?,
    };
    if let Some(cpus) = config.server_cpus {
        // Made once here so that a machine that cannot limit CPU says so
        // before the first ramp, not after minutes of running.
        let pod = Pod::create("ch14", cpus)?;
        let (quota, period) = pod.quota_us()?;
        placement.note += &format!(
            "; the server in a CPU quota of {cpus} CPU ({quota} µs of every {period} µs, \
             cgroup {}), as Kubernetes limits a pod",
            match pod.version() {
                Version::V1 => "v1",
                Version::V2 => "v2",
            }
        );
    }
    eprintln!("placement: {}", placement.note);
    folder.write_json(PLACEMENT, &placement)?;
    let now: Now = Arc::new(Mutex::new(("starting".into(), Arc::default())));
    let ticker = tokio::spawn(progress(now.clone()));
    let mut ctx = Ctx {
        config,
        exe: std::env::current_exe()?,
        server_cpu: placement.pinned.then_some(0),
        remote,
        now,
        samples: Vec::new(),
    };
    let total = config.repeats * config.arms.len() * config.shapes.len();
    let (mut ramps, mut steps) = (Vec::new(), Vec::new());
    // Interleaved: every arm once per repeat, so that a slow minute on a
    // shared machine hits all arms alike instead of one arm's whole sample.
    for repeat in 0..config.repeats {
        for &arm in &config.arms {
            for &shape in &config.shapes {
                let label = format!(
                    "[{}/{total}] {arm} {shape} #{}",
                    ramps.len() + 1,
                    repeat + 1
                );
                let (ramp, ramp_steps) = one_ramp(&mut ctx, arm, shape, repeat, &label)
                    .await
                    .with_context(|| format!("{arm} {shape}, repeat {}", repeat + 1))?;
                let knee = knee(&ramp_steps);
                eprintln!(
                    "{label}: plateau {:.0}/s, knee {}",
                    plateau(&ramp_steps),
                    knee.map_or("not reached".into(), |(i, reason)| format!(
                        "at {}/s ({reason:?})",
                        ramp_steps[i].offered
                    ))
                );
                ramps.push(ramp);
                steps.extend(ramp_steps);
            }
        }
    }
    folder.write_json(RAMPS, &ramps)?;
    folder.write_csv(STEPS, &steps)?;
    folder.write_csv(SAMPLES, &ctx.samples)?;
    // The cross-check against the first arm, on a fresh server (or the
    // one out there).
    let server = Server::start(&ctx, config.arms[0]).await?;
    let calls = (config.unary_ramp.to * config.step.as_secs_f64()).max(1000.0) as u64;
    let check = cross_check(
        server.info().addr,
        calls,
        config.max_in_flight,
        folder.path(),
    );
    server.stop().await?;
    folder.write_json(H2LOAD, &check)?;
    let syscalls = if config.target.is_some() {
        Syscalls {
            note: "skipped: the server runs elsewhere (--target), out of strace's reach".into(),
            counts: vec![],
        }
    } else if !config.strace {
        Syscalls {
            note: "skipped: --no-strace (or --quick)".into(),
            counts: vec![],
        }
    } else if !have("strace") {
        Syscalls {
            note: "skipped: strace not installed (Debian: apt install strace)".into(),
            counts: vec![],
        }
    } else {
        let mut counts = Vec::new();
        for &arm in &config.arms {
            // The gRPC shapes only: the system calls of REST are not part of
            // the comparison the table makes.
            let grpc = config.shapes.iter().filter(|s| s.http().is_none());
            for &shape in grpc {
                let rate = config.strace_rate;
                *ctx.now.lock().expect("not poisoned") =
                    (format!("strace {arm} {shape} {rate}/s"), Arc::default());
                counts.push(
                    count(
                        Probe {
                            exe: &ctx.exe,
                            arm,
                            shape,
                            cpu: ctx.server_cpu,
                            rate,
                        },
                        config.step,
                        folder.path(),
                    )
                    .await
                    .with_context(|| format!("counting system calls of {arm} {shape}"))?,
                );
            }
        }
        Syscalls {
            note: "strace -f -c around the server process; counts only (strace slows the server several-fold)".into(),
            counts,
        }
    };
    folder.write_json(SYSCALLS, &syscalls)?;
    ticker.abort();
    Ok(())
}

/// The generator's CPU time so far, its sends' alone: the precise timer's own
/// thread, which spins through the gaps between slots and yields to the sends,
/// is left out.
fn sends_cpu_ns() -> u64 {
    proc::cpu_ns(Pid::This) - pacing::timing_cpu_ns()
}
