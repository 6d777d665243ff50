//! `examples/latency_compare`: gRPC and REST latency, measured so that the
//! comparison means something.
//!
//! Every arm makes the same greeting. The arms run interleaved, call by call
//! (A B C A B C ...), so that whatever drifts during the run (CPU frequency,
//! another program, the page cache) lands on every arm alike. Warm-up calls are
//! made the same way and thrown away. Every sample is kept, for `--csv`.
//!
//! The arms change one thing at a time:
//! - reused: one gRPC channel; one `reqwest::Client` over HTTP/2, and one over
//!   HTTP/1.1 (the protocol, with the framework held still);
//! - `--fresh-connections`: a new TCP + TLS connection per call made with one
//!   shared TLS configuration, with session resumption on and then off; the same
//!   through reqwest with its pool turned off; and the naive client that rebuilds
//!   everything (reads the CA file, builds a TLS configuration and a client) for
//!   every call;
//! - `--floor`: a raw TCP ping-pong of the request's size on loopback, the least
//!   a request and its answer can cost on this machine.

use std::{
    fmt::Write as _,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use rustls::{ClientConfig, HandshakeKind, client::Resumption, pki_types::ServerName};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use tokio_rustls::{TlsConnector, client::TlsStream};
use tonic::transport::Channel;

/// No call in this program should come near this; it is here so that a hung
/// server ends the run with an error instead of hanging it.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The name every arm greets; with `delay_ms` 0 the server answers at once.
pub const NAME: &str = "Ada";

/// Compares gRPC and REST latency, fairly: arms interleaved call by call,
/// warm-up excluded, percentiles, every sample kept.
#[derive(Parser, Debug, Clone)]
#[command(name = "latency_compare", version)]
pub struct Args {
    /// Measured calls per arm (per round), after the warm-up
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub calls: u32,
    /// Warm-up calls per arm (per round), made the same way and not counted
    #[arg(long, default_value_t = 20)]
    pub warmup: u32,
    /// Open a new connection for every call (fair, resumed vs full handshake,
    /// and the naive client that rebuilds everything) instead of reusing one
    #[arg(long)]
    pub fresh_connections: bool,
    /// Run this many rounds and show how much p50 moves between them
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Write every measured sample to FILE as CSV: arm,round,i,micros
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Start both servers in this process, on free ports, instead of calling a
    /// running stack
    #[arg(long)]
    pub spawn: bool,
    /// Also measure a raw TCP ping-pong of the same size on loopback (an echo
    /// listener in this process), and report every arm as a multiple of it
    #[arg(long)]
    pub floor: bool,
    /// The gRPC server (ignored with --spawn)
    #[arg(long, default_value = grpc_client::cli::DEFAULT_TARGET)]
    pub grpc: String,
    /// The REST server (ignored with --spawn)
    #[arg(long, default_value = "https://localhost:8443")]
    pub rest: String,
    /// The CA that signed the servers' certificates [default: certs/ca.pem]
    #[arg(long)]
    pub ca: Option<PathBuf>,
}

// ANCHOR: summary
/// What a list of latencies says, in microseconds. Percentiles are by the
/// nearest-rank rule: p99 of 200 samples is the 198th smallest, a sample that
/// really happened, never an interpolation between two.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub p50: u64,
    pub p95: u64,
    pub p99: u64,
    pub mean: f64,
    pub max: u64,
}

impl Summary {
    pub fn of(samples: &[u64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let n = sorted.len();
        let rank = |p: f64| sorted[((p / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1];
        Some(Summary {
            n,
            p50: rank(50.0),
            p95: rank(95.0),
            p99: rank(99.0),
            mean: sorted.iter().sum::<u64>() as f64 / n as f64,
            max: sorted[n - 1],
        })
    }
}
// ANCHOR_END: summary

// ANCHOR: schedule
/// One step of a round: call number `i` of arm `arm`, counted or warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub arm: usize,
    pub i: u32,
    pub warmup: bool,
}

/// The order of one round: every arm's call 0, then every arm's call 1, ...,
/// warm-up calls first. Interleaving call by call means a slow patch of the
/// machine hits every arm, instead of whichever arm happened to run then.
pub fn schedule(arms: usize, warmup: u32, calls: u32) -> impl Iterator<Item = Step> {
    (0..warmup + calls).flat_map(move |k| {
        (0..arms).map(move |arm| Step {
            arm,
            i: k.saturating_sub(warmup),
            warmup: k < warmup,
        })
    })
}
// ANCHOR_END: schedule

/// Counts how the TLS handshakes of an arm went.
#[derive(Debug, Default)]
pub struct Handshakes {
    pub full: AtomicU64,
    pub resumed: AtomicU64,
}

impl Handshakes {
    fn record(&self, kind: Option<HandshakeKind>) {
        match kind {
            Some(HandshakeKind::Resumed) => self.resumed.fetch_add(1, Ordering::Relaxed),
            _ => self.full.fetch_add(1, Ordering::Relaxed),
        };
    }
    pub fn counts(&self) -> (u64, u64) {
        (
            self.full.load(Ordering::Relaxed),
            self.resumed.load(Ordering::Relaxed),
        )
    }
}

/// Which HTTP a fresh connection speaks, and so what ALPN it offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Http {
    H2,
    H1,
}

/// What a call is made with. The reused callers are cheap to clone (a clone
/// shares the connection), so `choose_deadline` hands them to its workers.
#[derive(Clone)]
pub enum Caller {
    /// SayHello on one tonic channel.
    Grpc(GreeterClient<Channel>),
    /// POST /v1/greetings on one reqwest client (and so its connection pool).
    Rest {
        client: reqwest::Client,
        url: String,
    },
    /// A new TCP + TLS connection per call, from one shared TLS configuration,
    /// driven with hyper; `grpc` picks the gRPC request over the JSON one.
    Fresh {
        grpc: bool,
        http: Http,
        addr: SocketAddr,
        tls: TlsConnector,
        handshakes: Arc<Handshakes>,
    },
    /// Everything rebuilt for every call, as a naive client does: the CA file
    /// read, a TLS configuration and a client (or channel) built, then one call.
    NaiveGrpc {
        url: String,
        ca: PathBuf,
    },
    NaiveRest {
        url: String,
        ca: PathBuf,
    },
    /// A persistent plain TCP connection to an echo listener: `len` bytes out,
    /// the same back.
    Floor {
        stream: Arc<tokio::sync::Mutex<TcpStream>>,
        len: usize,
    },
}

/// The JSON body every REST arm sends.
pub fn rest_body() -> Vec<u8> {
    serde_json::to_vec(&rest_server::api::GreetingRequest {
        name: NAME.into(),
        delay_ms: 0,
    })
    .expect("a greeting always serialises")
}

fn hello_request() -> HelloRequest {
    HelloRequest {
        name: NAME.into(),
        delay_ms: 0,
    }
}

impl Caller {
    /// SayHello on a channel made (and connected) once.
    pub async fn grpc(url: &str, ca: &Path) -> anyhow::Result<Caller> {
        let endpoint = grpc_client::endpoint(&grpc_client::Target {
            url: url.into(),
            ca: ca.into(),
            identity: None,
        })?;
        let channel = endpoint.connect().await.with_context(|| {
            format!("cannot connect to {url}: is the stack running (`cargo run`)? Or pass --spawn")
        })?;
        Ok(Caller::Grpc(GreeterClient::new(channel)))
    }

    /// POST on one reqwest client: HTTP/2 or, with `http1`, HTTP/1.1 only.
    pub fn rest(base: &str, ca: &Path, http1: bool) -> anyhow::Result<Caller> {
        Ok(Caller::Rest {
            client: grpc_client::rest::client(ca, http1)?,
            url: format!("{base}/v1/greetings"),
        })
    }

    /// Makes one call and checks its answer; returns how long it took.
    pub async fn call(&self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        tokio::time::timeout(CALL_TIMEOUT, self.call_once())
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {CALL_TIMEOUT:?}"))??;
        Ok(started.elapsed())
    }

    async fn call_once(&self) -> anyhow::Result<()> {
        match self {
            Caller::Grpc(client) => {
                let mut request = tonic::Request::new(hello_request());
                request.set_timeout(CALL_TIMEOUT);
                client.clone().say_hello(request).await?;
            }
            Caller::Rest { client, url } => post_json(client, url).await?,
            Caller::Fresh {
                grpc,
                http,
                addr,
                tls,
                handshakes,
            } => fresh_call(*grpc, *http, *addr, tls, handshakes).await?,
            Caller::NaiveGrpc { url, ca } => {
                // What `grpc-client --fresh-channel` does: a new endpoint
                // (which reads the CA file) and a new connection, every call.
                let Caller::Grpc(client) = Caller::grpc(url, ca).await? else {
                    unreachable!()
                };
                client.clone().say_hello(hello_request()).await?;
            }
            Caller::NaiveRest { url, ca } => {
                let client = grpc_client::rest::client(ca, false)?;
                post_json(&client, url).await?;
            }
            Caller::Floor { stream, len } => {
                let mut stream = stream.lock().await;
                let out = vec![b'x'; *len];
                stream.write_all(&out).await?;
                let mut back = vec![0; *len];
                stream.read_exact(&mut back).await?;
            }
        }
        Ok(())
    }
}

async fn post_json(client: &reqwest::Client, url: &str) -> anyhow::Result<()> {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(rest_body())
        .timeout(CALL_TIMEOUT)
        .send()
        .await
        .with_context(|| format!("POST {url}"))?;
    let status = response.status();
    // Read the body to the end, as a real client must before the connection
    // can carry the next request.
    let body = response.bytes().await?;
    if !status.is_success() {
        bail!(
            "POST {url} answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    Ok(())
}

// ANCHOR: fresh_tls
/// A TLS configuration for fresh connections. With `resume`, rustls keeps the
/// session tickets servers send in memory and offers one on the next connection
/// to the same name: a resumed handshake skips the certificate chain and its
/// signature. `Resumption::disabled()` makes every handshake a full one.
pub fn fresh_tls(ca: &Path, http: Http, resume: bool) -> anyhow::Result<TlsConnector> {
    let mut config: ClientConfig = certs::client_config(ca, None)?;
    config.resumption = if resume {
        Resumption::in_memory_sessions(256)
    } else {
        Resumption::disabled()
    };
    config.alpn_protocols = match http {
        Http::H2 => vec![b"h2".to_vec()],
        Http::H1 => vec![b"http/1.1".to_vec()],
    };
    Ok(TlsConnector::from(Arc::new(config)))
}
// ANCHOR_END: fresh_tls

/// TCP connect and TLS handshake, noting whether the handshake was resumed.
pub async fn connect_tls(
    addr: SocketAddr,
    tls: &TlsConnector,
    handshakes: &Handshakes,
) -> anyhow::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    tcp.set_nodelay(true)?;
    let stream = tls
        .connect(ServerName::try_from("localhost")?, tcp)
        .await
        .context("TLS handshake")?;
    handshakes.record(stream.get_ref().1.handshake_kind());
    Ok(stream)
}

/// One call on a connection of its own, which is closed afterwards.
async fn fresh_call(
    grpc: bool,
    http: Http,
    addr: SocketAddr,
    tls: &TlsConnector,
    handshakes: &Handshakes,
) -> anyhow::Result<()> {
    let io = TokioIo::new(connect_tls(addr, tls, handshakes).await?);
    let authority = format!("localhost:{}", addr.port());
    let request = if grpc {
        // The bytes tonic sends: a 5-byte gRPC frame header, then the message.
        let message = hello_request().encode_to_vec();
        let mut framed = vec![0u8];
        framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
        framed.extend_from_slice(&message);
        http::Request::post(format!("https://{authority}/greeter.v1.Greeter/SayHello"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Full::new(Bytes::from(framed)))?
    } else {
        let uri = match http {
            Http::H2 => format!("https://{authority}/v1/greetings"),
            Http::H1 => "/v1/greetings".to_string(),
        };
        http::Request::post(uri)
            .header("host", &authority)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(rest_body())))?
    };
    let response = match http {
        Http::H2 => {
            let (mut send, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
            tokio::spawn(connection);
            send.send_request(request).await?
        }
        Http::H1 => {
            let (mut send, connection) = hyper::client::conn::http1::handshake(io).await?;
            tokio::spawn(connection);
            send.send_request(request).await?
        }
    };
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await?;
    if !status.is_success() {
        bail!("server answered {status}");
    }
    if grpc {
        // grpc-status is in the trailers, or in the headers of a
        // trailers-only answer; anything but 0 is a failed call.
        let grpc_status = body
            .trailers()
            .and_then(|t| t.get("grpc-status"))
            .or_else(|| headers.get("grpc-status"))
            .and_then(|v| v.to_str().ok())
            .unwrap_or("missing")
            .to_string();
        if grpc_status != "0" {
            bail!("gRPC call failed: grpc-status {grpc_status}");
        }
    }
    Ok(())
}

/// A loopback echo listener for the floor arm: reads `len` bytes, writes them back.
pub async fn echo_listener(len: usize) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = vec![0; len];
                while stream.read_exact(&mut buf).await.is_ok() {
                    if stream.write_all(&buf).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// One measured arm: its label and what calls it.
pub struct Arm {
    pub label: String,
    pub caller: Caller,
}

/// Where the servers are.
pub struct Servers {
    pub grpc_url: String,
    pub rest_url: String,
    pub grpc_addr: SocketAddr,
    pub rest_addr: SocketAddr,
    pub ca: PathBuf,
}

fn addr_of(url: &str) -> anyhow::Result<SocketAddr> {
    let uri: http::Uri = url
        .parse()
        .with_context(|| format!("`{url}` is not a URL"))?;
    let host = uri.host().unwrap_or("localhost");
    let host = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    let port = uri.port_u16().unwrap_or(443);
    format!("{host}:{port}")
        .parse()
        .with_context(|| format!("`{url}`: this program dials 127.0.0.1 or an IP address"))
}

impl Servers {
    pub fn new(grpc_url: String, rest_url: String, ca: PathBuf) -> anyhow::Result<Servers> {
        Ok(Servers {
            grpc_addr: addr_of(&grpc_url)?,
            rest_addr: addr_of(&rest_url)?,
            grpc_url,
            rest_url,
            ca,
        })
    }

    /// Servers on `stack`'s (probably ephemeral) ports, by the name `localhost`.
    pub fn of_stack(stack: &stack::Stack, ca: PathBuf) -> anyhow::Result<Servers> {
        Servers::new(
            format!("https://localhost:{}", stack.grpc_addr.port()),
            format!("https://localhost:{}", stack.rest_addr.port()),
            ca,
        )
    }

    /// Starts the stack in this process on free ports, with the PKI in
    /// `certs_dir` (`--spawn`); the stack serves as long as it is kept.
    pub async fn spawn_stack(
        certs_dir: &Path,
        ca: PathBuf,
    ) -> anyhow::Result<(stack::Stack, Servers)> {
        let stack = stack::Stack::start(&stack::Args {
            grpc_addr: "127.0.0.1:0".parse()?,
            rest_addr: "127.0.0.1:0".parse()?,
            tls: certs::TlsArgs::in_dir(certs_dir),
            mtls: false,
            ready_file: None,
        })
        .await?;
        let servers = Servers::of_stack(&stack, ca)?;
        Ok((stack, servers))
    }

    /// A fresh-connection caller: gRPC or REST, HTTP/2 or HTTP/1.1, resumption on or off.
    pub fn fresh(&self, grpc: bool, http: Http, resume: bool) -> anyhow::Result<Caller> {
        Ok(Caller::Fresh {
            grpc,
            http,
            addr: if grpc { self.grpc_addr } else { self.rest_addr },
            tls: fresh_tls(&self.ca, http, resume)?,
            handshakes: Arc::default(),
        })
    }
}

/// The arms of a run, in the order they are interleaved.
pub async fn arms(servers: &Servers, fresh: bool) -> anyhow::Result<Vec<Arm>> {
    let s = servers;
    let arm = |label: &str, caller| Arm {
        label: label.into(),
        caller,
    };
    Ok(if !fresh {
        vec![
            arm(
                "gRPC SayHello, one channel (h2)",
                Caller::grpc(&s.grpc_url, &s.ca).await?,
            ),
            arm(
                "REST POST, one client (h2)",
                Caller::rest(&s.rest_url, &s.ca, false)?,
            ),
            arm(
                "REST POST, one client (http/1.1)",
                Caller::rest(&s.rest_url, &s.ca, true)?,
            ),
        ]
    } else {
        // The fair arms share one TLS configuration each; `resumed` and `full`
        // differ only in rustls's session store.
        let mut no_pool_tls = certs::client_config(&s.ca, None)?;
        no_pool_tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let no_pool = reqwest::Client::builder()
            .tls_backend_preconfigured(no_pool_tls)
            .no_proxy()
            .pool_max_idle_per_host(0)
            .build()?;
        vec![
            arm(
                "gRPC fresh conn, resumed TLS",
                s.fresh(true, Http::H2, true)?,
            ),
            arm("gRPC fresh conn, full TLS", s.fresh(true, Http::H2, false)?),
            arm(
                "gRPC naive (new endpoint+channel)",
                Caller::NaiveGrpc {
                    url: s.grpc_url.clone(),
                    ca: s.ca.clone(),
                },
            ),
            arm(
                "REST fresh conn, resumed TLS (h2)",
                s.fresh(false, Http::H2, true)?,
            ),
            arm(
                "REST fresh conn, full TLS (h2)",
                s.fresh(false, Http::H2, false)?,
            ),
            arm(
                "REST fresh conn, resumed (http/1.1)",
                s.fresh(false, Http::H1, true)?,
            ),
            arm(
                "REST fresh conn, full TLS (http/1.1)",
                s.fresh(false, Http::H1, false)?,
            ),
            arm(
                "REST one reqwest client, no pool",
                Caller::Rest {
                    client: no_pool,
                    url: format!("{}/v1/greetings", s.rest_url),
                },
            ),
            arm(
                "REST naive (new client per call)",
                Caller::NaiveRest {
                    url: format!("{}/v1/greetings", s.rest_url),
                    ca: s.ca.clone(),
                },
            ),
        ]
    })
}

/// Every measured sample of a run: `samples[arm][round]` in microseconds.
pub type Samples = Vec<Vec<Vec<u64>>>;

/// Runs `rounds` rounds of the interleaved schedule. `progress` is called
/// every couple of seconds with (round, calls done per arm, calls per arm).
pub async fn measure(
    arms: &[Arm],
    warmup: u32,
    calls: u32,
    rounds: u32,
    mut progress: impl FnMut(u32, u32, u32),
) -> anyhow::Result<Samples> {
    let mut samples: Samples =
        vec![vec![Vec::with_capacity(calls as usize); rounds as usize]; arms.len()];
    let mut last_report = Instant::now();
    for round in 0..rounds {
        for (k, step) in schedule(arms.len(), warmup, calls).enumerate() {
            let arm = &arms[step.arm];
            let took = arm
                .caller
                .call()
                .await
                .with_context(|| format!("arm `{}`", arm.label))?;
            if !step.warmup {
                samples[step.arm][round as usize].push(took.as_micros() as u64);
            }
            if last_report.elapsed() >= Duration::from_secs(2) {
                last_report = Instant::now();
                progress(round + 1, (k / arms.len()) as u32, warmup + calls);
            }
        }
    }
    Ok(samples)
}

/// Every sample as CSV, one line each: which arm, which round (from 1), which
/// call of the round (from 0, warm-up not counted) and how long it took.
pub fn write_csv(
    out: &mut impl std::io::Write,
    arms: &[Arm],
    samples: &Samples,
) -> std::io::Result<()> {
    writeln!(out, "arm,round,i,micros")?;
    for (arm, rounds) in arms.iter().zip(samples) {
        for (round, values) in rounds.iter().enumerate() {
            for (i, micros) in values.iter().enumerate() {
                writeln!(out, "\"{}\",{},{i},{micros}", arm.label, round + 1)?;
            }
        }
    }
    Ok(())
}

fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

/// One arm's line, like the seed's, plus p99 and (with a floor) the multiple.
pub fn format_line(label: &str, s: &Summary, floor_p50: Option<u64>) -> String {
    let mut line = format!(
        "{label:<38} n={:<5} p50={:>7.3}ms  p95={:>7.3}ms  p99={:>7.3}ms  mean={:>7.3}ms  max={:>7.3}ms",
        s.n,
        ms(s.p50),
        ms(s.p95),
        ms(s.p99),
        s.mean / 1000.0,
        ms(s.max)
    );
    if let Some(floor) = floor_p50.filter(|f| *f > 0) {
        let _ = write!(line, "  p50 = {:.1}x floor", s.p50 as f64 / floor as f64);
    }
    line
}

/// The program: set up the arms, measure, print, write the CSV.
pub async fn run(args: Args) -> ExitCode {
    program::exit_code(run_inner(args).await)
}

async fn run_inner(args: Args) -> anyhow::Result<()> {
    let ca = args.ca.clone().unwrap_or_else(program::default_ca);
    // Keep the in-process stack alive for the whole run.
    let (_stack, servers, placement) = if args.spawn {
        let (stack, servers) = Servers::spawn_stack(&program::certs_dir(), ca).await?;
        let placement = format!(
            "client and servers in this one process (--spawn: gRPC :{}, REST :{}), sharing one Tokio runtime",
            stack.grpc_addr.port(),
            stack.rest_addr.port()
        );
        (Some(stack), servers, placement)
    } else {
        let servers = Servers::new(args.grpc.clone(), args.rest.clone(), ca)?;
        let placement = format!(
            "client in this process, servers in another ({} and {})",
            servers.grpc_url, servers.rest_url
        );
        (None, servers, placement)
    };
    let mut arms = arms(&servers, args.fresh_connections).await?;
    let payload = rest_body().len();
    if args.floor {
        let addr = echo_listener(payload).await?;
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        arms.push(Arm {
            label: format!("TCP ping-pong {payload} B (floor)"),
            caller: Caller::Floor {
                stream: Arc::new(tokio::sync::Mutex::new(stream)),
                len: payload,
            },
        });
    }

    println!(
        "{placement}; CPUs allowed: {} (taskset narrows this)",
        program::proc::cpus_allowed()
    );
    let how = if args.fresh_connections {
        "a new connection per call"
    } else {
        "one reused connection (or pool) per arm"
    };
    println!(
        "{} sequential calls per arm after {} warm-up calls, {how}, arms interleaved call by call{}:",
        args.calls,
        args.warmup,
        if args.repeat > 1 {
            format!(", {} rounds", args.repeat)
        } else {
            String::new()
        }
    );
    println!();

    let samples = measure(
        &arms,
        args.warmup,
        args.calls,
        args.repeat,
        |round, done, of| {
            eprintln!(
                "  ... round {round}/{}: {done}/{of} calls per arm",
                args.repeat
            )
        },
    )
    .await?;

    let all = |arm: usize| samples[arm].concat();
    let floor_p50 = args
        .floor
        .then(|| Summary::of(&all(arms.len() - 1)).map(|s| s.p50))
        .flatten();
    for (a, arm) in arms.iter().enumerate() {
        let summary = Summary::of(&all(a)).expect("at least one call per arm");
        let is_floor = args.floor && a == arms.len() - 1;
        println!(
            "{}",
            format_line(&arm.label, &summary, floor_p50.filter(|_| !is_floor))
        );
    }
    if args.repeat > 1 {
        println!();
        println!("p50 of each round (ms), and how far apart the rounds were:");
        for (a, arm) in arms.iter().enumerate() {
            let p50s: Vec<u64> = samples[a]
                .iter()
                .filter_map(|r| Summary::of(r).map(|s| s.p50))
                .collect();
            let (lo, hi) = (
                p50s.iter().min().copied().unwrap_or(0),
                p50s.iter().max().copied().unwrap_or(0),
            );
            let list: Vec<String> = p50s.iter().map(|p| format!("{:.3}", ms(*p))).collect();
            println!(
                "{:<38} {}  spread {:.0}%",
                arm.label,
                list.join(" "),
                if lo > 0 {
                    (hi - lo) as f64 / lo as f64 * 100.0
                } else {
                    0.0
                }
            );
        }
    }
    let resumable: Vec<_> = arms
        .iter()
        .filter_map(|arm| match &arm.caller {
            Caller::Fresh { handshakes, .. } => Some((arm, handshakes.counts())),
            _ => None,
        })
        .collect();
    if !resumable.is_empty() {
        println!();
        println!("TLS handshakes, warm-up included (rustls handshake_kind):");
        for (arm, (full, resumed)) in resumable {
            println!("{:<38} {full} full, {resumed} resumed", arm.label);
        }
    }
    if let Some(path) = &args.csv {
        let mut file = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        );
        write_csv(&mut file, &arms, &samples)?;
        std::io::Write::flush(&mut file)?;
        println!();
        println!("every sample written to {}", path.display());
    }
    Ok(())
}
