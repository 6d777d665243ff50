//! Hedging a tail: one replica whose calls are sometimes slow (grpc-java's
//! hedging example, scaled by a hundredth), the same load without and with
//! `tower::hedge`. The copies the hedge sends, and the calls the replica
//! started and saw cancelled, are counted per arm: the extra load beside
//! the tail it saves.

use std::sync::atomic::Ordering;

use harness::Folder;
use serde::{Deserialize, Serialize};

use super::{Config, load, start_all};
use crate::{
    client::{Caller, endpoint},
    hedge::Hedged,
    replica::Latency,
};

pub const CALLS: &str = "tail-calls.csv";
pub const COUNTS: &str = "tail-counts.csv";

pub const ARMS: [&str; 2] = ["no_hedge", "hedged"];

/// Answers the hedge needs before it sends any copy.
pub const MIN_POINTS: u64 = 50;

/// What one arm cost the replica.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub arm: String,
    pub repeat: u32,
    /// Calls the load made.
    pub calls: u64,
    /// Copies the hedge sent.
    pub copies: u64,
    /// Calls the replica started, and saw end before their answer.
    pub server_started: u64,
    pub server_cancelled: u64,
}

pub async fn run(config: &Config, folder: &Folder) -> anyhow::Result<()> {
    let mut spec = config.spec(0);
    spec.latency = Latency::Tail { seed: config.seed };
    let replica = start_all(vec![spec]).await?.remove(0);
    let endpoint = endpoint(replica.addr, &config.ca())?;
    let (mut calls, mut counts) = (Vec::new(), Vec::new());
    for repeat in 0..config.repeats {
        for arm in config.order(&ARMS, repeat) {
            println!("tail: {arm} (repeat {} of {})", repeat + 1, config.repeats);
            let stats = replica.stats();
            let (started, cancelled) = (stats.started.load(Ordering::Relaxed), stats.ended_early());
            let caller = Caller::new(endpoint.connect_lazy());
            let hedged = (arm == "hedged")
                .then(|| Hedged::new(caller.clone(), config.hedge_percentile, MIN_POINTS));
            let copies = hedged.as_ref().map(|h| h.copies.clone());
            let rows = load(config, (arm, repeat), 0, move |_, call| {
                let (mut caller, hedged) = (caller.clone(), hedged.clone());
                async move {
                    match hedged {
                        Some(hedged) => hedged.call(call).await,
                        None => tower::Service::call(&mut caller, call).await,
                    }
                }
            })
            .await;
            counts.push(Counts {
                arm: arm.into(),
                repeat,
                calls: rows.len() as u64,
                copies: copies.map_or(0, |c| c.load(Ordering::Relaxed)),
                server_started: stats.started.load(Ordering::Relaxed) - started,
                server_cancelled: stats.ended_early() - cancelled,
            });
            calls.extend(rows);
        }
    }
    folder.write_csv(CALLS, &calls)?;
    folder.write_csv(COUNTS, &counts)?;
    Ok(())
}
