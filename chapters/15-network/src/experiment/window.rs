//! A server stream's throughput against the client's HTTP/2 receive window.
//!
//! The server may have at most one window of bytes unacknowledged; the
//! acknowledgement (WINDOW_UPDATE) takes a round trip to come back. So a
//! stream moves at most `window / RTT`, whatever the link's rate: the
//! bandwidth-delay product is the window a stream needs to fill its link.

use std::time::Duration;

use harness::Folder;
use proto::streaming::v1::{CountdownRequest, streamer_client::StreamerClient};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tonic::transport::Endpoint;

use super::{Config, Target, ms, url};

/// Each message's payload: small enough that a window holds several.
const PAYLOAD: u32 = 16 * 1024;

// ANCHOR: windows
/// The client's receive window, as tonic's `Endpoint` sets it.
#[derive(Debug, Clone, Copy)]
pub enum Window {
    /// Stream and connection windows of this many bytes.
    Fixed(u32),
    /// tonic's (hyper's) defaults: 2 MiB per stream, 5 MiB per connection.
    Default,
    /// hyper measures the bandwidth-delay product with PINGs and grows the
    /// windows to match it.
    Adaptive,
}

pub const WINDOWS: [(&str, Window); 4] = [
    ("64 KiB (HTTP/2's initial)", Window::Fixed(65_535)),
    ("1 MiB", Window::Fixed(1024 * 1024)),
    ("tonic default (2 MiB)", Window::Default),
    ("adaptive (BDP probing)", Window::Adaptive),
];

fn configure(endpoint: Endpoint, window: Window) -> Endpoint {
    match window {
        Window::Fixed(bytes) => endpoint
            .initial_stream_window_size(bytes)
            .initial_connection_window_size(bytes),
        Window::Default => endpoint,
        Window::Adaptive => endpoint.http2_adaptive_window(true),
    }
}
// ANCHOR_END: windows

/// One transfer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Transfer {
    pub rtt_ms: f64,
    pub window: String,
    pub repeat: u32,
    pub bytes: u64,
    /// From the first message to the last: the handshake's round trips and
    /// the stream's first one are left out.
    pub seconds: f64,
    pub mbit_per_s: f64,
}

pub(super) async fn run(config: &Config, target: &Target, folder: &Folder) -> anyhow::Result<()> {
    let mut transfers = Vec::new();
    for repeat in 1..=config.repeats {
        for &rtt in &config.rtts {
            // The windows interleave, so drift lands on each alike.
            for (label, window) in WINDOWS {
                let path = config.path(rtt, config.rate);
                let proxy = Target::proxy(target.grpc, path).await?;
                let endpoint = grpc_client::endpoint(&grpc_client::Target {
                    url: url(&proxy),
                    ca: target.ca.clone(),
                    identity: None,
                })?;
                let channel = configure(endpoint, window).connect().await?;
                let (bytes, took) =
                    stream(StreamerClient::new(channel), config.stream_bytes).await?;
                let mbit_per_s = bytes as f64 * 8.0 / took.as_secs_f64() / 1e6;
                println!(
                    "  repeat {repeat}, RTT {:>3} ms, {label:<26} {mbit_per_s:>7.1} Mbit/s",
                    ms(rtt)
                );
                transfers.push(Transfer {
                    rtt_ms: ms(rtt),
                    window: label.into(),
                    repeat,
                    bytes,
                    seconds: took.as_secs_f64(),
                    mbit_per_s,
                });
            }
        }
    }
    folder.write_csv("window.csv", &transfers)
}

/// Streams `total` bytes from the server; returns the bytes after the first
/// message and how long they took.
pub async fn stream(
    mut client: StreamerClient<tonic::transport::Channel>,
    total: u64,
) -> anyhow::Result<(u64, Duration)> {
    let request = CountdownRequest {
        count: total.div_ceil(u64::from(PAYLOAD)) as u32,
        interval_ms: 0,
        payload_bytes: PAYLOAD,
    };
    let mut ticks = client.countdown(request).await?.into_inner();
    let mut first = None;
    let mut bytes = 0;
    while let Some(tick) = ticks.message().await? {
        match first {
            None => first = Some(Instant::now()),
            Some(_) => bytes += tick.payload.len() as u64,
        }
    }
    let first = first.ok_or_else(|| anyhow::anyhow!("the stream ended without a message"))?;
    Ok((bytes, first.elapsed()))
}
