//! Balancing around a slow replica: three replicas, the third `slower_by`
//! slower on every call, and the same load through each strategy in turn
//! (a fresh pool, so fresh connections, per arm; the replicas stay up).

use clap::ValueEnum;
use harness::Folder;

use super::{Config, load, start_all};
use crate::{
    balance::{Pool, Strategy},
    replica::Latency,
};

pub const CALLS: &str = "slow-calls.csv";

pub async fn run(config: &Config, folder: &Folder) -> anyhow::Result<()> {
    let mut specs: Vec<_> = (0..3).map(|i| config.spec(i)).collect();
    specs[2].latency = Latency::Fixed(config.slower_by);
    let replicas = start_all(specs).await?;
    let addrs: Vec<_> = replicas.iter().map(|r| r.addr).collect();
    let mut calls = Vec::new();
    for repeat in 0..config.repeats {
        for strategy in config.order(Strategy::value_variants(), repeat) {
            println!(
                "slow: {strategy} (repeat {} of {})",
                repeat + 1,
                config.repeats
            );
            let pool = Pool::new(strategy, &addrs, &config.ca())?;
            let arm = strategy.to_string();
            let rows = load(config, (arm.as_str(), repeat), 0, move |_, call| {
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
