//! HTTP/2 flow control made visible: a fast sender, a slow reader, and the
//! bytes between them.
//!
//! [`run`] starts a `Streamer` server and a client in this process, over TLS
//! on `127.0.0.1:0`, with the HTTP/2 windows set explicitly on both ends. The
//! sender pushes messages as fast as tonic takes them; the reader takes one
//! message every `read_every`. Every `report_every` a [`Sample`] records how
//! many bytes the sender has handed to tonic, how many the reader has taken,
//! and the difference: the bytes in flight, which flow control bounds.
//!
//! - **upload** (client streaming): the client sends `Upload` chunks; the
//!   server's handler is the slow reader. The window in force is the one the
//!   *server* advertises.
//! - **download** (server streaming): the server's `Countdown` task sends
//!   ticks; the client is the slow reader. The window in force is the one the
//!   *client* advertises.

use std::{
    fmt::Write as _,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use certs::{Pki, TlsArgs, TlsListener};
use proto::streaming::v1::{Chunk, CountdownRequest, streamer_client::StreamerClient};
use tokio::{
    sync::{mpsc, oneshot},
    time::{Instant, sleep, sleep_until},
};
use tokio_stream::{StreamExt, wrappers::ReceiverStream};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Server};

use crate::{
    Streamer,
    service::MAX_COUNT,
    stats::{Meter, MeterSnapshot, StreamStats, wire_bytes},
};

/// Which way the bytes flow, and so who reads slowly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Direction {
    /// Client streaming (`Upload`): the client sends, the server reads slowly
    Upload,
    /// Server streaming (`Countdown`): the server sends, the client reads slowly
    Download,
}

// ANCHOR: defaults
/// HTTP/2's own initial window (RFC 9113, section 6.9.2): what each side may
/// send before the peer's SETTINGS arrive, and the smallest window this demo
/// accepts, so that moment cannot blur its numbers.
pub const SPEC_WINDOW: u32 = 65_535;
/// What hyper's HTTP/2 *server* advertises when nobody sets a window
/// (`DEFAULT_STREAM_WINDOW`, `DEFAULT_CONN_WINDOW` in hyper's
/// `src/proto/h2/server.rs`). tonic's `Server` passes `None` unless told
/// otherwise, so this is what a tonic server uses, although tonic's
/// documentation says 65,535.
pub const HYPER_SERVER_WINDOWS: (u32, u32) = (1024 * 1024, 1024 * 1024);
/// The same for hyper's *client* (`src/proto/h2/client.rs`): 2 MiB per
/// stream, 5 MiB per connection. tonic's `Endpoint` passes these through.
pub const HYPER_CLIENT_WINDOWS: (u32, u32) = (2 * 1024 * 1024, 5 * 1024 * 1024);
// ANCHOR_END: defaults

// ANCHOR: buffers
/// tonic's encoder hands hyper a chunk once it holds at least this many bytes
/// of encoded messages (`DEFAULT_YIELD_THRESHOLD` in tonic's `codec`), so one
/// chunk is at most this plus one message.
pub const TONIC_YIELD_BYTES: u64 = 32 * 1024;
/// The largest DATA frame either side accepts (hyper's default
/// SETTINGS_MAX_FRAME_SIZE, 16 KiB). tonic's decoder asks for the next frame
/// only when it does not yet hold a whole message.
pub const MAX_FRAME_BYTES: u64 = 16 * 1024;

/// Bytes the libraries may hold beyond the window, for messages of
/// `message_wire` bytes each (payload plus framing):
///
/// - sender side: the chunk hyper holds while it waits for window, and up to
///   one more chunk that h2 has accepted past the window (hyper hands h2 a
///   whole chunk as soon as *any* window is free);
/// - receiver side: tonic's decoder buffer, at most one frame plus the part of
///   a message it has already read.
///
/// Bytes in the sockets, in TLS and in the receiver's h2 buffers are not in
/// this margin: the sender has already spent window on them.
pub fn library_margin(message_wire: u64) -> u64 {
    let chunk = TONIC_YIELD_BYTES + message_wire;
    2 * chunk + MAX_FRAME_BYTES + message_wire
}
// ANCHOR_END: buffers

/// One run's settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub direction: Direction,
    /// SETTINGS_INITIAL_WINDOW_SIZE, on both ends.
    pub stream_window: u32,
    /// The connection-level window, on both ends.
    pub connection_window: u32,
    /// Payload bytes per message.
    pub message_bytes: u32,
    /// The reader takes one message, then pauses this long.
    pub read_every: Duration,
    /// How long the sender sends.
    pub duration: Duration,
    /// How often a [`Sample`] is taken.
    pub report_every: Duration,
    /// An upload's reader may take this long after the sender stops to read
    /// what is still in flight; past it, the call is cancelled.
    pub drain_limit: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            direction: Direction::Upload,
            stream_window: HYPER_SERVER_WINDOWS.0,
            connection_window: HYPER_SERVER_WINDOWS.1,
            message_bytes: 16 * 1024,
            read_every: Duration::from_millis(10),
            duration: Duration::from_secs(3),
            report_every: Duration::from_millis(250),
            drain_limit: Duration::from_secs(10),
        }
    }
}

impl Config {
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.stream_window >= SPEC_WINDOW && self.connection_window >= SPEC_WINDOW,
            "windows must be at least {SPEC_WINDOW} bytes, HTTP/2's initial window"
        );
        anyhow::ensure!(
            self.stream_window <= i32::MAX as u32 && self.connection_window <= i32::MAX as u32,
            "HTTP/2 windows are at most 2^31-1 bytes"
        );
        anyhow::ensure!(
            self.message_bytes <= crate::service::MAX_PAYLOAD_BYTES,
            "messages carry at most {} bytes",
            crate::service::MAX_PAYLOAD_BYTES
        );
        anyhow::ensure!(
            !self.report_every.is_zero(),
            "the report interval must not be zero"
        );
        Ok(())
    }

    /// The bytes one message occupies in DATA frames.
    pub fn message_wire(&self) -> u64 {
        match self.direction {
            Direction::Upload => wire_bytes(&Chunk {
                seq: u64::MAX, // the longest varint a seq can take
                data: vec![0; self.message_bytes as usize],
            }),
            Direction::Download => wire_bytes(&proto::streaming::v1::Tick {
                remaining: MAX_COUNT,
                payload: vec![0; self.message_bytes as usize],
            }),
        }
    }

    /// What limits a single stream: the smaller of its own window and the
    /// connection's.
    pub fn effective_window(&self) -> u64 {
        self.stream_window.min(self.connection_window).into()
    }

    /// The most bytes that can be in flight: the window plus the libraries'
    /// buffers ([`library_margin`]).
    pub fn bound(&self) -> u64 {
        self.effective_window() + library_margin(self.message_wire())
    }

    /// Where the numbers come from, for the top of the report.
    pub fn describe_windows(&self) -> String {
        let (receiver, defaults) = match self.direction {
            Direction::Upload => ("server (it receives the upload)", HYPER_SERVER_WINDOWS),
            Direction::Download => ("client (it receives the ticks)", HYPER_CLIENT_WINDOWS),
        };
        format!(
            "HTTP/2 windows in force: {} per stream, {} per connection, advertised by the {receiver}.\n\
             Set explicitly on both ends (tonic Server and Endpoint: initial_stream_window_size,\n\
             initial_connection_window_size), adaptive window off. Unset, hyper would advertise\n\
             {} per stream and {} per connection here; tonic's documentation says 65,535.",
            size(self.stream_window.into()),
            size(self.connection_window.into()),
            size(defaults.0.into()),
            size(defaults.1.into()),
        )
    }
}

/// The state of the flow at one moment.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub elapsed: Duration,
    /// The sender's meter: bytes handed to tonic, sends, waits.
    pub sent: MeterSnapshot,
    /// Bytes the reader has taken from tonic.
    pub consumed: u64,
    /// What happened at this moment, if it is not a regular sample.
    pub note: &'static str,
}

impl Sample {
    pub fn in_flight(&self) -> u64 {
        self.sent.bytes.saturating_sub(self.consumed)
    }

    pub const HEADER: &'static str =
        "     t    sent KiB  consumed KiB  in flight KiB  blocked sends  sender's latest send";

    pub fn line(&self) -> String {
        let latest = match self.sent.waiting_for {
            Some(w) => format!("waiting, {} so far", ms(w)),
            None if self.sent.last_wait.is_zero() => "did not wait".to_string(),
            None => format!("waited {}", ms(self.sent.last_wait)),
        };
        let note = if self.note.is_empty() {
            String::new()
        } else {
            format!("  <- {}", self.note)
        };
        format!(
            "{:>6.2}  {:>10.1}  {:>12.1}  {:>13.1}  {:>13}  {latest}{note}",
            self.elapsed.as_secs_f64(),
            self.sent.bytes as f64 / 1024.0,
            self.consumed as f64 / 1024.0,
            self.in_flight() as f64 / 1024.0,
            format!("{} of {}", self.sent.blocked_sends, self.sent.sends),
        )
    }

    pub const CSV_HEADER: &'static str =
        "t_s,sent_bytes,consumed_bytes,in_flight_bytes,sends,blocked_sends,last_wait_ms,waiting_ms";

    pub fn csv(&self) -> String {
        format!(
            "{:.3},{},{},{},{},{},{:.3},{}",
            self.elapsed.as_secs_f64(),
            self.sent.bytes,
            self.consumed,
            self.in_flight(),
            self.sent.sends,
            self.sent.blocked_sends,
            self.sent.last_wait.as_secs_f64() * 1000.0,
            self.sent
                .waiting_for
                .map(|w| format!("{:.3}", w.as_secs_f64() * 1000.0))
                .unwrap_or_default(),
        )
    }
}

/// How the call ended.
#[derive(Clone, Debug)]
pub enum Ending {
    /// Upload: the sender closed its side and the reader took everything.
    Drained {
        after: Duration,
        server_chunks: u64,
        server_bytes: u64,
    },
    /// The client cancelled the call (a download always ends so; an upload
    /// when draining took longer than `drain_limit`). `cleaned_up_after` is
    /// how long the server took to have no open stream and no live task.
    Cancelled { cleaned_up_after: Option<Duration> },
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct Report {
    pub config: Config,
    pub samples: Vec<Sample>,
    /// The sample taken when the sender stopped sending.
    pub at_stop: Sample,
    /// The largest number of bytes in flight at any moment.
    pub peak_in_flight: u64,
    pub ending: Ending,
    /// The server's counters at the very end.
    pub server_open_streams: u64,
    pub server_live_tasks: u64,
}

impl Report {
    /// The last sample, taken when everything was over.
    pub fn last(&self) -> &Sample {
        self.samples.last().unwrap_or(&self.at_stop)
    }

    /// The sender's and the reader's average rates, in bytes per second, over
    /// the second half of the sending time, long after the window filled.
    pub fn late_rates(&self) -> Option<(f64, f64)> {
        let half = self.at_stop.elapsed / 2;
        let from = self.samples.iter().find(|s| s.elapsed >= half)?;
        let span = self
            .at_stop
            .elapsed
            .checked_sub(from.elapsed)?
            .as_secs_f64();
        (span > 0.0).then(|| {
            (
                (self.at_stop.sent.bytes - from.sent.bytes) as f64 / span,
                (self.at_stop.consumed - from.consumed) as f64 / span,
            )
        })
    }

    pub fn summary(&self) -> String {
        let c = &self.config;
        let s = &self.last().sent;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "sender: stopped after {:.2} s; {} messages ({}) handed to tonic; {} of {} sends found the queue full and waited, the longest {}",
            self.at_stop.elapsed.as_secs_f64(),
            s.messages,
            size(s.bytes),
            s.blocked_sends,
            s.sends,
            ms(s.longest_wait),
        );
        if let Some((send, read)) = self.late_rates() {
            let _ = writeln!(
                out,
                "rates over the second half of the sending time: sender {}/s, reader {}/s",
                size(send as u64),
                size(read as u64),
            );
        }
        let window = c.effective_window();
        let margin = library_margin(c.message_wire());
        let _ = writeln!(
            out,
            "peak in flight: {} = window {} + {}",
            kib(self.peak_in_flight),
            kib(window),
            signed_kib(self.peak_in_flight as i64 - window as i64),
        );
        let _ = writeln!(
            out,
            "bound: window + library buffers = {} + {} = {} (messages of {} on the wire)",
            kib(window),
            kib(margin),
            kib(c.bound()),
            kib(c.message_wire()),
        );
        match &self.ending {
            Ending::Drained {
                after,
                server_chunks,
                server_bytes,
            } => {
                let _ = writeln!(
                    out,
                    "end: the sender closed its side; the reader needed {:.2} s more to take the {} still in flight",
                    after.as_secs_f64(),
                    kib(self.at_stop.in_flight()),
                );
                let _ = writeln!(
                    out,
                    "server's UploadSummary: {server_chunks} chunks, {} of data (sent: {} chunks, {} of data)",
                    size(*server_bytes),
                    s.messages,
                    size(s.messages * u64::from(c.message_bytes)),
                );
            }
            Ending::Cancelled { cleaned_up_after } => {
                let _ = writeln!(
                    out,
                    "end: the client cancelled the call (RST_STREAM) with {} in flight, which was discarded",
                    kib(self.at_stop.in_flight()),
                );
                let _ = match cleaned_up_after {
                    Some(t) => writeln!(
                        out,
                        "server: no open stream and no live task {} after the cancel",
                        ms(*t),
                    ),
                    None => writeln!(out, "server: still holding a stream or task at the end!"),
                };
            }
        }
        let _ = write!(
            out,
            "server counters at the end: {} open streams, {} live producer tasks",
            self.server_open_streams, self.server_live_tasks,
        );
        out
    }
}

/// The running maximum of bytes in flight. The maximum is reached just after
/// the sender hands over a message, or just before the reader takes one, so
/// whichever side runs in the client observes it there; samples do too.
#[derive(Default)]
struct Peak(AtomicU64);

impl Peak {
    fn observe(&self, sent: u64, consumed: u64) {
        self.0
            .fetch_max(sent.saturating_sub(consumed), Ordering::Relaxed);
    }
}

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

/// Takes a [`Sample`] every `report_every`, while the demo waits for something.
struct Sampler<'a, F, G> {
    ticker: tokio::time::Interval,
    take: F,
    peak: &'a Peak,
    samples: Vec<Sample>,
    on_sample: &'a mut G,
}

impl<'a, F: Fn() -> Sample, G: FnMut(&Sample)> Sampler<'a, F, G> {
    fn new(
        config: &Config,
        started: Instant,
        take: F,
        peak: &'a Peak,
        on_sample: &'a mut G,
    ) -> Self {
        let mut ticker =
            tokio::time::interval_at(started + config.report_every, config.report_every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        Sampler {
            ticker,
            take,
            peak,
            samples: Vec::new(),
            on_sample,
        }
    }

    /// Samples on every tick until `until` resolves; returns its output.
    async fn until<T>(&mut self, until: impl Future<Output = T>) -> T {
        tokio::pin!(until);
        loop {
            tokio::select! {
                out = &mut until => return out,
                _ = self.ticker.tick() => { self.note(""); }
            }
        }
    }

    fn note(&mut self, note: &'static str) -> Sample {
        let sample = Sample {
            note,
            ..(self.take)()
        };
        self.peak.observe(sample.sent.bytes, sample.consumed);
        (self.on_sample)(&sample);
        self.samples.push(sample);
        if !note.is_empty() {
            // The next regular sample is a full period after this one.
            self.ticker.reset();
        }
        sample
    }
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
    sampler.note("done");
    Ok(Report {
        config: config.clone(),
        samples: sampler.samples,
        at_stop,
        peak_in_flight: peak.0.load(Ordering::Relaxed),
        ending,
        server_open_streams: stats.open_streams(),
        server_live_tasks: stats.live_tasks(),
    })
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
    sampler.note("done");
    Ok(Report {
        config: config.clone(),
        samples: sampler.samples,
        at_stop,
        peak_in_flight: peak.0.load(Ordering::Relaxed),
        ending,
        server_open_streams: stats.open_streams(),
        server_live_tasks: stats.live_tasks(),
    })
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

/// `1234.5 KiB`.
pub fn kib(bytes: u64) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

/// `512 B`, `64.0 KiB` or `5.28 MiB`.
pub fn size(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => kib(bytes),
        _ => format!("{:.2} MiB", bytes as f64 / 1_048_576.0),
    }
}

fn signed_kib(bytes: i64) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

fn ms(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{} µs", d.as_micros())
    } else {
        format!("{:.1} ms", d.as_secs_f64() * 1000.0)
    }
}

/// Parses `65536`, `64KiB`, `64k`, `1MiB` or `1m` (binary units).
pub fn parse_size(text: &str) -> Result<u32, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, unit) = match lower.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => lower.split_at(i),
        None => (lower.as_str(), ""),
    };
    if digits.is_empty() {
        return Err(format!(
            "{text:?} is not a size such as 65536, 64KiB or 1MiB"
        ));
    }
    let factor: u64 = match unit.trim() {
        "" | "b" => 1,
        "k" | "kib" => 1024,
        "m" | "mib" => 1024 * 1024,
        other => return Err(format!("unknown unit {other:?} (use KiB or MiB)")),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size such as 65536, 64KiB or 1MiB"))?;
    u32::try_from(n * factor).map_err(|_| format!("{text} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("64k"), Ok(65536));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert!(parse_size("1GiB").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("8192MiB").is_err());
    }

    #[test]
    fn the_margin_is_two_chunks_a_frame_and_a_message() {
        let message = 16 * 1024 + 10;
        assert_eq!(
            library_margin(message),
            2 * (32 * 1024 + message) + 16 * 1024 + message
        );
        let config = Config::default();
        assert_eq!(
            config.bound(),
            1024 * 1024 + library_margin(config.message_wire())
        );
    }
}
