//! The measurement: every policy at every load, each (policy, load) cell on a
//! fresh server so that no cell inherits another's backlog; each cell's raw
//! records go to `raw/` as it ends.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use harness::{Folder, live::Live};
use loadgen::{
    Timer,
    cli::code_name,
    open_loop::{Counters, SendError, WhenFull, run_bounded},
    schedule::Schedule,
};
use perf::retry::RetryThrottle;
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use tokio::time::{Instant, sleep};
use tonic::{Code, transport::Endpoint};

use crate::{
    client,
    config::{Config, Policy},
    figures::{figures, line},
    metrics::Watch,
    records::{ArrivalRow, CallRow, WorkRow, raw_file},
    server::Running,
};

/// Calls a generator keeps in flight before it sheds; far above what any cell
/// needs (offered rate x deadline), so it never decides anything.
pub const MAX_IN_FLIGHT: usize = 20_000;

/// Runs every cell (loads in order; at each load, every policy in turn),
/// with a line per cell on stderr.
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
    let cells_total = config.loads.len() * config.policies.len();
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
            done += 1;
            let label = format!(
                "[{done}/{cells_total}] {} at {load}x = {:.0} calls/s",
                policy.name(),
                load * config.capacity()
            );
            eprintln!("{label}");
            if let Some(live) = live {
                live.watch(label, folder.path());
            }
            let (calls, work, arrivals) = run_cell(config, policy, load, watch.as_ref()).await?;
            folder.write_csv(&raw_file(policy, load, "calls"), &calls)?;
            folder.write_csv(&raw_file(policy, load, "server"), &work)?;
            folder.write_csv(&raw_file(policy, load, "arrivals"), &arrivals)?;
            let cell = figures(config, policy, load, &calls, &work, &arrivals);
            eprintln!("    {}", line(&cell, config));
        }
    }
    Ok(())
}

/// Runs one cell: a fresh server with the policy's rules, open-loop calls at
/// `load` x capacity for `config.step`, each with the policy's retries.
pub async fn run_cell(
    config: &Config,
    policy: Policy,
    load: f64,
    watch: Option<&Watch>,
) -> anyhow::Result<(Vec<CallRow>, Vec<WorkRow>, Vec<ArrivalRow>)> {
    let server = Running::start(config.rules(policy)).await?;
    if let Some(watch) = watch {
        watch.show(policy.name(), load, server.pool.clone());
    }
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
        Timer::Precise,
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
