//! The protocol: a contract frozen before the first run, paired blocks in a
//! seeded order, a fresh server and client process per run, every attempt in
//! the exclusions ledger, then the analysis and the report.

use std::{
    io::IsTerminal,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use ingest::{
    compare::{column, wait_for_ready},
    plan::ServicePlan,
};
use loadgen::{
    meta::RunMeta,
    report::{write, write_json},
};
use rand::{SeedableRng, rngs::StdRng, seq::SliceRandom};
use serde::Serialize;
use serde_json::json;
use tokio::process::{Child, Command};

use crate::{
    PolicyKind, RunArgs,
    analysis::{self, Message, Run, Windows},
    controller::{SeedRule, TargetRule},
    report,
};

/// The seed's parameters, before scaling.
pub const RATE: f64 = 80.0;
pub const DURATION_S: f64 = 36.0;
pub const PLAN: &str = "10ms@0s,40ms@12s,10ms@24s";
pub const CAPACITY: usize = 32;
/// Attempts per run before the experiment gives up.
const MAX_ATTEMPTS: usize = 3;

/// Everything fixed before the first run.
#[derive(Debug, Clone, Serialize)]
pub struct Contract {
    pub experiment: &'static str,
    pub meta: RunMeta,
    pub blocks: usize,
    pub scale: f64,
    pub rate_per_s: f64,
    pub duration_s: f64,
    pub slots: usize,
    pub message_bytes: usize,
    pub plan: String,
    pub capacity: usize,
    pub streams: usize,
    pub workers: usize,
    pub policies: Vec<&'static str>,
    pub seed: u64,
    /// Block by block, the policies in the order they run.
    pub order: Vec<Vec<&'static str>>,
    pub adaptive: SeedRule,
    pub target: TargetRule,
    pub near_budget: &'static str,
    pub windows: Windows,
    pub endpoints: Vec<&'static str>,
    pub definitions: Vec<&'static str>,
    pub transport: &'static str,
    pub validity: &'static str,
}

/// One row of the exclusions ledger.
#[derive(Debug, Clone)]
struct Attempt {
    number: usize,
    block: usize,
    position: usize,
    policy: &'static str,
    dir: PathBuf,
    valid: bool,
    reason: String,
}

/// What a run left for the plots besides the analysis.
#[derive(Debug, Clone)]
pub struct Trace {
    pub block: usize,
    pub policy: &'static str,
    /// (s, budget, queued) on the plan's clock
    pub timeline: Vec<(f64, f64, f64)>,
    /// (due s, send ms) of stream 0
    pub sends: Vec<(f64, f64)>,
}

impl RunArgs {
    pub fn blocks(&self) -> usize {
        self.blocks.unwrap_or(if self.quick { 1 } else { 5 })
    }

    pub fn scale(&self) -> f64 {
        self.scale.unwrap_or(if self.quick { 0.25 } else { 1.0 })
    }

    /// The seed's plan, times scaled. Below scale 1 the service times are a
    /// few milliseconds, which tokio's millisecond timer would stretch by up
    /// to 40%, so a scaled plan is waited out precisely.
    pub fn plan(&self) -> ServicePlan {
        let s = self.scale();
        let mut plan: ServicePlan = PLAN.parse::<ServicePlan>().expect("a valid plan").scaled(s);
        if s < 1.0 {
            plan = plan.with_precise_wait();
        }
        if self.exponential {
            plan.with_exponential(1)
        } else {
            plan
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.blocks() >= 1, "--blocks must be at least 1");
        let s = self.scale();
        anyhow::ensure!(
            s.is_finite() && s > 0.0 && s <= 4.0,
            "--scale must be in (0, 4], not {s}"
        );
        anyhow::ensure!(self.streams >= 1, "--streams must be at least 1");
        anyhow::ensure!(self.workers >= 1, "--workers must be at least 1");
        anyhow::ensure!(
            self.message_bytes >= 1,
            "--message-bytes must be at least 1"
        );
        anyhow::ensure!(self.target_ms > 0.0, "--target-ms must be above 0");
        anyhow::ensure!(
            !self.policies.is_empty(),
            "--policies needs at least one policy"
        );
        let mut p = self.policies.clone();
        p.sort();
        p.dedup();
        anyhow::ensure!(
            p.len() == self.policies.len(),
            "--policies names a policy twice"
        );
        Ok(())
    }
}

// ANCHOR: order
/// The run order: each block is every policy once, shuffled by one seeded
/// generator, so the order is random but the same for the same seed.
pub fn order(policies: &[PolicyKind], blocks: usize, seed: u64) -> Vec<Vec<PolicyKind>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..blocks)
        .map(|_| {
            let mut block = policies.to_vec();
            block.shuffle(&mut rng);
            block
        })
        .collect()
}
// ANCHOR_END: order

pub fn contract(args: &RunArgs, order: &[Vec<PolicyKind>]) -> Contract {
    let scale = args.scale();
    Contract {
        experiment: "gRPC Under Pressure, Part 2, replicated: fixed-32, fixed-8, adaptive (+ target)",
        meta: RunMeta::now(),
        blocks: args.blocks(),
        scale,
        rate_per_s: RATE / scale,
        duration_s: DURATION_S * scale,
        slots: loadgen::Schedule::constant(
            RATE / scale,
            Duration::from_secs_f64(DURATION_S * scale),
        )
        .slots()
        .len(),
        message_bytes: args.message_bytes,
        plan: args.plan().to_string(),
        capacity: CAPACITY,
        streams: args.streams,
        workers: args.workers,
        policies: args.policies.iter().map(|p| p.name()).collect(),
        seed: args.seed,
        order: order
            .iter()
            .map(|b| b.iter().map(|p| p.name()).collect())
            .collect(),
        adaptive: SeedRule::seed(scale),
        target: TargetRule::new(args.target_ms, scale),
        near_budget: "Q + R >= B - 1 (pending work within one message of the budget)",
        windows: Windows::seed(scale),
        endpoints: vec![
            "primary: pooled nearest-rank p95 of queue residence, messages enqueued in [12 s, 36 s)",
            "pooled p99 of the same cohort; pooled p95/p99 of the slowdown cohort [12 s, 24 s)",
            "reduction of pooled p95 vs fixed-32 and vs fixed-8, block-bootstrap 95% interval",
            "skipped slots; longest client send; completions/s over [0, 36 s) and its ratio to fixed-32",
            "idle-with-backlog fraction; budget trajectory; recovery delay (censored if none)",
        ],
        definitions: vec![
            "time 0 is the plan's zero: the first call's arrival at the server",
            "scale: every time (schedule length, phases, service times, ticks, thresholds, windows) is multiplied by `scale` and the send rate divided by it; below 1, service times are waited out on a blocking thread (precise) instead of tokio's millisecond timer",
            "queue residence: enqueue to dequeue by the worker; excludes admission wait, client send, service",
            "nearest rank: the value at rank ceil(p/100 x n) of the sorted values, no interpolation",
            "pooled: all messages of all valid runs of a policy together, not an average of per-run values",
            "block bootstrap: resample whole blocks with replacement (seeded), recompute pooled p95s, 2.5th-97.5th percentile",
            "completions/s: worker service ends in [0, 36 s) / 36 s; ratio: mean over shared blocks / fixed-32's mean",
            "idle with backlog: time a worker was free while a message waited, / (36 s x workers)",
            "recovery baseline: the run's own p95 and completion rate over [0, 12 s)",
            "recovery: first 3 s window starting at 24 s + k x 0.2 s, ending by 36 s, with p95 <= baseline and rate >= 95% of baseline; delay = its end - 24 s; none: censored",
        ],
        transport: "gRPC over TLS on loopback (the seed: plaintext); client in Rust (tonic), the seed's in Go",
        validity: "valid: server ready (atomic marker) within 60 s, client and server exit 0, every call OK, the server processed messages",
    }
}

fn controller_of(policy: PolicyKind) -> &'static str {
    match policy {
        PolicyKind::Fixed32 | PolicyKind::Fixed8 => "none",
        PolicyKind::Adaptive => "seed",
        PolicyKind::Target => "target",
    }
}

/// Runs the whole experiment and returns the results folder.
pub async fn run(args: RunArgs) -> anyhow::Result<PathBuf> {
    args.validate()?;
    if args.reanalyse {
        return reanalyse(&args);
    }
    let exe = std::env::current_exe().context("cannot find this program's executable")?;
    let out = args.out.clone();
    let contract_path = out.join("contract.json");
    let resume = args.resume && contract_path.exists();
    if contract_path.exists() && !resume {
        std::fs::remove_dir_all(&out).with_context(|| format!("cannot empty {}", out.display()))?;
    }
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let pki = certs::Pki::new(&args.certs_dir);
    pki.generate(false)?;
    let order = order(&args.policies, args.blocks(), args.seed);
    let contract = contract(&args, &order);
    let (mut ledger, mut runs, mut traces) = (Vec::new(), Vec::new(), Vec::new());
    if resume {
        // The frozen contract stays as it was; these flags must describe it.
        same_contract(&out, &contract)?;
        (ledger, runs, traces) = read_ledger(&args, &out)?;
        println!(
            "resuming: {} attempts in the ledger, {} valid runs kept",
            ledger.len(),
            runs.len()
        );
    } else {
        // Frozen: written (and made read-only) before the first run.
        write_json(&contract_path, &contract)?;
        let mut perms = std::fs::metadata(&contract_path)?.permissions();
        perms.set_readonly(true);
        std::fs::set_permissions(&contract_path, perms)?;
    }
    let total = order.iter().map(Vec::len).sum::<usize>();
    println!(
        "{} blocks x {} policies = {total} runs of {:.1} s ({} slots at {}/s, plan {}, {} stream(s), {} worker(s), {} build)",
        contract.blocks,
        args.policies.len(),
        contract.duration_s,
        contract.slots,
        contract.rate_per_s,
        contract.plan,
        args.streams,
        args.workers,
        contract.meta.build
    );
    println!(
        "contract {} {}",
        if resume {
            "kept, as frozen, in"
        } else {
            "frozen in"
        },
        contract_path.display()
    );
    let started = Instant::now();
    let mut done = 0;
    for (block, policies) in order.iter().enumerate() {
        for (position, &policy) in policies.iter().enumerate() {
            done += 1;
            if runs
                .iter()
                .any(|r: &Run| r.block == block + 1 && r.policy == policy.name())
            {
                continue;
            }
            let earlier = ledger
                .iter()
                .filter(|a: &&Attempt| a.block == block + 1 && a.policy == policy.name())
                .count();
            let mut ok = false;
            for attempt in earlier..earlier + MAX_ATTEMPTS {
                let name = if attempt == 0 {
                    format!("b{}-{}", block + 1, policy.name())
                } else {
                    format!("b{}-{}-attempt{}", block + 1, policy.name(), attempt + 1)
                };
                let dir = out.join("runs").join(name);
                let label = format!(
                    "[{done}/{total}] block {} #{} {}",
                    block + 1,
                    position + 1,
                    policy.name()
                );
                let result = run_once(&exe, &args, policy, &dir, &pki.ca_cert(), &label).await;
                let (valid, reason) = match &result {
                    Ok(_) => (true, "valid".to_string()),
                    Err(e) => (false, format!("{e:#}").replace(['\n', ','], " ")),
                };
                ledger.push(Attempt {
                    number: ledger.len() + 1,
                    block: block + 1,
                    position: position + 1,
                    policy: policy.name(),
                    dir: dir.clone(),
                    valid,
                    reason: reason.clone(),
                });
                write(
                    &out.join("ledger.csv"),
                    ledger_csv(&ledger, &out).as_bytes(),
                )?;
                match result {
                    Ok((mut run, trace)) => {
                        run.block = block + 1;
                        run.position = position + 1;
                        let row = analysis::run_row(&run, &contract.windows);
                        println!(
                            "{label}: pooled p95 {:.1} ms, slowdown p95 {:.1} ms, skipped {}, longest send {:.0} ms ({:.0} s elapsed)",
                            row.pooled.p95_ms.unwrap_or(f64::NAN),
                            row.slowdown.p95_ms.unwrap_or(f64::NAN),
                            row.skipped,
                            row.longest_send_ms,
                            started.elapsed().as_secs_f64()
                        );
                        runs.push(run);
                        traces.push(Trace {
                            block: block + 1,
                            ..trace
                        });
                        ok = true;
                        break;
                    }
                    Err(e) => {
                        eprintln!("{label}: invalid attempt, recorded in the ledger: {e:#}");
                        // Give a transient cause (a full disk, a busy port) time to pass.
                        tokio::time::sleep(Duration::from_secs(10)).await;
                    }
                }
            }
            if !ok {
                bail!(
                    "{} in block {} failed {MAX_ATTEMPTS} times; see {} (--resume continues)",
                    policy.name(),
                    block + 1,
                    out.join("ledger.csv").display()
                );
            }
        }
    }
    let invalid = ledger.iter().filter(|a| !a.valid).count();
    finish(&args, &contract, &runs, &traces, ledger.len(), invalid)?;
    Ok(out)
}

/// The analysis, the per-run CSV, the report and the plots.
fn finish(
    args: &RunArgs,
    contract: &Contract,
    runs: &[Run],
    traces: &[Trace],
    attempts: usize,
    invalid: usize,
) -> anyhow::Result<()> {
    let out = &args.out;
    let names: Vec<String> = args.policies.iter().map(|p| p.name().to_string()).collect();
    let analysis = analysis::analyse(runs, &names, &contract.windows, args.resamples, args.seed);
    write(
        &out.join("runs.csv"),
        report::runs_csv(&analysis).as_bytes(),
    )?;
    write_json(
        &out.join("analysis.json"),
        &json!({ "meta": RunMeta::now(), "contract": contract, "analysis": &analysis }),
    )?;
    let markdown = report::markdown(contract, &analysis, attempts, invalid);
    write(&out.join("report.md"), markdown.as_bytes())?;
    report::plots(out, contract, &analysis, traces)?;
    println!("\n{}", report::headline(contract, &analysis));
    for line in report::acceptance(contract, &analysis) {
        println!("{line}");
    }
    println!(
        "{attempts} attempts, {} valid, {invalid} excluded; results in {}",
        attempts - invalid,
        out.display()
    );
    Ok(())
}

/// Recomputes everything after the runs from the records in --out: the
/// ledger says which runs are valid; the stored contract must match the
/// one these flags describe.
fn reanalyse(args: &RunArgs) -> anyhow::Result<PathBuf> {
    let out = &args.out;
    let (ledger, runs, traces) = read_ledger(args, out)?;
    let mut order: Vec<Vec<PolicyKind>> = vec![Vec::new(); args.blocks()];
    for r in &runs {
        let policy = <PolicyKind as clap::ValueEnum>::from_str(&r.policy, false)
            .map_err(|e| anyhow::anyhow!("ledger: {e}"))?;
        order
            .get_mut(r.block - 1)
            .context("the ledger has more blocks than --blocks")?
            .push(policy);
    }
    let contract = contract(args, &order);
    same_contract(out, &contract)?;
    let invalid = ledger.iter().filter(|a| !a.valid).count();
    finish(args, &contract, &runs, &traces, ledger.len(), invalid)?;
    Ok(out.clone())
}

/// Checks that the contract stored in `out` is the one these flags describe.
fn same_contract(out: &Path, contract: &Contract) -> anyhow::Result<()> {
    let stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("contract.json"))?)?;
    let fresh = serde_json::to_value(contract)?;
    for key in [
        "scale",
        "rate_per_s",
        "duration_s",
        "plan",
        "capacity",
        "streams",
        "workers",
        "policies",
        "order",
        "adaptive",
        "target",
        "windows",
        "message_bytes",
    ] {
        anyhow::ensure!(
            stored[key] == fresh[key],
            "the stored contract's `{key}` ({}) differs from these flags' ({})",
            stored[key],
            fresh[key]
        );
    }
    Ok(())
}

/// The ledger in `out`, with every valid run's records read back (in
/// ledger order, so block by block in the order they ran).
fn read_ledger(args: &RunArgs, out: &Path) -> anyhow::Result<(Vec<Attempt>, Vec<Run>, Vec<Trace>)> {
    let text = std::fs::read_to_string(out.join("ledger.csv"))
        .with_context(|| format!("no ledger in {}", out.display()))?;
    let (mut ledger, mut runs, mut traces) = (Vec::new(), Vec::new(), Vec::new());
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.splitn(7, ',').collect();
        anyhow::ensure!(f.len() == 7, "bad ledger line `{line}`");
        let policy = <PolicyKind as clap::ValueEnum>::from_str(f[3], false)
            .map_err(|e| anyhow::anyhow!("ledger: {e}"))?;
        let attempt = Attempt {
            number: f[0].parse()?,
            block: f[1].parse()?,
            position: f[2].parse()?,
            policy: policy.name(),
            dir: out.join(f[4]),
            valid: f[5] == "true",
            reason: f[6].to_string(),
        };
        if attempt.valid {
            let (mut run, trace) = load(&attempt.dir, policy, args.workers)?;
            run.block = attempt.block;
            run.position = attempt.position;
            runs.push(run);
            traces.push(Trace {
                block: attempt.block,
                ..trace
            });
        }
        ledger.push(attempt);
    }
    Ok((ledger, runs, traces))
}

fn ledger_csv(ledger: &[Attempt], out: &Path) -> String {
    let mut text = String::from("attempt,block,position,policy,dir,valid,reason\n");
    for a in ledger {
        text.push_str(&format!(
            "{},{},{},{},{},{},{}\n",
            a.number,
            a.block,
            a.position,
            a.policy,
            a.dir.strip_prefix(out).unwrap_or(&a.dir).display(),
            a.valid,
            a.reason
        ));
    }
    text
}

// ANCHOR: run_once
/// One attempt: a fresh server process (ready marker written atomically by
/// the server), a fresh client process, both must exit cleanly.
async fn run_once(
    exe: &Path,
    args: &RunArgs,
    policy: PolicyKind,
    dir: &Path,
    ca: &Path,
    label: &str,
) -> anyhow::Result<(Run, Trace)> {
    let scale = args.scale();
    std::fs::create_dir_all(dir)?;
    let ready = dir.join("ready");
    let sample_every = format!("{}ms", (50.0 * scale).max(10.0));
    let mut server = Command::new(exe)
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(["--calls", &args.streams.to_string()])
        .args(["--capacity", &CAPACITY.to_string()])
        .args(["--budget", &policy.start_budget().to_string()])
        .args(["--plan", &args.plan().to_string()])
        .args(["--workers", &args.workers.to_string()])
        .args(["--sample-every", &sample_every])
        .args(["--controller", controller_of(policy)])
        .args(["--scale", &scale.to_string()])
        .args(["--target-ms", &args.target_ms.to_string()])
        .arg("--certs-dir")
        .arg(&args.certs_dir)
        .arg("--record")
        .arg(dir)
        .arg("--ready-file")
        .arg(&ready)
        .stdout(std::fs::File::create(dir.join("server.log"))?)
        .stderr(std::fs::File::create(dir.join("server.err.log"))?)
        .kill_on_drop(true)
        .spawn()
        .context("cannot start the server process")?;
    let addr = wait_for_ready(&ready, &mut server).await?;
    let duration_s = DURATION_S * scale;
    let mut client = Command::new(exe)
        .args(["client", "--addr", &addr.to_string()])
        .arg("--ca")
        .arg(ca)
        .args(["--rate", &(RATE / scale).to_string()])
        .args(["--duration-s", &duration_s.to_string()])
        .args(["--streams", &args.streams.to_string()])
        .args(["--message-bytes", &args.message_bytes.to_string()])
        .arg("--out")
        .arg(dir)
        .stdout(std::fs::File::create(dir.join("client.log"))?)
        .stderr(std::fs::File::create(dir.join("client.err.log"))?)
        .kill_on_drop(true)
        .spawn()
        .context("cannot start the client process")?;
    let status = wait_with_progress(&mut client, duration_s, label).await?;
    anyhow::ensure!(
        status.success(),
        "client exited with {status}; see client.err.log"
    );
    let status = tokio::time::timeout(Duration::from_secs(60), server.wait())
        .await
        .context("the server did not stop within 60 s of the calls ending")??;
    anyhow::ensure!(
        status.success(),
        "server exited with {status}; see server.err.log"
    );
    // ANCHOR_END: run_once
    load(dir, policy, args.workers)
}

/// Waits for the client, with a progress line each second on a terminal.
async fn wait_with_progress(
    client: &mut Child,
    duration_s: f64,
    label: &str,
) -> anyhow::Result<std::process::ExitStatus> {
    let started = Instant::now();
    let limit = Duration::from_secs_f64(duration_s + 60.0);
    let tty = std::io::stderr().is_terminal();
    loop {
        match tokio::time::timeout(Duration::from_secs(1), client.wait()).await {
            Ok(status) => {
                if tty {
                    eprint!("\r\x1b[K");
                }
                return Ok(status?);
            }
            Err(_) if started.elapsed() > limit => {
                client.kill().await.ok();
                bail!(
                    "the client did not finish within {:.0} s",
                    limit.as_secs_f64()
                );
            }
            Err(_) => {
                if tty {
                    eprint!(
                        "\r\x1b[K{label}: {:.0} / {:.0} s",
                        started.elapsed().as_secs_f64(),
                        duration_s
                    );
                }
            }
        }
    }
}

/// Reads one run's records back, on the plan's clock.
fn load(dir: &Path, policy: PolicyKind, workers: usize) -> anyhow::Result<(Run, Trace)> {
    let server: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("server.json"))?)?;
    let epoch_ms = server["epoch_ms"]
        .as_f64()
        .context("the server saw no call (no epoch)")?;
    let s = |ms: f64| (ms - epoch_ms) / 1e3;
    let messages_path = dir.join("messages.csv");
    let enq = column(&messages_path, "enqueued_ms")?;
    let queue = column(&messages_path, "queue_ms")?;
    let end = column(&messages_path, "service_end_ms")?;
    anyhow::ensure!(!enq.is_empty(), "the server processed no message");
    let messages: Vec<Message> = enq
        .iter()
        .zip(&queue)
        .zip(&end)
        .map(|((e, q), x)| Message {
            enqueued_s: s(*e),
            queue_ms: *q,
            end_s: s(*x),
        })
        .collect();
    let client: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("client.json"))?)?;
    anyhow::ensure!(
        client["all_ok"].as_bool() == Some(true),
        "a call did not end OK"
    );
    let streams = client["streams"].as_array().cloned().unwrap_or_default();
    let (mut scheduled, mut skipped, mut longest, mut call_s) = (0, 0, 0.0f64, 0.0f64);
    let mut sends = Vec::new();
    for (i, stream) in streams.iter().enumerate() {
        let summary = &stream["summary"];
        scheduled += summary["scheduled"].as_u64().unwrap_or(0);
        skipped += summary["skipped"].as_u64().unwrap_or(0);
        longest = longest.max(summary["send"]["max_ms"].as_f64().unwrap_or(0.0));
        call_s = call_s.max(stream["call_s"].as_f64().unwrap_or(0.0));
        if i == 0 {
            sends = send_points(&dir.join("sends-0.csv"))?;
        }
    }
    let budget_path = dir.join("budget.csv");
    let at = column(&budget_path, "at_ms")?;
    let to = column(&budget_path, "to")?;
    let budget: Vec<(f64, usize)> = at
        .iter()
        .zip(&to)
        .map(|(a, t)| (s(*a), *t as usize))
        .collect();
    let timeline_path = dir.join("timeline.csv");
    let t_at = column(&timeline_path, "at_ms")?;
    let t_b = column(&timeline_path, "budget")?;
    let t_q = column(&timeline_path, "queued")?;
    let timeline = t_at
        .iter()
        .zip(&t_b)
        .zip(&t_q)
        .map(|((a, b), q)| (s(*a), *b, *q))
        .filter(|p| p.0 >= 0.0)
        .collect();
    let run = Run {
        block: 0,
        policy: policy.name().to_string(),
        position: 0,
        messages,
        scheduled,
        skipped,
        longest_send_ms: longest,
        idle_with_backlog_ms: server["idle_with_backlog_ms"].as_f64().unwrap_or(0.0),
        workers,
        budget,
        start_budget: policy.start_budget(),
        call_s,
    };
    let trace = Trace {
        block: 0,
        policy: policy.name(),
        timeline,
        sends,
    };
    Ok((run, trace))
}

/// (due s, send ms) for every slot that was sent.
fn send_points(path: &Path) -> anyhow::Result<Vec<(f64, f64)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let due: f64 = f.get(2)?.parse().ok()?;
            let started: f64 = f.get(3)?.parse().ok()?;
            let ended: f64 = f.get(4)?.parse().ok()?;
            Some((due / 1e3, ended - started))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_is_seeded_and_every_block_is_complete() {
        let p = [
            PolicyKind::Fixed32,
            PolicyKind::Fixed8,
            PolicyKind::Adaptive,
        ];
        let a = order(&p, 5, 12);
        assert_eq!(a, order(&p, 5, 12));
        assert_ne!(a, order(&p, 5, 13));
        for block in &a {
            let mut b = block.clone();
            b.sort();
            assert_eq!(b, p);
        }
    }
}
