//! Head-of-line blocking: small calls beside one large transfer.
//!
//! On one HTTP/2 connection every stream's bytes share one TCP byte stream,
//! and so one queue on the path: a small answer waits behind whatever the
//! large transfer already put there (up to its flow-control window). On a
//! connection of its own, a small answer queues only for the link itself.
//!
//! The proxy's rate limit is one wire shared by all its connections, served
//! a chunk at a time in turn (more like a fair queue than a FIFO): the
//! separate connection is the best case.

use std::time::Duration;

use harness::Folder;
use proto::{
    greeter::v1::{HelloRequest, greeter_client::GreeterClient},
    streaming::v1::streamer_client::StreamerClient,
};
use serde::{Deserialize, Serialize};
use tokio::{task::JoinSet, time::Instant};
use tonic::transport::Channel;

use super::{Config, Target, ms, url, window::stream};
use crate::proxy::Proxy;

/// How often a small call starts.
pub const EVERY: Duration = Duration::from_millis(50);

// ANCHOR: arms
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arm {
    /// The small calls with no transfer: the floor.
    Alone,
    /// On the transfer's connection.
    SameConnection,
    /// On a connection of their own, through the same link.
    OwnConnection,
}

pub const ARMS: [(&str, Arm); 3] = [
    ("no transfer", Arm::Alone),
    ("same connection as the transfer", Arm::SameConnection),
    ("own connection", Arm::OwnConnection),
];
// ANCHOR_END: arms

/// One small call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Small {
    pub arm: String,
    pub repeat: u32,
    pub i: u32,
    /// From the time the call was due to start.
    pub micros: u64,
}

pub(super) async fn run(config: &Config, target: &Target, folder: &Folder) -> anyhow::Result<()> {
    let mut smalls = Vec::new();
    for repeat in 1..=config.repeats {
        for (label, arm) in ARMS {
            let path = config.path(config.hol_rtt, config.hol_rate);
            let proxy = Target::proxy(target.grpc, path).await?;
            let big = channel(&proxy, target).await?;
            let small = match arm {
                Arm::OwnConnection => channel(&proxy, target).await?,
                _ => big.clone(),
            };
            let took = if arm == Arm::Alone {
                small_calls(small, async {
                    tokio::time::sleep(EVERY * config.calls).await;
                    Ok(())
                })
                .await?
            } else {
                let transfer = stream(StreamerClient::new(big), config.hol_bytes);
                small_calls(small, async { transfer.await.map(|_| ()) }).await?
            };
            let p50 = perf::stats::Summary::of(&took).map_or(0, |s| s.p50);
            println!(
                "  repeat {repeat}, {label:<32} {} small calls, p50 {:.1} ms",
                took.len(),
                p50 as f64 / 1e3
            );
            smalls.extend(took.into_iter().enumerate().map(|(i, micros)| Small {
                arm: label.into(),
                repeat,
                i: i as u32,
                micros,
            }));
        }
    }
    println!(
        "  (RTT {} ms, transfers of {} bytes)",
        ms(config.hol_rtt),
        config.hol_bytes
    );
    folder.write_csv("hol.csv", &smalls)
}

async fn channel(proxy: &Proxy, target: &Target) -> anyhow::Result<Channel> {
    let endpoint = grpc_client::endpoint(&grpc_client::Target {
        url: url(proxy),
        ca: target.ca.clone(),
        identity: None,
    })?;
    Ok(endpoint.connect().await?)
}

/// Starts a small call every [`EVERY`] until `background` ends, each on its
/// own task so that a slow one does not delay the next; returns each call's
/// time from when it was due.
async fn small_calls(
    channel: Channel,
    background: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<Vec<u64>> {
    let mut calls = JoinSet::new();
    let mut ticks = tokio::time::interval(EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    tokio::pin!(background);
    loop {
        tokio::select! {
            done = &mut background => { done?; break; }
            due = ticks.tick() => {
                let mut client = GreeterClient::new(channel.clone());
                calls.spawn(async move {
                    let request = HelloRequest { name: "Ada".into(), delay_ms: 0 };
                    client.say_hello(request).await.map(|_| Instant::now() - due)
                });
            }
        }
    }
    let mut took = Vec::new();
    while let Some(call) = calls.join_next().await {
        took.push(call??.as_micros() as u64);
    }
    Ok(took)
}
