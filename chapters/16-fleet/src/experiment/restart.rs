//! A rolling restart under load: three replicas, stopped and started again
//! one after the other, while the client (p2c fed by health `Watch`) keeps
//! calling. Two arms, the same schedule:
//!
//! - `drained`: NOT_SERVING, the grace, GOAWAY, wait for calls in flight;
//! - `killed`: every socket closed at once.
//!
//! Either way the replica comes back `restart_after` later on the same
//! address, and the next one goes a third of the run after the last.

use std::time::Duration;

use harness::Folder;
use serde::{Deserialize, Serialize};
use tokio::time::{Instant, sleep, sleep_until};

use super::{CallRow, Config, EventRow, load, ms, start_all};
use crate::{balance::Pool, replica::Replica};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    Drained,
    Killed,
}

impl Arm {
    pub fn name(self) -> &'static str {
        match self {
            Arm::Drained => "drained",
            Arm::Killed => "killed",
        }
    }
}

pub const CALLS: &str = "restart-calls.csv";
pub const EVENTS: &str = "restart-events.csv";

pub async fn run(config: &Config, folder: &Folder) -> anyhow::Result<()> {
    let (mut calls, mut events) = (Vec::new(), Vec::new());
    for repeat in 0..config.repeats {
        for arm in config.order(&[Arm::Drained, Arm::Killed], repeat) {
            println!(
                "restart: {} (repeat {} of {})",
                arm.name(),
                repeat + 1,
                config.repeats
            );
            let (c, e) = one(config, arm, repeat).await?;
            calls.extend(c);
            events.extend(e);
        }
    }
    folder.write_csv(CALLS, &calls)?;
    folder.write_csv(EVENTS, &events)?;
    Ok(())
}

/// When replica `i` is stopped: the first one second in, then evenly
/// spaced so that the last is back well before the load ends.
pub fn stop_at(config: &Config, i: usize) -> Duration {
    let lead = Duration::from_secs(1);
    lead + (config.duration - 2 * lead) * i as u32 / 3
}

async fn one(
    config: &Config,
    arm: Arm,
    repeat: u32,
) -> anyhow::Result<(Vec<CallRow>, Vec<EventRow>)> {
    let specs: Vec<_> = (0..3).map(|i| config.spec(i)).collect();
    let mut replicas: Vec<Option<Replica>> =
        start_all(specs).await?.into_iter().map(Some).collect();
    let addrs: Vec<_> = replicas.iter().flatten().map(|r| r.addr).collect();
    let (pool, _watchers) = Pool::watching(&addrs, &config.ca())?;
    // Let the watchers find all three before the load starts.
    sleep(Duration::from_millis(500)).await;

    let calls = tokio::spawn({
        let (config, pool) = (config.clone(), pool.clone());
        async move {
            load(
                &config,
                (arm.name(), repeat),
                config.work_ms,
                move |_, call| {
                    let pool = pool.clone();
                    async move { pool.call(call).await }
                },
            )
            .await
        }
    });
    // The load's clock starts within a millisecond of this one (it runs
    // in the task just spawned): close enough for 100 ms bins.
    let start = Instant::now();
    let mut events = Vec::new();
    let event = |replica: &str, what: &str, at: Instant| EventRow {
        arm: arm.name().into(),
        repeat,
        replica: replica.into(),
        event: what.into(),
        at_ms: ms(at.saturating_duration_since(start)),
    };
    for (i, slot) in replicas.iter_mut().enumerate() {
        sleep_until(start + stop_at(config, i)).await;
        let replica = slot.take().expect("each replica is stopped once");
        let mut spec = replica.spec.clone();
        spec.addr = replica.addr;
        // ANCHOR: rolling
        match arm {
            Arm::Drained => {
                let drained = replica.drain(config.grace, config.deadline).await?;
                events.push(event(&spec.name, "not_serving", drained.not_serving));
                events.push(event(&spec.name, "goaway", drained.goaway));
                events.push(event(&spec.name, "closed", drained.closed));
            }
            Arm::Killed => {
                let at = Instant::now();
                replica.kill();
                events.push(event(&spec.name, "killed", at));
            }
        }
        // ANCHOR_END: rolling
        sleep(config.restart_after).await;
        *slot = Some(Replica::start(spec.clone()).await?);
        events.push(event(&spec.name, "started", Instant::now()));
    }
    let calls = calls.await?;
    Ok((calls, events))
}
