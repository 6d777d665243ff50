//! Balancing around a slow replica: three replicas, the third `slower_by`
//! slower on every call, and the same load through each strategy in turn
//! (a fresh pool, so fresh connections, per arm; the replicas stay up).

use harness::Folder;

use super::{Config, load, start_all};
use crate::{
    balance::{Pool, Strategy},
    replica::Latency,
};

pub const CALLS: &str = "slow-calls.csv";

pub const ARMS: [Strategy; 3] = [Strategy::RoundRobin, Strategy::Tonic, Strategy::P2c];

pub fn name(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::RoundRobin => "round_robin",
        Strategy::Tonic => "tonic",
        Strategy::P2c => "p2c_peak_ewma",
    }
}

pub async fn run(config: &Config, folder: &Folder) -> anyhow::Result<()> {
    let mut specs: Vec<_> = (0..3).map(|i| config.spec(i)).collect();
    specs[2].latency = Latency::Fixed(config.slower_by);
    let replicas = start_all(specs).await?;
    let addrs: Vec<_> = replicas.iter().map(|r| r.addr).collect();
    let mut calls = Vec::new();
    for repeat in 0..config.repeats {
        for strategy in config.order(&ARMS, repeat) {
            println!(
                "slow: {} (repeat {} of {})",
                name(strategy),
                repeat + 1,
                config.repeats
            );
            let pool = Pool::new(strategy, &addrs, &config.ca())?;
            let rows = load(config, (name(strategy), repeat), 0, move |_, call| {
                let pool = pool.clone();
                async move { pool.call(call).await }
            })
            .await;
            calls.extend(rows);
        }
    }
    folder.write_csv(CALLS, &calls)?;
    Ok(())
}
