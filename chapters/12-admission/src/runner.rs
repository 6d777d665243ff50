//! The protocol: a contract frozen before the first run, paired blocks in a
//! seeded order, a fresh server and client process per run, every attempt in
//! the exclusions ledger. It only measures; [`crate::render`] analyses.

use std::{
    io::IsTerminal,
    net::SocketAddr,
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use certs::TlsArgs;
use harness::{
    Folder,
    child::{Child, Spawn},
    live::Live,
};
use ingest::{server::ServeConfig, service::Policy};

use crate::{
    PolicyKind, analysis,
    children::{ClientChild, ControllerKind, ServeChild},
    config::Config,
    contract::{CAPACITY, CONTRACT, Contract, DURATION_S, RATE},
    records::{Attempt, LEDGER, load},
};

/// Attempts per run before the experiment gives up.
const MAX_ATTEMPTS: usize = 3;

fn controller_of(policy: PolicyKind) -> ControllerKind {
    match policy {
        PolicyKind::Fixed32 | PolicyKind::Fixed8 | PolicyKind::Fixed4 | PolicyKind::Fixed2 => {
            ControllerKind::None
        }
        PolicyKind::Adaptive => ControllerKind::Seed,
        PolicyKind::Target => ControllerKind::Target,
    }
}

/// Runs every block, or, in a folder that holds an interrupted experiment,
/// what is not done yet.
/// Neither `metrics` nor `live` changes what is measured: they are not part
/// of the stored configuration, and a resumed run may use others.
pub async fn run(
    config: &Config,
    folder: &Folder,
    metrics: Option<SocketAddr>,
    live: Option<&Live>,
) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find this program's executable")?;
    let pki = certs::Pki::new(&config.certs_dir);
    pki.generate(false)?;
    let contract = Contract::of(config);
    let mut ledger: Vec<Attempt> = Vec::new();
    if folder.join(CONTRACT).exists() {
        // Resuming: the frozen contract stays as it was.
        let frozen: Contract = folder.read_json(CONTRACT)?;
        anyhow::ensure!(
            frozen.same_as(&contract),
            "the frozen contract in {} differs from these flags'",
            folder.path().display()
        );
        ledger = folder.read_csv(LEDGER)?;
        println!(
            "resuming: {} attempts in the ledger, {} valid runs kept",
            ledger.len(),
            ledger.iter().filter(|a| a.valid).count()
        );
    } else {
        // Frozen: written (and made read-only) before the first run.
        folder.write_json(CONTRACT, &contract)?;
        let path = folder.join(CONTRACT);
        let mut perms = std::fs::metadata(&path)?.permissions();
        perms.set_readonly(true);
        std::fs::set_permissions(&path, perms)?;
    }
    let total = contract.order.iter().map(Vec::len).sum::<usize>();
    println!(
        "{} blocks x {} policies = {total} runs of {:.1} s ({} slots at {}/s, plan {}, {} stream(s), {} worker(s), {} build)",
        contract.blocks,
        contract.policies.len(),
        contract.duration_s,
        contract.slots,
        contract.rate_per_s,
        contract.plan,
        contract.streams,
        contract.workers,
        contract.meta.build
    );
    println!("contract frozen in {}", folder.join(CONTRACT).display());
    let started = Instant::now();
    let mut done = 0;
    for (block, policies) in contract.order.iter().enumerate() {
        let block = block + 1;
        for (position, &policy) in policies.iter().enumerate() {
            done += 1;
            let mine = |a: &&Attempt| a.block == block && a.policy == policy;
            if ledger.iter().filter(mine).any(|a| a.valid) {
                continue;
            }
            let earlier = ledger.iter().filter(mine).count();
            let label = format!("[{done}/{total}] block {block} #{} {policy}", position + 1);
            let mut ok = false;
            for attempt in earlier..earlier + MAX_ATTEMPTS {
                let dir = if attempt == 0 {
                    format!("runs/b{block}-{policy}")
                } else {
                    format!("runs/b{block}-{policy}-attempt{}", attempt + 1)
                };
                let run = folder.sub(&dir)?;
                if let Some(live) = live {
                    live.watch(format!("{label} ({dir})"), run.path());
                }
                let attempt = Attempt {
                    attempt: ledger.len() + 1,
                    block,
                    position: position + 1,
                    policy,
                    dir,
                    valid: false,
                    reason: String::new(),
                    loadavg_1m: program::proc::loadavg_1m(),
                };
                // Valid only if both processes ended cleanly and the records
                // say what the contract requires (every call OK, messages served).
                let result =
                    match run_once(&exe, config, policy, &run, &pki.ca_cert(), metrics, &label)
                        .await
                    {
                        Ok(()) => load(&run, &attempt, config.workers).map(|(run, _)| run),
                        Err(e) => Err(e),
                    };
                ledger.push(Attempt {
                    valid: result.is_ok(),
                    reason: match &result {
                        Ok(_) => "valid".into(),
                        Err(e) => format!("{e:#}").replace('\n', " "),
                    },
                    ..attempt
                });
                folder.write_csv(LEDGER, &ledger)?;
                match result {
                    Ok(run) => {
                        let row = analysis::run_row(&run, &contract.windows);
                        println!(
                            "{label}: pooled p95 {:.1} ms, slowdown p95 {:.1} ms, skipped {}, longest send {:.0} ms ({:.0} s elapsed)",
                            row.pooled.p95_ms.unwrap_or(f64::NAN),
                            row.slowdown.p95_ms.unwrap_or(f64::NAN),
                            row.skipped,
                            row.longest_send_ms,
                            started.elapsed().as_secs_f64()
                        );
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
                    "{policy} in block {block} failed {MAX_ATTEMPTS} times; see {} (--resume continues)",
                    folder.join(LEDGER).display()
                );
            }
        }
    }
    Ok(())
}

// ANCHOR: run_once
/// One attempt: a fresh server process, a fresh client process, both must
/// exit cleanly and every call end OK (checked when its records are read).
async fn run_once(
    exe: &Path,
    config: &Config,
    policy: PolicyKind,
    run: &Folder,
    ca: &Path,
    metrics: Option<SocketAddr>,
    label: &str,
) -> anyhow::Result<()> {
    let scale = config.scale;
    let server = ServeChild {
        serve: ServeConfig {
            addr: "127.0.0.1:0".parse()?,
            tls: TlsArgs::in_dir(&config.certs_dir),
            policy: Policy::Reserve {
                capacity: CAPACITY,
                budget: policy.start_budget(),
            },
            plan: config.plan(),
            workers: config.workers,
            sample_every: Duration::from_secs_f64((0.050 * scale).max(0.010)),
            record: run.path().to_path_buf(),
            calls: Some(config.streams as u64),
            // Each run's server is a fresh process on the same port.
            metrics_addr: metrics,
        },
        controller: controller_of(policy),
        scale,
        target_ms: config.target_ms,
    };
    let log = |name: &str| Spawn {
        log: Some(run.join(name)),
        ..Spawn::default()
    };
    let server = Child::start(exe, &server, &log("server.err.log")).await?;
    let duration = Duration::from_secs_f64(DURATION_S * scale);
    let client = ClientChild {
        addr: server.ready.addr,
        ca: ca.to_path_buf(),
        rate: RATE / scale,
        duration,
        streams: config.streams,
        message_bytes: config.message_bytes,
        seed: 1,
        out: run.path().to_path_buf(),
    };
    let client = Child::start(exe, &client, &log("client.err.log")).await?;
    with_progress(
        client.finish(duration + Duration::from_secs(60)),
        duration,
        label,
    )
    .await
    .context("the client; see client.err.log")?;
    server
        .finish(Duration::from_secs(60))
        .await
        .context("the server, after the calls ended; see server.err.log")
}
// ANCHOR_END: run_once

/// Awaits `work`, with a progress line each second on a terminal.
async fn with_progress<T>(
    work: impl std::future::Future<Output = T>,
    duration: Duration,
    label: &str,
) -> T {
    let started = Instant::now();
    let tty = std::io::stderr().is_terminal();
    tokio::pin!(work);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            result = &mut work => {
                if tty {
                    eprint!("\r\x1b[K");
                }
                return result;
            }
            _ = tick.tick() => if tty {
                eprint!(
                    "\r\x1b[K{label}: {:.0} / {:.0} s",
                    started.elapsed().as_secs_f64(),
                    duration.as_secs_f64()
                );
            }
        }
    }
}
