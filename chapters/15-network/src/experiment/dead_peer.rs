//! A dead peer: the server vanishes behind a blackhole in the middle of a
//! connection. Nothing closes; no FIN, no RST arrives. A call without a
//! deadline waits for an answer that cannot come, and the kernel keeps the
//! TCP connection open (its own keepalive, when on at all, starts after two
//! hours). HTTP/2 PING frames, sent every `keepalive_interval` and given
//! `keepalive_timeout` to be answered, are what notices.

use harness::Folder;
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::{Config, Target, ms, url};
use crate::proxy::{Mode, Path};

/// What happened to the call sent into the blackhole.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    pub arm: String,
    /// Seconds from the blackhole to the call's failure; empty when it had not
    /// failed when the wait ended.
    pub failed_after_s: Option<f64>,
    pub waited_s: f64,
    pub error: String,
}

/// A chunk the proxy saw arrive after the blackhole opened.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sent {
    pub arm: String,
    pub t_s: f64,
    pub towards_server: bool,
    pub bytes: usize,
}

pub const NO_KEEPALIVE: &str = "no keepalive";
pub const KEEPALIVE: &str = "HTTP/2 keepalive";

pub(super) async fn run(config: &Config, target: &Target, folder: &Folder) -> anyhow::Result<()> {
    let mut outcomes = Vec::new();
    let mut sent = Vec::new();
    for (arm, keepalive) in [(NO_KEEPALIVE, false), (KEEPALIVE, true)] {
        let proxy = Target::proxy(target.grpc, Path::rtt(config.dead_rtt)).await?;
        let mut endpoint = grpc_client::endpoint(&grpc_client::Target {
            url: url(&proxy),
            ca: target.ca.clone(),
            identity: None,
        })?;
        // ANCHOR: keepalive
        if keepalive {
            endpoint = endpoint
                .http2_keep_alive_interval(config.keepalive_interval)
                .keep_alive_timeout(config.keepalive_timeout);
        }
        // ANCHOR_END: keepalive
        let mut client = GreeterClient::new(endpoint.connect().await?);
        let hello = || HelloRequest {
            name: "Ada".into(),
            delay_ms: 0,
        };
        client.say_hello(hello()).await?; // the connection works

        proxy.set(Mode::Blackhole);
        println!(
            "  {arm}: the server went dark; waiting up to {} s for the call to fail",
            config.dead_wait.as_secs_f64()
        );
        let start = Instant::now();
        // No deadline: the point is what notices when none is set.
        let call = tokio::time::timeout(config.dead_wait, client.say_hello(hello())).await;
        let (failed_after_s, error) = match call {
            Ok(Err(status)) => (
                Some(start.elapsed().as_secs_f64()),
                format!("{:?}: {}", status.code(), status.message()),
            ),
            Ok(Ok(_)) => {
                anyhow::bail!("a call through a blackhole was answered: the proxy let it through")
            }
            Err(_) => (
                None,
                format!("still waiting after {} s", config.dead_wait.as_secs_f64()),
            ),
        };
        println!(
            "  {arm:<17} {}",
            match failed_after_s {
                Some(s) => format!("failed after {s:.2} s ({error})"),
                None => error.clone(),
            }
        );
        outcomes.push(Outcome {
            arm: arm.into(),
            failed_after_s,
            waited_s: start.elapsed().as_secs_f64(),
            error,
        });
        for seen in proxy.seen().into_iter().filter(|s| s.at >= start) {
            sent.push(Sent {
                arm: arm.into(),
                t_s: (seen.at - start).as_secs_f64(),
                towards_server: seen.towards_server,
                bytes: seen.bytes,
            });
        }
    }
    println!(
        "  (RTT {} ms; keepalive every {} ms, {} ms to answer)",
        ms(config.dead_rtt),
        ms(config.keepalive_interval),
        ms(config.keepalive_timeout)
    );
    folder.write_csv("dead-peer.csv", &outcomes)?;
    folder.write_csv("dead-peer-sent.csv", &sent)
}
