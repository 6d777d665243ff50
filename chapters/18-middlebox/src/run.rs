//! `middlebox run`: what an idle spell behind a middlebox does to the next
//! call, for each keepalive setting; and what gRFC A8's ping policy does to
//! a client that pings too often.
//!
//! Every cell has its own server, middlebox and client, and all the cells of
//! a part run side by side, so a run takes a few idle spells, not one per
//! cell. The middlebox's idle timeout is an AWS NLB's 350 s scaled down to
//! seconds (`--idle`); every client and server setting is a fraction or a
//! multiple of it, so the cells keep their order whatever the scale.

use std::{path::PathBuf, time::Duration};

use anyhow::bail;
use clap::ValueEnum;
use harness::{Experiment, Folder, experiment::Flags};
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use serde::{Deserialize, Serialize};
use tokio::time::{Instant, sleep, timeout};
use tonic::{Code, transport::Endpoint};

use crate::{
    enforce::PingPolicy,
    middlebox::{Middlebox, OnIdle, Policy},
    server::{self, Options},
};

/// The parts of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum)]
pub enum Part {
    /// Keepalive settings against idle middleboxes
    Idle,
    /// A client that pings too often against gRFC A8's policy
    Pings,
}

/// Idle middleboxes against keepalive settings, and a chatty client against
/// gRFC A8's ping policy. Writes CSV, Markdown and SVG to --out.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The middlebox's idle timeout T (an AWS NLB's 350 s, scaled down);
    /// every keepalive in the grid is a fraction or a multiple of it
    #[arg(long, value_parser = program::duration::parse, default_value = "2s")]
    pub idle: Duration,
    /// The deadline of every call
    #[arg(long, value_parser = program::duration::parse, default_value = "1s")]
    pub deadline: Duration,
    /// Repeats of every cell, side by side [default: 3, quick: 1]
    #[arg(long)]
    pub repeats: Option<u32>,
    /// How long a broken channel is given to work again [default: 5 x --idle]
    #[arg(long, value_parser = program::duration::parse)]
    pub recover_within: Option<Duration>,
    /// The ping part: how often the chatty client pings
    #[arg(long, value_parser = program::duration::parse, default_value = "200ms")]
    pub ping_interval: Duration,
    /// The ping part: the server's minimum time between pings (A8's
    /// `permit_keepalive_time`, 5 min by default, scaled down)
    #[arg(long, value_parser = program::duration::parse, default_value = "1s")]
    pub min_time: Duration,
    /// The ping part: how long each client runs, one call every 6 x
    /// --min-time [default: 18s, quick: 6s]
    #[arg(long, value_parser = program::duration::parse)]
    pub ping_run: Option<Duration>,
    /// Which parts to run, comma-separated
    #[arg(long, value_delimiter = ',', value_enum, default_value = "idle,pings")]
    pub parts: Vec<Part>,
    #[command(flatten)]
    pub flags: Flags,
    /// Folder for the results (an earlier run there is replaced)
    #[arg(long, default_value = "target/experiments/ch18")]
    pub out: PathBuf,
}

/// The checked configuration a run uses, stored with its results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub idle: Duration,
    pub deadline: Duration,
    pub repeats: u32,
    pub recover_within: Duration,
    pub ping_interval: Duration,
    pub min_time: Duration,
    pub ping_run: Duration,
    pub call_every: Duration,
    pub parts: Vec<Part>,
    pub out: PathBuf,
}

impl Experiment for Config {
    fn out(&self) -> &std::path::Path {
        &self.out
    }
}

impl Args {
    pub fn config(&self) -> anyhow::Result<Config> {
        let quick = self.flags.quick;
        let config = Config {
            idle: self.idle,
            deadline: self.deadline,
            repeats: self.repeats.unwrap_or(if quick { 1 } else { 3 }),
            recover_within: self.recover_within.unwrap_or(self.idle * 5),
            ping_interval: self.ping_interval,
            min_time: self.min_time,
            ping_run: self
                .ping_run
                .unwrap_or(Duration::from_secs(if quick { 6 } else { 18 })),
            // Room for four pings of a polite client between two calls: a
            // server's HEADERS and DATA forgive every strike before them.
            call_every: self.min_time * 6,
            parts: self.parts.clone(),
            out: self.out.clone(),
        };
        if config.idle < Duration::from_millis(400) {
            bail!("--idle must be at least 400ms: the grid's keepalives are a quarter of it");
        }
        if config.deadline.is_zero() || config.ping_interval.is_zero() || config.min_time.is_zero()
        {
            bail!("--deadline, --ping-interval and --min-time must be longer than 0ms");
        }
        if config.repeats == 0 || config.parts.is_empty() {
            bail!("--repeats must be at least 1 and --parts needs at least one part");
        }
        if config.recover_within < config.deadline {
            bail!(
                "--recover-within must be at least --deadline: a channel needs one call to show it works"
            );
        }
        Ok(config)
    }
}

// ANCHOR: setups
/// One client (and server) setup of the grid. Keepalive pings wait a
/// quarter of T for their answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Setup {
    /// tonic's defaults: no HTTP/2 keepalive.
    NoKeepalive,
    /// Keepalive every T/2, tonic's default `keep_alive_while_idle(false)`.
    KeepaliveHalf,
    /// Keepalive every T/2, also with no call open.
    KeepaliveHalfWhileIdle,
    /// Keepalive every 2T, also with no call open.
    KeepaliveDoubleWhileIdle,
    /// The server pings every T/2 (hyper's server pings while idle too).
    ServerKeepaliveHalf,
    /// The server closes a connection idle for T/2, or for 2T.
    ServerIdleHalf,
    ServerIdleDouble,
    /// reqwest's pool drops a connection idle for T/2, or for 4T (longer
    /// than the quiet spell, so the next request takes the pooled one).
    RestPoolHalf,
    RestPoolQuadruple,
}
// ANCHOR_END: setups

impl Setup {
    pub const ALL: [Setup; 9] = [
        Setup::NoKeepalive,
        Setup::KeepaliveHalf,
        Setup::KeepaliveHalfWhileIdle,
        Setup::KeepaliveDoubleWhileIdle,
        Setup::ServerKeepaliveHalf,
        Setup::ServerIdleHalf,
        Setup::ServerIdleDouble,
        Setup::RestPoolHalf,
        Setup::RestPoolQuadruple,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Setup::NoKeepalive => "gRPC, no keepalive",
            Setup::KeepaliveHalf => "gRPC, keepalive T/2",
            Setup::KeepaliveHalfWhileIdle => "gRPC, keepalive T/2 while idle",
            Setup::KeepaliveDoubleWhileIdle => "gRPC, keepalive 2T while idle",
            Setup::ServerKeepaliveHalf => "gRPC, server keepalive T/2",
            Setup::ServerIdleHalf => "gRPC, server closes idle T/2",
            Setup::ServerIdleDouble => "gRPC, server closes idle 2T",
            Setup::RestPoolHalf => "REST, pool idle T/2",
            Setup::RestPoolQuadruple => "REST, pool idle 4T",
        }
    }

    fn rest(self) -> bool {
        matches!(self, Setup::RestPoolHalf | Setup::RestPoolQuadruple)
    }
}

/// What the middlebox does: forget an idle flow silently or with a RST, or
/// also swallow every PING (and forget the idle flow silently).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Behaviour {
    Drop,
    Reset,
    EatPings,
}

impl Behaviour {
    pub const ALL: [Behaviour; 3] = [Behaviour::Drop, Behaviour::Reset, Behaviour::EatPings];

    pub fn label(self) -> &'static str {
        match self {
            Behaviour::Drop => "drop",
            Behaviour::Reset => "reset",
            Behaviour::EatPings => "eat PINGs",
        }
    }

    fn policy(self, idle: Duration) -> Policy {
        Policy {
            idle: Some(idle),
            on_idle: if self == Behaviour::Reset {
                OnIdle::Reset
            } else {
                OnIdle::Drop
            },
            eat_pings: self == Behaviour::EatPings,
        }
    }
}

/// One cell's outcome: the first call after an idle spell of 2.5 T.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub setup: String,
    pub middlebox: String,
    pub repeat: u32,
    /// OK, a gRPC code, or for REST the HTTP status or how the request failed.
    pub outcome: String,
    pub ms: f64,
    /// From the start of that call to the end of the first call that
    /// succeeded (it, or one after it); empty if none did in time.
    pub recovered_s: Option<f64>,
    /// Connections the middlebox saw, flows it forgot, RSTs it sent, PINGs
    /// it passed and swallowed.
    pub connections: u64,
    pub expired: u64,
    pub resets: u64,
    pub pings_passed: u64,
    pub pings_eaten: u64,
    pub error: String,
}

/// How long a cell's client stays quiet: long enough for the flow to expire
/// and for a 2T keepalive (and its T/4 timeout) to have fired once.
pub fn idle_spell(config: &Config) -> Duration {
    config.idle * 5 / 2
}

pub async fn run(config: &Config, folder: &Folder) -> anyhow::Result<()> {
    if config.parts.contains(&Part::Idle) {
        let cells = idle_part(config).await?;
        folder.write_csv("cells.csv", &cells)?;
    }
    if config.parts.contains(&Part::Pings) {
        let (calls, connections, pings) = pings_part(config).await?;
        folder.write_csv("ping_calls.csv", &calls)?;
        folder.write_csv("ping_connections.csv", &connections)?;
        folder.write_csv("pings.csv", &pings)?;
    }
    Ok(())
}

async fn idle_part(config: &Config) -> anyhow::Result<Vec<Cell>> {
    // reqwest is built without a crypto provider of its own; the workspace's
    // is ring's (it is never used here: every URL is plain http).
    let _ = std::sync::Arc::unwrap_or_clone(certs::config::provider()).install_default();
    let mut cells = tokio::task::JoinSet::new();
    for repeat in 0..config.repeats {
        for setup in Setup::ALL {
            for middlebox in Behaviour::ALL {
                // An HTTP/1.1 connection has no PING to swallow.
                if setup.rest() && middlebox == Behaviour::EatPings {
                    continue;
                }
                let config = config.clone();
                cells.spawn(async move { cell(&config, setup, middlebox, repeat).await });
            }
        }
    }
    let total = cells.len();
    println!(
        "idle: {total} cells side by side, each quiet for {} behind a middlebox that forgets a flow idle for {}",
        program::duration::Show(idle_spell(config)),
        program::duration::Show(config.idle)
    );
    let mut done = Vec::new();
    while let Some(cell) = cells.join_next().await {
        done.push(cell??);
        if done.len() % 10 == 0 || done.len() == total {
            println!("  {} of {total} cells done", done.len());
        }
    }
    // The order a reader looks them up in, not the order they finished.
    let key = |c: &Cell| (c.repeat, setup_index(&c.setup), box_index(&c.middlebox));
    done.sort_by_key(key);
    Ok(done)
}

fn setup_index(label: &str) -> usize {
    Setup::ALL
        .iter()
        .position(|s| s.label() == label)
        .unwrap_or(usize::MAX)
}

fn box_index(label: &str) -> usize {
    Behaviour::ALL
        .iter()
        .position(|b| b.label() == label)
        .unwrap_or(usize::MAX)
}

/// What one call came to.
struct Call {
    outcome: String,
    error: String,
    took: Duration,
}

impl Call {
    fn ok(&self) -> bool {
        self.outcome == "OK" || self.outcome == "200"
    }
}

async fn cell(
    config: &Config,
    setup: Setup,
    middlebox: Behaviour,
    repeat: u32,
) -> anyhow::Result<Cell> {
    let t = config.idle;
    let options = Options {
        keepalive: (setup == Setup::ServerKeepaliveHalf).then_some((t / 2, t / 4)),
        idle_close: match setup {
            Setup::ServerIdleHalf => Some(t / 2),
            Setup::ServerIdleDouble => Some(t * 2),
            _ => None,
        },
        pings: None,
    };
    let server = if setup.rest() {
        server::rest().await?
    } else {
        server::grpc(options).await?
    };
    let mb = Middlebox::start("127.0.0.1:0".parse()?, server.addr, middlebox.policy(t)).await?;
    let url = format!("http://{}", mb.addr());
    let mut client = Client::new(config, setup, &url)?;
    let first = client.call().await;
    if !first.ok() {
        bail!(
            "{} behind {}: the call before the idle spell failed: {}",
            setup.label(),
            middlebox.label(),
            first.error
        );
    }
    sleep(idle_spell(config)).await;
    let started = Instant::now();
    let after = client.call().await;
    let mut recovered = after.ok().then(|| started.elapsed());
    while recovered.is_none() && started.elapsed() < config.recover_within {
        // A fast failure is tried again soon, not in a tight loop.
        sleep(Duration::from_millis(50)).await;
        if client.call().await.ok() {
            recovered = Some(started.elapsed());
        }
    }
    let counts = mb.counts();
    Ok(Cell {
        setup: setup.label().into(),
        middlebox: middlebox.label().into(),
        repeat,
        outcome: after.outcome,
        ms: after.took.as_secs_f64() * 1e3,
        recovered_s: recovered.map(|d| d.as_secs_f64()),
        connections: counts.flows,
        expired: counts.expired,
        resets: counts.resets,
        pings_passed: counts.pings_passed,
        pings_eaten: counts.pings_eaten,
        error: after.error,
    })
}

/// A cell's client: a tonic channel or a reqwest client, set up as the
/// setup says, calling with the run's deadline.
enum Client {
    Grpc(GreeterClient<tonic::transport::Channel>, Duration),
    Rest(reqwest::Client, String),
}

impl Client {
    fn new(config: &Config, setup: Setup, url: &str) -> anyhow::Result<Client> {
        let t = config.idle;
        if setup.rest() {
            let pool_idle = if setup == Setup::RestPoolHalf {
                t / 2
            } else {
                t * 4
            };
            // ANCHOR: rest_pool
            let client = reqwest::Client::builder()
                .pool_idle_timeout(pool_idle)
                .timeout(config.deadline)
                .build()?;
            // ANCHOR_END: rest_pool
            return Ok(Client::Rest(client, format!("{url}/hello")));
        }
        // ANCHOR: keepalive
        let mut endpoint = Endpoint::from_shared(url.to_string())?.connect_timeout(config.deadline);
        let every = match setup {
            Setup::KeepaliveHalf | Setup::KeepaliveHalfWhileIdle => Some(t / 2),
            Setup::KeepaliveDoubleWhileIdle => Some(t * 2),
            _ => None,
        };
        if let Some(every) = every {
            endpoint = endpoint
                .http2_keep_alive_interval(every)
                .keep_alive_timeout(t / 4)
                .keep_alive_while_idle(setup != Setup::KeepaliveHalf);
        }
        // ANCHOR_END: keepalive
        Ok(Client::Grpc(
            GreeterClient::new(endpoint.connect_lazy()),
            config.deadline,
        ))
    }

    async fn call(&mut self) -> Call {
        let started = Instant::now();
        let (outcome, error) = match self {
            Client::Grpc(client, deadline) => grpc_call(client, *deadline).await,
            Client::Rest(client, url) => match client.get(url.as_str()).send().await {
                Ok(response) => (response.status().as_u16().to_string(), String::new()),
                Err(error) => (rest_failure(&error).into(), chain(&error)),
            },
        };
        Call {
            outcome,
            error,
            took: started.elapsed(),
        }
    }
}

/// A call with a deadline, sent in `grpc-timeout`. tonic's client ends the
/// call when it passes, and reports CANCELLED ("Timeout expired"); a gRPC
/// client reports a deadline that passed as DEADLINE_EXCEEDED, and so does
/// this table (chapter 6 translates it the same way). The timer around it
/// is only a backstop.
pub async fn grpc_call(
    client: &mut GreeterClient<tonic::transport::Channel>,
    deadline: Duration,
) -> (String, String) {
    let mut request = tonic::Request::new(HelloRequest {
        name: "Ada".into(),
        delay_ms: 0,
    });
    request.set_timeout(deadline);
    let started = Instant::now();
    match timeout(deadline * 2, client.say_hello(request)).await {
        Ok(Ok(_)) => ("OK".into(), String::new()),
        Ok(Err(status)) if status.code() == Code::Cancelled && started.elapsed() >= deadline => {
            (code_name(Code::DeadlineExceeded).into(), message(&status))
        }
        Ok(Err(status)) => (code_name(status.code()).into(), message(&status)),
        Err(_) => (
            code_name(Code::DeadlineExceeded).into(),
            "tonic did not end the call at its deadline".into(),
        ),
    }
}

/// The code's name as the specification spells it: `UNAVAILABLE`.
pub fn code_name(code: Code) -> &'static str {
    proto::status::info(code).name
}

/// A status's message and its sources (where tonic keeps the cause).
fn message(status: &tonic::Status) -> String {
    match std::error::Error::source(status) {
        Some(source) => format!("{}: {}", status.message(), chain(source)),
        None => status.message().to_string(),
    }
}

/// An error and its sources, `: `-separated (reqwest's own message alone
/// says only "error sending request").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

/// How a REST request failed, in a word a table can hold.
fn rest_failure(error: &reqwest::Error) -> &'static str {
    if error.is_timeout() {
        return "timeout";
    }
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionReset => "reset",
                std::io::ErrorKind::UnexpectedEof => "closed",
                _ => "I/O error",
            };
        }
        source = e.source();
    }
    if error.is_connect() {
        "connect"
    } else {
        "error"
    }
}

/// A client of the ping part: how often it pings, and whether with no call open.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pinger {
    pub name: &'static str,
    /// Its interval: --ping-interval, or this multiple of --min-time, so the
    /// rows keep their meaning at any scale.
    pub interval_of_min_time: Option<f64>,
    pub while_idle: bool,
    pub permit_without_calls: bool,
}

/// The ping part's rows: a client that pings faster than the server allows;
/// one that pings less often than it allows; and the same polite client
/// against a server that permits no ping while no call is open (A8's
/// default: such a ping counts as a strike unless two hours have passed).
pub const PINGERS: [Pinger; 3] = [
    Pinger {
        name: "chatty: --ping-interval, while idle",
        interval_of_min_time: None,
        while_idle: true,
        permit_without_calls: true,
    },
    Pinger {
        name: "polite: 1.25 x --min-time, while idle",
        interval_of_min_time: Some(1.25),
        while_idle: true,
        permit_without_calls: true,
    },
    Pinger {
        name: "polite, idle pings not permitted",
        interval_of_min_time: Some(1.25),
        while_idle: true,
        permit_without_calls: false,
    },
];

/// One call of the ping part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PingCall {
    pub client: String,
    pub t_s: f64,
    pub outcome: String,
    pub ms: f64,
    pub error: String,
}

/// One connection the ping part's server saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PingConnection {
    pub client: String,
    pub connection: u64,
    pub pings: usize,
    pub strikes: u32,
    pub first_ping_s: Option<f64>,
    pub goaway_s: Option<f64>,
    /// The median time between its pings, in ms.
    pub median_gap_ms: Option<f64>,
}

/// A PING the ping part's server received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PingSeen {
    pub client: String,
    pub connection: u64,
    pub t_s: f64,
}

type PingRecords = (Vec<PingCall>, Vec<PingConnection>, Vec<PingSeen>);

async fn pings_part(config: &Config) -> anyhow::Result<PingRecords> {
    println!(
        "pings: {} clients for {} each, a call every {}; the server allows a ping every {}",
        PINGERS.len(),
        program::duration::Show(config.ping_run),
        program::duration::Show(config.call_every),
        program::duration::Show(config.min_time)
    );
    let (a, b, c) = tokio::join!(
        pinger_run(config, PINGERS[0]),
        pinger_run(config, PINGERS[1]),
        pinger_run(config, PINGERS[2]),
    );
    let mut records = PingRecords::default();
    for run in [a, b, c] {
        let (calls, connections, pings) = run?;
        records.0.extend(calls);
        records.1.extend(connections);
        records.2.extend(pings);
    }
    Ok(records)
}

async fn pinger_run(config: &Config, pinger: Pinger) -> anyhow::Result<PingRecords> {
    let policy = PingPolicy {
        min_time: config.min_time,
        permit_without_calls: pinger.permit_without_calls,
        ..PingPolicy::A8_DEFAULT
    };
    let server = server::grpc(Options {
        pings: Some(policy),
        ..Options::default()
    })
    .await?;
    let interval = pinger
        .interval_of_min_time
        .map_or(config.ping_interval, |n| config.min_time.mul_f64(n));
    let endpoint = Endpoint::from_shared(format!("http://{}", server.addr))?
        .connect_timeout(config.deadline)
        .http2_keep_alive_interval(interval)
        .keep_alive_timeout(config.deadline)
        .keep_alive_while_idle(pinger.while_idle);
    let mut client = GreeterClient::new(endpoint.connect_lazy());
    let started = Instant::now();
    let mut calls = Vec::new();
    let mut next = started;
    while next.duration_since(started) < config.ping_run {
        tokio::time::sleep_until(next).await;
        let t = started.elapsed();
        let (outcome, error) = grpc_call(&mut client, config.deadline).await;
        calls.push(PingCall {
            client: pinger.name.into(),
            t_s: t.as_secs_f64(),
            outcome,
            ms: (started.elapsed() - t).as_secs_f64() * 1e3,
            error,
        });
        next += config.call_every;
    }
    // The last call's connection gets the same time to be cut off.
    tokio::time::sleep_until(next).await;
    let log = server.log.connections();
    let pings = log
        .iter()
        .flat_map(|c| {
            c.pings_s.iter().map(|&t_s| PingSeen {
                client: pinger.name.into(),
                connection: c.connection,
                t_s,
            })
        })
        .collect();
    let connections = log
        .into_iter()
        .map(|c| {
            let mut gaps: Vec<f64> = c.pings_s.windows(2).map(|w| (w[1] - w[0]) * 1e3).collect();
            gaps.sort_by(f64::total_cmp);
            PingConnection {
                client: pinger.name.into(),
                connection: c.connection,
                pings: c.pings_s.len(),
                strikes: c.strikes,
                first_ping_s: c.pings_s.first().copied(),
                goaway_s: c.goaway_s,
                median_gap_ms: gaps.get(gaps.len() / 2).copied(),
            }
        })
        .collect();
    Ok((calls, connections, pings))
}
