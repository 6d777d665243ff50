//! A call on a reused connection vs a fresh one, at each round trip.
//!
//! The arms are chapter 10's callers, pointed at proxies: the same greeting,
//! the same interleaving (A B C A B C ...), only the distance changes. Each
//! arm has a proxy pair of its own, so that one arm's connections never
//! queue behind another's.

use harness::Folder;
use perf::latency::{Arm, Caller, Http, Servers, measure};
use serde::{Deserialize, Serialize};

use super::{Config, Target, ms, url};
use crate::proxy::{Path, Proxy};

/// One measured call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Call {
    pub rtt_ms: f64,
    pub arm: String,
    pub i: u32,
    pub micros: u64,
}

/// How the TLS handshakes of a fresh-connection arm went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Handshakes {
    pub rtt_ms: f64,
    pub arm: String,
    pub full: u64,
    pub resumed: u64,
}

// ANCHOR: arms
/// The arms, each changing one thing from its neighbour.
pub const ARMS: [(&str, Kind); 7] = [
    (
        "gRPC, reused channel",
        Kind::Reused {
            grpc: true,
            http: Http::H2,
        },
    ),
    (
        "gRPC, fresh conn, full TLS",
        Kind::Fresh {
            grpc: true,
            http: Http::H2,
            resume: false,
        },
    ),
    (
        "gRPC, fresh conn, resumed TLS",
        Kind::Fresh {
            grpc: true,
            http: Http::H2,
            resume: true,
        },
    ),
    (
        "REST h2, reused client",
        Kind::Reused {
            grpc: false,
            http: Http::H2,
        },
    ),
    (
        "REST h2, fresh conn, full TLS",
        Kind::Fresh {
            grpc: false,
            http: Http::H2,
            resume: false,
        },
    ),
    (
        "REST http/1.1, reused client",
        Kind::Reused {
            grpc: false,
            http: Http::H1,
        },
    ),
    (
        "REST http/1.1, fresh conn, full TLS",
        Kind::Fresh {
            grpc: false,
            http: Http::H1,
            resume: false,
        },
    ),
];
// ANCHOR_END: arms

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Reused {
        grpc: bool,
        http: Http,
    },
    Fresh {
        grpc: bool,
        http: Http,
        resume: bool,
    },
}

pub(super) async fn run(config: &Config, target: &Target, folder: &Folder) -> anyhow::Result<()> {
    let mut calls = Vec::new();
    let mut handshakes = Vec::new();
    for &rtt in &config.rtts {
        let mut arms = Vec::new();
        // Kept alive while the arms call through them.
        let mut proxies: Vec<(Proxy, Proxy)> = Vec::new();
        for (label, kind) in ARMS {
            let path = Path::rtt(rtt);
            let grpc = Target::proxy(target.grpc, path).await?;
            let rest = Target::proxy(target.rest, path).await?;
            let servers = Servers::new(url(&grpc), url(&rest), target.ca.clone())?;
            let caller = match kind {
                Kind::Reused { grpc: true, .. } => {
                    Caller::grpc(&servers.grpc_url, &servers.ca).await?
                }
                Kind::Reused { grpc: false, http } => {
                    Caller::rest(&servers.rest_url, &servers.ca, http == Http::H1)?
                }
                Kind::Fresh { grpc, http, resume } => servers.fresh(grpc, http, resume)?,
            };
            arms.push(Arm {
                label: label.into(),
                caller,
            });
            proxies.push((grpc, rest));
        }
        println!(
            "  RTT {} ms: {} arms x {} calls (+{} warm-up)",
            ms(rtt),
            arms.len(),
            config.calls,
            config.warmup
        );
        let samples = measure(&arms, config.warmup, config.calls, 1, |_, done, of| {
            println!("    ... {done}/{of} calls per arm")
        })
        .await?;
        for (arm, rounds) in arms.iter().zip(&samples) {
            for (i, &micros) in rounds[0].iter().enumerate() {
                calls.push(Call {
                    rtt_ms: ms(rtt),
                    arm: arm.label.clone(),
                    i: i as u32,
                    micros,
                });
            }
            if let Caller::Fresh {
                handshakes: counts, ..
            } = &arm.caller
            {
                let (full, resumed) = counts.counts();
                handshakes.push(Handshakes {
                    rtt_ms: ms(rtt),
                    arm: arm.label.clone(),
                    full,
                    resumed,
                });
            }
        }
    }
    folder.write_csv("handshake.csv", &calls)?;
    folder.write_csv("handshake-tls.csv", &handshakes)?;
    Ok(())
}
