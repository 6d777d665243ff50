//! A client that opens many Countdowns and reads none of them, against the
//! Streamer on the gRPC port as the stack serves it, with its reply budget or
//! without: the server's memory, sampled while the streams sit unread, and a
//! well-behaved client served on a connection of its own meanwhile.
//!
//! Client and server share this process, so the figure is this process's
//! resident memory (`VmRSS`). The client adds little to it: it keeps HTTP/2's
//! default 64 KiB windows and never reads, so at most 64 KiB ever reaches it.

use std::{net::SocketAddr, time::Duration};

use anyhow::Context;
use certs::{Pki, TlsArgs};
use clap::{Parser, ValueEnum};
use grpc_server::BoundServer;
use program::proc::{Pid, rss_kib};
use proto::streaming::v1::{CountdownRequest, Tick, streamer_client::StreamerClient};
use tokio::{sync::oneshot, time::Instant};
use tonic::{
    Streaming,
    transport::{Certificate, Channel, ClientTlsConfig},
};

use crate::{
    Streamer,
    budget::ReplyBudget,
    flow::parse_size,
    service::{MAX_MESSAGE_BYTES, MAX_PAYLOAD_BYTES},
    stats::StreamStats,
};

/// HTTP/2's initial window (RFC 9113, 6.9.2), which the attacker never grows.
const DEFAULT_WINDOW: u32 = 65_535;
/// Ticks each unread Countdown asks for: more than it will ever be sent.
const UNREAD_TICKS: u32 = 1_000;
/// Full-size ticks the well-behaved client reads before and during the attack.
const WARM_UP_TICKS: u32 = 3;
const LEGITIMATE_TICKS: u32 = 5;
/// Longest the well-behaved client may take; past it the run fails.
const SERVED_WITHIN: Duration = Duration::from_secs(30);
/// Longest the server may take to let go of the streams once the client left.
const RELEASED_WITHIN: Duration = Duration::from_secs(10);
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// One connection opens many Countdowns and reads none of them.
///
/// Starts the gRPC port of chapter 4 with the Streamer in this process, once
/// with its reply budget and once without, and prints the process's resident
/// memory every 250 ms while the streams sit unread; then how long a
/// well-behaved Countdown on a connection of its own took meanwhile, and the
/// memory once the client has left.
#[derive(Parser, Debug)]
#[command(name = "slow_reader", version)]
pub struct Args {
    /// Only this run: on (with the reply budget) or off [default: both, on
    /// first, since memory the allocator once took is rarely given back]
    #[arg(long, value_enum)]
    pub budget: Option<Budget>,
    /// Countdowns opened on the one connection, at most the server's limit of
    /// concurrent streams
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u16).range(1..=grpc_server::server::MAX_CONCURRENT_STREAMS as i64))]
    pub streams: u16,
    /// Payload of each tick: bytes or KiB/MiB, at most 1MiB
    #[arg(long, value_parser = parse_payload, default_value = "1MiB")]
    pub payload: u32,
    /// How long the streams sit unread
    #[arg(long, value_parser = program::duration::parse, default_value = "3s")]
    pub hold: Duration,
}

fn parse_payload(text: &str) -> Result<u32, String> {
    let bytes = parse_size(text)?;
    if bytes > MAX_PAYLOAD_BYTES {
        return Err(format!(
            "at most {MAX_PAYLOAD_BYTES} bytes (1MiB), as the Streamer allows"
        ));
    }
    Ok(bytes)
}

impl Args {
    /// The runs to make, in order.
    pub fn configs(&self) -> Vec<Config> {
        let budgets = match self.budget {
            Some(budget) => vec![budget],
            None => vec![Budget::On, Budget::Off],
        };
        budgets
            .into_iter()
            .map(|budget| Config {
                budget,
                streams: self.streams.into(),
                payload_bytes: self.payload,
                hold: self.hold,
            })
            .collect()
    }
}

/// Whether the Streamer pays for its replies from a budget (see
/// [`crate::budget`]) or makes them as fast as its channels take them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Budget {
    On,
    Off,
}

// The report names a run as `--budget` chose it.
program::clap_name_display!(Budget);

#[derive(Debug, Clone)]
pub struct Config {
    pub budget: Budget,
    /// Countdowns the client opens on its one connection and never reads.
    pub streams: usize,
    /// Payload of each tick.
    pub payload_bytes: u32,
    /// How long the streams sit unread while memory is sampled.
    pub hold: Duration,
}

/// One look at the server while the streams sit unread.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub at: Duration,
    pub open_streams: u64,
    /// What the budget counts as held; 0 without a budget.
    pub held_bytes: usize,
    pub rss_kib: u64,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub budget: Budget,
    /// Resident memory once a well-behaved client has read a few full ticks.
    pub baseline_kib: u64,
    pub peak_kib: u64,
    /// Once the server has let go of the attacker's streams.
    pub after_kib: u64,
    pub peak_held_bytes: usize,
    /// How long the well-behaved client's Countdown took during the attack.
    pub legitimate: Duration,
}

// ANCHOR: run
pub async fn run(config: &Config, mut on_sample: impl FnMut(&Sample)) -> anyhow::Result<Report> {
    let dir = tempfile::tempdir()?;
    let pki = Pki::new(dir.path());
    pki.generate(false)?;
    let streamer = match config.budget {
        Budget::On => Streamer::new(),
        Budget::Off => Streamer::new().with_reply_budget(ReplyBudget::unlimited()),
    };
    let (stats, budget) = (streamer.stats(), streamer.budget());
    let server = Server::start(&pki, streamer).await?;

    let mut legitimate = client(connect(&pki, server.addr, None).await?);
    // Warm up first, so the baseline already counts what one full-size stream
    // costs (buffers, allocator arenas).
    read_countdown(&mut legitimate, config.payload_bytes, WARM_UP_TICKS).await?;
    let baseline_kib = rss_kib(Pid::This);

    // The attack: one connection, every stream opened, not a byte read.
    let mut attacker = client(connect(&pki, server.addr, Some(DEFAULT_WINDOW)).await?);
    let mut unread: Vec<Streaming<Tick>> = Vec::with_capacity(config.streams);
    for _ in 0..config.streams {
        let request = countdown(config.payload_bytes, UNREAD_TICKS);
        unread.push(attacker.countdown(request).await?.into_inner());
    }
    let started = Instant::now();
    let (mut peak_kib, mut peak_held_bytes) = (0, 0);
    while started.elapsed() < config.hold {
        tokio::time::sleep(SAMPLE_EVERY).await;
        let sample = Sample {
            at: started.elapsed(),
            open_streams: stats.open_streams(),
            held_bytes: budget.held_bytes(),
            rss_kib: rss_kib(Pid::This),
        };
        peak_kib = peak_kib.max(sample.rss_kib);
        peak_held_bytes = peak_held_bytes.max(sample.held_bytes);
        on_sample(&sample);
    }

    // Meanwhile a well-behaved client, on its own connection, is served.
    let called = Instant::now();
    read_countdown(&mut legitimate, config.payload_bytes, LEGITIMATE_TICKS).await?;
    let legitimate = called.elapsed();
    peak_kib = peak_kib.max(rss_kib(Pid::This));

    // The attacker leaves; what the server held for it must go.
    drop((unread, attacker));
    released(&stats, &budget).await?;
    let after_kib = rss_kib(Pid::This);
    server.stop().await;
    Ok(Report {
        budget: config.budget,
        baseline_kib,
        peak_kib,
        after_kib,
        peak_held_bytes,
        legitimate,
    })
}
// ANCHOR_END: run

fn countdown(payload_bytes: u32, count: u32) -> CountdownRequest {
    CountdownRequest {
        count,
        interval_ms: 0,
        payload_bytes,
    }
}

/// Reads a Countdown to its end, or fails after [`SERVED_WITHIN`].
async fn read_countdown(
    client: &mut StreamerClient<Channel>,
    payload_bytes: u32,
    count: u32,
) -> anyhow::Result<()> {
    let read = async {
        let mut ticks = client
            .countdown(countdown(payload_bytes, count))
            .await?
            .into_inner();
        let mut received = 0;
        while ticks.message().await?.is_some() {
            received += 1;
        }
        anyhow::ensure!(received == count, "{received} ticks of {count}");
        Ok(())
    };
    tokio::time::timeout(SERVED_WITHIN, read)
        .await
        .with_context(|| {
            format!("a well-behaved Countdown was not served within {SERVED_WITHIN:?}")
        })?
}

/// Waits until the server holds no stream, task or reply for the attacker.
async fn released(stats: &StreamStats, budget: &ReplyBudget) -> anyhow::Result<()> {
    let since = Instant::now();
    while stats.open_streams() > 0 || stats.live_tasks() > 0 || budget.held_bytes() > 0 {
        anyhow::ensure!(
            since.elapsed() < RELEASED_WITHIN,
            "{RELEASED_WITHIN:?} after the client left, the server still holds {} streams, \
             {} tasks and {} reply bytes",
            stats.open_streams(),
            stats.live_tasks(),
            budget.held_bytes()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

fn client(channel: Channel) -> StreamerClient<Channel> {
    StreamerClient::new(channel).max_decoding_message_size(MAX_MESSAGE_BYTES)
}

/// A channel of its own (one TCP connection); `window` fixes both HTTP/2
/// windows, else they are tonic's defaults.
async fn connect(pki: &Pki, addr: SocketAddr, window: Option<u32>) -> anyhow::Result<Channel> {
    let ca = Certificate::from_pem(std::fs::read(pki.ca_cert())?);
    let tls = ClientTlsConfig::new()
        .ca_certificate(ca)
        .domain_name("localhost");
    let mut endpoint = Channel::from_shared(format!("https://{addr}"))?.tls_config(tls)?;
    if let Some(window) = window {
        endpoint = endpoint
            .initial_stream_window_size(window)
            .initial_connection_window_size(window)
            .http2_adaptive_window(false);
    }
    Ok(endpoint.connect().await?)
}

/// The gRPC port of chapter 4, with all its limits, serving the Streamer.
struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Server {
    async fn start(pki: &Pki, streamer: Streamer) -> anyhow::Result<Server> {
        let args = grpc_server::Args {
            addr: "127.0.0.1:0".parse()?,
            tls: TlsArgs::in_dir(&pki.dir),
            mtls: false,
            concurrency_limit: None,
        };
        let server = BoundServer::bind(&args)
            .await?
            .add_service(streamer.into_server());
        let addr = server.local_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = tokio::spawn(server.serve(async {
            let _ = stopped.await;
        }));
        Ok(Server {
            addr,
            stop,
            serving,
        })
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        if tokio::time::timeout(Duration::from_secs(5), self.serving)
            .await
            .is_err()
        {
            tracing::warn!("the slow-reader demo server did not stop within 5 s");
        }
    }
}
