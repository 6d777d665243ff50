//! The measurement: every policy at every load over every transport, each
//! (transport, policy, load) cell on a fresh server so that no cell inherits
//! another's backlog; each cell's raw records go to `raw/` as it ends.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use harness::{Folder, live::Live};
use loadgen::{
    Timer,
    cli::code_name,
    open_loop::{Counters, SendError, WhenFull, run_bounded},
    schedule::Schedule,
};
use perf::retry::RetryThrottle;
use tokio::time::{Instant, sleep};

use crate::{
    client::{self, Caller},
    config::{Config, Policy, Transport},
    figures::{figures, line},
    metrics::Watch,
    records::{ArrivalRow, CallRow, WorkRow, raw_file},
    server::Running,
};

/// Calls a generator keeps in flight before it sheds; far above what any cell
/// needs (offered rate x deadline), so it never decides anything.
pub const MAX_IN_FLIGHT: usize = 20_000;

/// Runs every cell (loads in order; at each load, every policy in turn, and
/// each policy over every transport, one after the other, so that the
/// transports are compared side by side in time), with a line per cell on
/// stderr.
pub async fn run(
    config: &Config,
    folder: &Folder,
    metrics: Option<SocketAddr>,
    live: Option<&Live>,
) -> anyhow::Result<()> {
    let watch = match metrics {
        Some(addr) => {
            let (watch, addr) = crate::metrics::serve(addr).await?;
            eprintln!("metrics of the running cell at http://{addr}/metrics");
            Some(watch)
        }
        None => None,
    };
    let cells_total = config.loads.len() * config.policies.len() * config.transports.len();
    eprintln!(
        "capacity {} workers x {} ms = {:.0} calls/s; deadline {} ms; {} cells of {:.1} s ({:.1} s warm-up left out)",
        config.workers,
        config.service.as_millis(),
        config.capacity(),
        config.deadline.as_millis(),
        cells_total,
        config.step.as_secs_f64(),
        config.warmup.as_secs_f64(),
    );
    let mut done = 0;
    for &load in &config.loads {
        for &policy in &config.policies {
            for &transport in &config.transports {
                done += 1;
                let label = format!(
                    "[{done}/{cells_total}] {policy} over {transport} at {load}x = {:.0} calls/s",
                    load * config.capacity()
                );
                eprintln!("{label}");
                if let Some(live) = live {
                    live.watch(label, folder.path());
                }
                let (calls, work, arrivals) =
                    run_cell(config, transport, policy, load, watch.as_ref()).await?;
                let file = |kind| raw_file(transport, policy, load, kind);
                folder.write_csv(&file("calls"), &calls)?;
                folder.write_csv(&file("server"), &work)?;
                folder.write_csv(&file("arrivals"), &arrivals)?;
                let cell = figures(config, transport, policy, load, &calls, &work, &arrivals);
                eprintln!("    {}", line(&cell, config));
            }
        }
    }
    Ok(())
}

/// Runs one cell: a fresh server with the policy's rules, open-loop calls
/// over `transport` at `load` x capacity for `config.step`, each with the
/// policy's retries.
pub async fn run_cell(
    config: &Config,
    transport: Transport,
    policy: Policy,
    load: f64,
    watch: Option<&Watch>,
) -> anyhow::Result<(Vec<CallRow>, Vec<WorkRow>, Vec<ArrivalRow>)> {
    let server = Running::start(config.rules(policy)).await?;
    if let Some(watch) = watch {
        watch.show(transport, policy, load, server.pool.clone());
    }
    let caller = Caller::connect(transport, &server, config.h1_connections).await?;
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
        Timer::Precise,
        MAX_IN_FLIGHT,
        WhenFull::Shed,
        deadline + Duration::from_secs(1),
        counters,
        |slot| {
            let (caller, attempts, shared) = (caller.clone(), attempts.clone(), shared.clone());
            // One overall deadline, counted from when the call was due.
            let call_deadline = base + slot.due + deadline;
            async move {
                let ended = client::call(&rules, &shared, call_deadline, |remaining| {
                    let caller = caller.clone();
                    async move {
                        caller
                            .attempt(format!("call {}", slot.index), remaining)
                            .await
                    }
                })
                .await;
                attempts[slot.index as usize].store(ended.attempts, Ordering::Relaxed);
                ended.result.map_err(|failure| SendError {
                    code: code_name(failure.code),
                    fatal: false,
                })
            }
        },
    )
    .await;
    progress.abort();
    // Let the calls in the workers' hands end, so their work is counted.
    sleep(config.service * 2).await;
    let since = |t: Instant| t.saturating_duration_since(base);
    let work = server
        .pool
        .records()
        .iter()
        .map(|w| WorkRow {
            arrived: since(w.arrived),
            deadline: w.deadline.map(since),
            started: w.started.map(since),
            ended: w.ended.map(since),
            waiting_ahead: w.waiting_ahead,
            fate: w.fate,
        })
        .collect();
    let arrivals = server
        .pool
        .arrivals()
        .iter()
        .map(|&(at, waiting)| ArrivalRow {
            arrived: since(at),
            waiting,
        })
        .collect();
    drop(server);
    let calls = records
        .into_iter()
        .map(|r| CallRow {
            index: r.index,
            due: r.due,
            started: r.started,
            ended: r.ended,
            outcome: r.outcome,
            code: r.code,
            attempts: attempts[r.index as usize].load(Ordering::Relaxed),
        })
        .collect();
    Ok((calls, work, arrivals))
}
