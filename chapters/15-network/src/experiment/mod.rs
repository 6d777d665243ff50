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

use std::net::{IpAddr, Ipv4Addr};

use anyhow::{Context, bail};
use clap::ValueEnum;
use harness::{Experiment, Folder, Start, experiment::Flags};
use serde::{Deserialize, Serialize};

use crate::{
    lab::{self, Rate},
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
    #[arg(long, value_delimiter = ',', value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "0ms,2ms,20ms,80ms")]
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
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "20ms")]
    pub hol_rtt: Duration,
    #[arg(long, default_value = "20mbit")]
    pub hol_rate: Rate,
    /// [default: 8 MiB, quick: 2 MiB]
    #[arg(long)]
    pub hol_bytes: Option<u64>,
    /// The deadline the client of the hops part sets
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "300ms")]
    pub deadline: Duration,
    /// The frontend's margin (chapter 10)
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "50ms")]
    pub margin: Duration,
    /// The dead-peer part: its round trip, the keepalive ping interval and
    /// how long a ping may go unanswered
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "20ms")]
    pub dead_rtt: Duration,
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "1s")]
    pub keepalive_interval: Duration,
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "1s")]
    pub keepalive_timeout: Duration,
    /// How long to wait for a call to a dead peer to fail [default: 20s, quick: 6s]
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true)]
    pub dead_wait: Option<Duration>,
    /// Run in the lab (`network up` first; root): servers in wk15-server,
    /// clients and proxies in wk15-client, across the veth pair; the rate
    /// limits are tbf's, set by this run for each part (the proxies only delay)
    #[arg(long)]
    pub lab: bool,
    /// The development PKI the servers use (made there if missing)
    #[arg(long, env = "CERTS_DIR", value_name = "DIR")]
    pub certs_dir: Option<PathBuf>,
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
    pub lab: bool,
    /// Not stored by runs before it existed: those used the workspace's.
    #[serde(default = "program::certs_dir")]
    pub certs_dir: PathBuf,
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
            lab: self.lab,
            certs_dir: self.certs_dir.clone().unwrap_or_else(program::certs_dir),
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
    // Each part's records are its tables: under 200 kB for a full run.
    let steps = harness::experiment::Steps {
        run,
        reduce: harness::experiment::nothing_to_reduce,
        render,
        raw: &[],
    };
    harness::experiment::main(&args.flags, || args.config(), Start::Fresh, steps).await
}

impl Config {
    /// The proxy's path at this round trip: with the link's `rate` on
    /// loopback; in the lab tbf limits the rate, and the proxy only delays.
    pub fn path(&self, rtt: Duration, rate: Option<u64>) -> ProxyPath {
        ProxyPath {
            rate: if self.lab { None } else { rate },
            ..ProxyPath::rtt(rtt)
        }
    }
}

/// The servers every part calls: in this process on 127.0.0.1, or (`--lab`)
/// on a thread of their own inside the server's namespace.
pub struct Target {
    pub grpc: SocketAddr,
    pub rest: SocketAddr,
    pub ca: PathBuf,
    _serving: Serving,
}

/// What keeps the servers up; dropping it stops them.
enum Serving {
    Here {
        _stack: stack::Stack,
    },
    /// The lab's thread serves until this is dropped.
    InLab {
        _stop: tokio::sync::oneshot::Sender<()>,
    },
}

impl Target {
    async fn start(lab: bool, certs_dir: &Path) -> anyhow::Result<Target> {
        let ((grpc, rest), serving) = if lab {
            let (ready, addrs) = tokio::sync::oneshot::channel();
            let (stop, stopped) = tokio::sync::oneshot::channel();
            let dir = certs_dir.to_path_buf();
            std::thread::spawn(move || serve_in_lab(ready, stopped, dir));
            let addrs = addrs.await.context("the lab's server thread ended")??;
            (addrs, Serving::InLab { _stop: stop })
        } else {
            let stack = start_stack(IpAddr::V4(Ipv4Addr::LOCALHOST), certs_dir).await?;
            (
                (stack.grpc_addr, stack.rest_addr),
                Serving::Here { _stack: stack },
            )
        };
        Ok(Target {
            grpc,
            rest,
            ca: certs_dir.join("ca.pem"),
            _serving: serving,
        })
    }

    /// A proxy in front of `upstream` on a free loopback port.
    pub async fn proxy(upstream: SocketAddr, path: ProxyPath) -> anyhow::Result<Proxy> {
        Proxy::start("127.0.0.1:0".parse()?, upstream, path).await
    }
}

async fn start_stack(ip: IpAddr, certs_dir: &Path) -> anyhow::Result<stack::Stack> {
    stack::Stack::start(&stack::Args {
        grpc_addr: SocketAddr::new(ip, 0),
        rest_addr: SocketAddr::new(ip, 0),
        tls: certs::TlsArgs::in_dir(certs_dir),
        mtls: false,
        ready_file: None,
        metrics_addr: None,
    })
    .await
}

type Addrs = anyhow::Result<(SocketAddr, SocketAddr)>;

/// The stack on a thread that moved into the server's namespace first, so
/// its runtime's sockets (and threads) belong there.
fn serve_in_lab(
    ready: tokio::sync::oneshot::Sender<Addrs>,
    stopped: tokio::sync::oneshot::Receiver<()>,
    certs_dir: PathBuf,
) {
    let started = lab::enter(lab::Side::Server).and_then(|()| Ok(tokio::runtime::Runtime::new()?));
    let runtime = match started {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    runtime.block_on(async move {
        match start_stack(IpAddr::V4(lab::SERVER_ADDR), &certs_dir).await {
            Ok(stack) => {
                let _ = ready.send(Ok((stack.grpc_addr, stack.rest_addr)));
                let _ = stopped.await;
            }
            Err(e) => {
                let _ = ready.send(Err(e));
            }
        }
    });
}

/// A URL for a proxy's address that the dev certificate covers.
pub fn url(proxy: &Proxy) -> String {
    format!("https://localhost:{}", proxy.addr().port())
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn run(config: &Config, folder: &Folder) -> anyhow::Result<()> {
    let target = Target::start(config.lab, &config.certs_dir).await?;
    for part in &config.parts {
        println!("== {part:?}");
        if config.lab {
            // Only the window and head-of-line parts are about the rate.
            let bits = |rate: Option<u64>| rate.map_or(Rate::Off, |r| Rate::BitsPerSec(r * 8));
            lab::set_rate(match part {
                Part::Window => bits(config.rate),
                Part::Hol => bits(config.hol_rate),
                _ => Rate::Off,
            })?;
        }
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
