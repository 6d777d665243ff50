//! `network run`: what distance does to calls, measured through the delay
//! proxy at several round-trip times, every arm side by side in one run.
//!
//! The greeter and the streamer (the stack of chapter 9) run in this process
//! on 127.0.0.1; every arm reaches them through a [`Proxy`] of its own, so one
//! variable (the round trip, or the window, or the connection) changes at a
//! time. The parts, one file each:
//!
//! - `handshake.rs`: a call on a reused connection vs a fresh one (TCP, TLS
//!   1.3 full or resumed, HTTP/2 or HTTP/1.1), counted in round trips;
//! - `window.rs`: a server stream's throughput against HTTP/2's receive
//!   window, as the round trip grows, under a rate limit;
//! - `hol.rs`: small calls beside a large transfer on one connection, and on
//!   a connection of their own;
//! - `hops.rs`: chapter 10's propagating frontend with the round trip between
//!   the hops: the budget the backend gets vs the time its caller still waits;
//! - `dead_peer.rs`: a call to a server behind a blackhole, with and without
//!   HTTP/2 keepalive pings.
//!
//! `render.rs` turns the records into the report, tables and plots.

mod dead_peer;
mod handshake;
mod hol;
mod hops;
mod render;
mod window;

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::bail;
use clap::ValueEnum;
use harness::{Experiment, Folder, Start, experiment::Flags};
use serde::{Deserialize, Serialize};

use crate::{
    lab::Rate,
    proxy::{Path as ProxyPath, Proxy},
};

pub use render::render;

/// The parts of the experiment, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum)]
pub enum Part {
    Handshake,
    Window,
    Hol,
    Hops,
    DeadPeer,
}

/// What distance does to calls: handshakes, flow-control windows,
/// head-of-line blocking, deadlines across hops and a dead peer, each at
/// several round-trip times through a delay proxy on loopback. Writes CSV,
/// Markdown and SVG to --out.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Round-trip times the proxy adds, comma-separated
    #[arg(long, value_delimiter = ',', value_parser = program::duration::parse, default_value = "0ms,2ms,20ms,80ms")]
    pub rtts: Vec<Duration>,
    /// Which parts to run, comma-separated
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        default_value = "handshake,window,hol,hops,dead-peer"
    )]
    pub parts: Vec<Part>,
    /// Measured calls per arm and round trip (handshake, hops) [default: 40, quick: 8]
    #[arg(long)]
    pub calls: Option<u32>,
    /// Calls per arm and round trip made first and not recorded
    #[arg(long, default_value_t = 3)]
    pub warmup: u32,
    /// Repeats of the window part's transfers, interleaved [default: 3, quick: 1]
    #[arg(long)]
    pub repeats: Option<u32>,
    /// Bytes each window transfer streams [default: 4 MiB, quick: 1 MiB]
    #[arg(long)]
    pub stream_bytes: Option<u64>,
    /// The link's rate each way in the window and head-of-line parts
    #[arg(long, default_value = "100mbit")]
    pub rate: Rate,
    /// The head-of-line part: its round trip, its rate, the transfer's bytes
    #[arg(long, value_parser = program::duration::parse, default_value = "20ms")]
    pub hol_rtt: Duration,
    #[arg(long, default_value = "20mbit")]
    pub hol_rate: Rate,
    /// [default: 8 MiB, quick: 2 MiB]
    #[arg(long)]
    pub hol_bytes: Option<u64>,
    /// The deadline the client of the hops part sets
    #[arg(long, value_parser = program::duration::parse, default_value = "300ms")]
    pub deadline: Duration,
    /// The frontend's margin (chapter 10)
    #[arg(long, value_parser = program::duration::parse, default_value = "50ms")]
    pub margin: Duration,
    /// The dead-peer part: its round trip, the keepalive ping interval and
    /// how long a ping may go unanswered
    #[arg(long, value_parser = program::duration::parse, default_value = "20ms")]
    pub dead_rtt: Duration,
    #[arg(long, value_parser = program::duration::parse, default_value = "1s")]
    pub keepalive_interval: Duration,
    #[arg(long, value_parser = program::duration::parse, default_value = "1s")]
    pub keepalive_timeout: Duration,
    /// How long to wait for a call to a dead peer to fail [default: 20s, quick: 6s]
    #[arg(long, value_parser = program::duration::parse)]
    pub dead_wait: Option<Duration>,
    #[command(flatten)]
    pub flags: Flags,
    /// Folder for the results (an earlier run there is replaced)
    #[arg(long, default_value = "target/experiments/ch15")]
    pub out: PathBuf,
}

/// The checked configuration a run uses, stored with its results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub rtts: Vec<Duration>,
    pub parts: Vec<Part>,
    pub calls: u32,
    pub warmup: u32,
    pub repeats: u32,
    pub stream_bytes: u64,
    /// Bytes per second each way (window part).
    pub rate: Option<u64>,
    pub hol_rtt: Duration,
    pub hol_rate: Option<u64>,
    pub hol_bytes: u64,
    pub deadline: Duration,
    pub margin: Duration,
    pub dead_rtt: Duration,
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
    pub dead_wait: Duration,
    pub out: PathBuf,
}

impl Experiment for Config {
    fn out(&self) -> &Path {
        &self.out
    }
}

const MIB: u64 = 1024 * 1024;

impl Args {
    pub fn config(&self) -> anyhow::Result<Config> {
        let quick = self.flags.quick;
        let pick = |value: Option<u64>, full: u64, short: u64| {
            value.unwrap_or(if quick { short } else { full })
        };
        let config = Config {
            rtts: self.rtts.clone(),
            parts: self.parts.clone(),
            calls: pick(self.calls.map(u64::from), 40, 8) as u32,
            warmup: self.warmup,
            repeats: pick(self.repeats.map(u64::from), 3, 1) as u32,
            stream_bytes: pick(self.stream_bytes, 4 * MIB, MIB),
            rate: self.rate.bytes_per_sec(),
            hol_rtt: self.hol_rtt,
            hol_rate: self.hol_rate.bytes_per_sec(),
            hol_bytes: pick(self.hol_bytes, 8 * MIB, 2 * MIB),
            deadline: self.deadline,
            margin: self.margin,
            dead_rtt: self.dead_rtt,
            keepalive_interval: self.keepalive_interval,
            keepalive_timeout: self.keepalive_timeout,
            dead_wait: self
                .dead_wait
                .unwrap_or(Duration::from_secs(if quick { 6 } else { 20 })),
            out: self.out.clone(),
        };
        if config.rtts.is_empty() || config.parts.is_empty() {
            bail!("--rtts and --parts each need at least one value");
        }
        if config.calls == 0 || config.repeats == 0 {
            bail!("--calls and --repeats must be at least 1");
        }
        if config.stream_bytes < MIB / 16 || config.hol_bytes < MIB / 16 {
            bail!(
                "--stream-bytes and --hol-bytes must be at least 65536: a smaller transfer ends inside one window"
            );
        }
        if config.deadline <= config.margin {
            bail!(
                "--deadline ({}) must be longer than --margin ({}), or the frontend fails every call at once",
                program::duration::Show(config.deadline),
                program::duration::Show(config.margin)
            );
        }
        if config.keepalive_interval.is_zero() || config.keepalive_timeout.is_zero() {
            bail!("--keepalive-interval and --keepalive-timeout must be longer than 0ms");
        }
        if config.dead_wait <= config.keepalive_interval + config.keepalive_timeout {
            bail!(
                "--dead-wait must be longer than --keepalive-interval plus --keepalive-timeout, or keepalive has no time to notice"
            );
        }
        Ok(config)
    }
}

/// `network run`: the experiment, or with `--render DIR` only its report.
pub async fn main(args: Args) -> anyhow::Result<()> {
    let steps = harness::experiment::Steps { run, render };
    harness::experiment::main(&args.flags, || args.config(), Start::Fresh, steps).await
}

/// The servers every part calls, started in this process.
pub struct Target {
    pub grpc: SocketAddr,
    pub rest: SocketAddr,
    pub ca: PathBuf,
    _stack: stack::Stack,
}

impl Target {
    async fn start() -> anyhow::Result<Target> {
        let ca = program::default_ca();
        let (stack, servers) =
            perf::latency::Servers::spawn_stack(&program::certs_dir(), ca.clone()).await?;
        Ok(Target {
            grpc: servers.grpc_addr,
            rest: servers.rest_addr,
            ca,
            _stack: stack,
        })
    }

    /// A proxy in front of `upstream` on a free loopback port.
    pub async fn proxy(upstream: SocketAddr, path: ProxyPath) -> anyhow::Result<Proxy> {
        Proxy::start("127.0.0.1:0".parse()?, upstream, path).await
    }
}

/// A URL for a proxy's address that the dev certificate covers.
pub fn url(proxy: &Proxy) -> String {
    format!("https://localhost:{}", proxy.addr().port())
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn run(config: &Config, folder: &Folder) -> anyhow::Result<()> {
    let target = Target::start().await?;
    for part in &config.parts {
        println!("== {part:?}");
        match part {
            Part::Handshake => handshake::run(config, &target, folder).await?,
            Part::Window => window::run(config, &target, folder).await?,
            Part::Hol => hol::run(config, &target, folder).await?,
            Part::Hops => hops::run(config, &target, folder).await?,
            Part::DeadPeer => dead_peer::run(config, &target, folder).await?,
        }
    }
    Ok(())
}
