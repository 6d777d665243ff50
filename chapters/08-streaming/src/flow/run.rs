//! The run itself: a Streamer server and a client channel in this process,
//! with the windows of the [`Config`], and the two directions a demo can take.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context;
use certs::{Pki, TlsArgs, TlsListener};
use proto::streaming::v1::{Chunk, CountdownRequest, streamer_client::StreamerClient};
use tokio::{
    sync::{mpsc, oneshot},
    time::{Instant, sleep, sleep_until},
};
use tokio_stream::{StreamExt, wrappers::ReceiverStream};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Server};

use super::{
    Config, Direction, Ending, Report, Sample,
    sample::{Peak, Sampler},
};
use crate::{
    Streamer,
    service::MAX_COUNT,
    stats::{Meter, StreamStats, wire_bytes},
};

// ANCHOR: server
/// A Streamer server on 127.0.0.1:0 with the windows of `config`.
async fn start_server(
    config: &Config,
    pki: &Pki,
    streamer: Streamer,
) -> anyhow::Result<(SocketAddr, oneshot::Sender<()>, tokio::task::JoinHandle<()>)> {
    let tls = certs::server_config(&TlsArgs::in_dir(&pki.dir), false, &[b"h2"])?;
    let listener = TlsListener::bind("127.0.0.1:0".parse()?, tls).await?;
    let addr = listener.local_addr()?;
    let incoming = ReceiverStream::new(listener.incoming()).map(Ok::<_, std::io::Error>);
    let (stop, stopped) = oneshot::channel::<()>();
    let server = Server::builder()
        .initial_stream_window_size(config.stream_window)
        .initial_connection_window_size(config.connection_window)
        .http2_adaptive_window(Some(false))
        .add_service(streamer.into_server())
        .serve_with_incoming_shutdown(incoming, async {
            let _ = stopped.await;
        });
    let serving = tokio::spawn(async move {
        if let Err(e) = server.await {
            tracing::warn!("flow-control demo server: {e}");
        }
    });
    Ok((addr, stop, serving))
}

/// A client channel with the same windows.
async fn connect(config: &Config, pki: &Pki, addr: SocketAddr) -> anyhow::Result<Channel> {
    let ca = Certificate::from_pem(std::fs::read(pki.ca_cert())?);
    let channel = Channel::from_shared(format!("https://{addr}"))?
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(ca)
                .domain_name("localhost"),
        )?
        .initial_stream_window_size(config.stream_window)
        .initial_connection_window_size(config.connection_window)
        .http2_adaptive_window(false)
        .connect()
        .await
        .context("connecting to the demo server")?;
    Ok(channel)
}
// ANCHOR_END: server

/// Runs the demo; `on_sample` sees each sample as it is taken.
pub async fn run(config: &Config, mut on_sample: impl FnMut(&Sample)) -> anyhow::Result<Report> {
    config.check()?;
    // A throwaway PKI: the demo needs nothing from certs/ and leaves nothing.
    let dir = tempfile::tempdir()?;
    let pki = Pki::new(dir.path());
    pki.generate(false)?;

    let streamer = match config.direction {
        Direction::Upload => Streamer::new().with_upload_read_pause(config.read_every),
        Direction::Download => Streamer::new(),
    };
    let stats = streamer.stats();
    let (addr, stop_server, serving) = start_server(config, &pki, streamer).await?;
    let client = StreamerClient::new(connect(config, &pki, addr).await?)
        .max_decoding_message_size(crate::service::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(crate::service::MAX_MESSAGE_BYTES);

    let report = match config.direction {
        Direction::Upload => upload(config, client, &stats, &mut on_sample).await?,
        Direction::Download => download(config, client, &stats, &mut on_sample).await?,
    };

    let _ = stop_server.send(());
    if tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .is_err()
    {
        tracing::warn!("the demo server did not stop within 5 s");
    }
    Ok(report)
}

async fn upload(
    config: &Config,
    mut client: StreamerClient<Channel>,
    stats: &Arc<StreamStats>,
    on_sample: &mut impl FnMut(&Sample),
) -> anyhow::Result<Report> {
    let sent = Arc::new(Meter::default());
    let peak = Arc::new(Peak::default());

    // tonic pulls the request stream whenever it can send; counting there
    // counts exactly what was handed to tonic.
    let (tx, rx) = mpsc::channel::<Chunk>(1);
    let requests = ReceiverStream::new(rx).map({
        let (sent, peak, stats) = (sent.clone(), peak.clone(), stats.clone());
        move |chunk| {
            let total = sent.record(wire_bytes(&chunk));
            peak.observe(total, stats.received.bytes());
            chunk
        }
    });
    let mut call = tokio::spawn(async move { client.upload(requests).await });

    // The fast sender: a new chunk as soon as the previous one is taken.
    let started = Instant::now();
    let end = started + config.duration;
    let sender = {
        let (sent, message_bytes) = (sent.clone(), config.message_bytes as usize);
        async move {
            for seq in 0.. {
                let chunk = Chunk {
                    seq,
                    data: vec![0x5a; message_bytes],
                };
                tokio::select! {
                    _ = sleep_until(end) => break,
                    result = sent.send(&tx, chunk) => if result.is_err() { break },
                }
            }
            // Dropping `tx` here ends the request stream: the client is done.
        }
    };

    let take = || Sample {
        elapsed: started.elapsed(),
        sent: sent.snapshot(),
        consumed: stats.received.bytes(),
        note: "",
    };
    let mut sampler = Sampler::new(config, started, take, &peak, on_sample);
    sampler.until(sender).await;
    let at_stop = sampler.note("sender stopped, closed its side");

    // Let the slow reader work through what is still in flight.
    let drained = sampler
        .until(tokio::time::timeout(config.drain_limit, &mut call))
        .await;
    let ending = match drained {
        Ok(joined) => {
            let summary = joined
                .context("the upload task panicked")?
                .context("Upload failed")?
                .into_inner();
            Ending::Drained {
                after: started.elapsed().saturating_sub(at_stop.elapsed),
                server_chunks: summary.chunks,
                server_bytes: summary.bytes,
            }
        }
        Err(_) => {
            call.abort();
            Ending::Cancelled {
                cleaned_up_after: wait_for_cleanup(stats).await,
            }
        }
    };
    Ok(finish(config, sampler, at_stop, ending, stats))
}

async fn download(
    config: &Config,
    mut client: StreamerClient<Channel>,
    stats: &Arc<StreamStats>,
    on_sample: &mut impl FnMut(&Sample),
) -> anyhow::Result<Report> {
    let consumed = Arc::new(Meter::default());
    let peak = Peak::default();
    let request = CountdownRequest {
        count: MAX_COUNT,
        interval_ms: 0, // as fast as flow control allows
        payload_bytes: config.message_bytes,
    };
    let started = Instant::now();
    let end = started + config.duration;
    let mut ticks = client.countdown(request).await?.into_inner();

    // The slow reader: one tick, then a pause.
    let reader = async {
        while Instant::now() < end {
            let tick = tokio::select! {
                _ = sleep_until(end) => break,
                tick = ticks.message() => tick,
            };
            let Some(tick) = tick? else { break };
            // Just before a message is taken, the bytes in flight peak.
            peak.observe(stats.sent.bytes(), consumed.bytes());
            consumed.record(wire_bytes(&tick));
            sleep(config.read_every).await;
        }
        anyhow::Ok(())
    };

    let take = || Sample {
        elapsed: started.elapsed(),
        sent: stats.sent.snapshot(),
        consumed: consumed.bytes(),
        note: "",
    };
    let mut sampler = Sampler::new(config, started, take, &peak, on_sample);
    sampler.until(reader).await?;
    let at_stop = sampler.note("reader stopped, cancels the call");

    // Dropping the stream cancels the call: the client resets it.
    drop(ticks);
    let ending = Ending::Cancelled {
        cleaned_up_after: wait_for_cleanup(stats).await,
    };
    Ok(finish(config, sampler, at_stop, ending, stats))
}

/// Waits, up to 5 s, until the server holds no stream and no task; returns
/// how long that took, or `None` if it did not happen.
async fn wait_for_cleanup(stats: &StreamStats) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        if stats.open_streams() == 0 && stats.live_tasks() == 0 {
            return Some(started.elapsed());
        }
        sleep(Duration::from_millis(1)).await;
    }
    None
}

/// How both directions end: the last sample, then the report, with the
/// server's counters read once the call is over.
fn finish<F: Fn() -> Sample, G: FnMut(&Sample)>(
    config: &Config,
    sampler: Sampler<'_, F, G>,
    at_stop: Sample,
    ending: Ending,
    stats: &StreamStats,
) -> Report {
    let (samples, peak_in_flight) = sampler.finish();
    Report {
        config: config.clone(),
        samples,
        at_stop,
        peak_in_flight,
        ending,
        server_open_streams: stats.open_streams(),
        server_live_tasks: stats.live_tasks(),
    }
}
