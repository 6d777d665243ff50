//! `cargo run -p fleet -- ...`: a replica and a health watcher by hand, and
//! the experiment.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use anyhow::Context;
use clap::{Parser, Subcommand};
use tokio::time::Instant;
use tokio_stream::StreamExt;
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

use crate::{
    client::endpoint,
    experiment,
    replica::{Latency, Replica, SERVICE, Spec},
};

/// More than one server: replicas that drain or die, connection age,
/// balancing around a slow replica, and hedging a latency tail.
#[derive(Parser, Debug)]
#[command(name = "fleet", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve one replica until Ctrl-C, then drain it: NOT_SERVING, the
    /// grace, GOAWAY, and a wait for calls in flight
    Replica(ReplicaArgs),
    /// Watch a replica's health (grpc.health.v1 Watch) and print each
    /// change, until it says it is leaving
    Watch(WatchArgs),
    /// The chapter's experiment: rolling restart, connection age, a slow
    /// replica, a latency tail
    Run(Box<experiment::Args>),
}

#[derive(clap::Args, Debug, Clone)]
pub struct ReplicaArgs {
    /// Its name, sent back with every answer
    #[arg(long, default_value = "a")]
    pub name: String,
    #[arg(long, default_value = "127.0.0.2:50051")]
    pub addr: SocketAddr,
    /// Extra time on every call
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "0ms")]
    pub slower_by: Duration,
    /// A latency tail instead (10% >= 20 ms, 5% >= 50 ms, 1% 100 ms)
    #[arg(long, conflicts_with = "slower_by")]
    pub tail: bool,
    /// Send GOAWAY on each connection this old
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true)]
    pub max_age: Option<Duration>,
    /// tonic's max_connection_age_grace (in tonic 0.14.9: the connection is
    /// closed outright at age + grace, with no GOAWAY)
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, requires = "max_age")]
    pub age_grace: Option<Duration>,
    /// How long it says NOT_SERVING before GOAWAY, on Ctrl-C
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "2s")]
    pub grace: Duration,
    /// The development PKI (made there if missing)
    #[arg(long, env = "CERTS_DIR", value_name = "DIR")]
    pub certs_dir: Option<PathBuf>,
    /// Write the address here once it accepts connections
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<PathBuf>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct WatchArgs {
    #[arg(long, default_value = "127.0.0.2:50051")]
    pub addr: SocketAddr,
    /// The CA that signed the replica's certificate
    #[arg(long, env = "CERTS_DIR", value_name = "DIR")]
    pub certs_dir: Option<PathBuf>,
    /// Give up after this long
    #[arg(long = "for", value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "60s")]
    pub limit: Duration,
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Replica(args) => replica(args).await,
        Command::Watch(args) => watch(args).await,
        Command::Run(args) => experiment::main(*args).await,
    }
}

async fn replica(args: ReplicaArgs) -> anyhow::Result<()> {
    if args.slower_by > experiment::MAX_EXTRA {
        anyhow::bail!(
            "--slower-by must be at most {}",
            program::duration::Show(experiment::MAX_EXTRA)
        );
    }
    let certs_dir = args.certs_dir.unwrap_or_else(program::certs_dir);
    certs::Pki::new(&certs_dir).generate(false)?;
    let spec = Spec {
        latency: match (args.tail, args.slower_by) {
            (true, _) => Latency::Tail { seed: 1 },
            (false, d) if d.is_zero() => Latency::None,
            (false, d) => Latency::Fixed(d),
        },
        max_age: args.max_age,
        age_grace: args.age_grace,
        ..Spec::new(&args.name, args.addr, certs_dir)
    };
    let replica = Replica::start(spec).await?;
    // On stderr, like the other servers' logs: the book's observations read it.
    eprintln!(
        "replica {} serving on {} (Ctrl-C drains it)",
        args.name, replica.addr
    );
    if let Some(path) = &args.ready_file {
        program::ready_file::publish(path, &format!("{}\n", replica.addr))?;
    }
    tokio::signal::ctrl_c().await?;
    eprintln!(
        "NOT_SERVING now; GOAWAY in {}",
        program::duration::Show(args.grace)
    );
    let drained = replica.drain(args.grace, Duration::from_secs(30)).await?;
    eprintln!(
        "drained: GOAWAY after {:.0} ms, closed {:.0} ms after that{}",
        (drained.goaway - drained.not_serving).as_secs_f64() * 1e3,
        (drained.closed - drained.goaway).as_secs_f64() * 1e3,
        if drained.forced {
            " (forced: calls were still running)"
        } else {
            ""
        }
    );
    Ok(())
}

// ANCHOR: watch
/// Prints each status a replica's health `Watch` stream sends. On anything
/// but SERVING it stops watching: a Watch left open is a call in flight,
/// and a draining server waits for its calls.
async fn watch(args: WatchArgs) -> anyhow::Result<()> {
    let ca = args
        .certs_dir
        .unwrap_or_else(program::certs_dir)
        .join("ca.pem");
    let channel = endpoint(args.addr, &ca)?
        .connect()
        .await
        .with_context(|| format!("cannot connect to the replica at {}", args.addr))?;
    let started = Instant::now();
    let request = HealthCheckRequest {
        service: SERVICE.into(),
    };
    let mut statuses = HealthClient::new(channel)
        .watch(request)
        .await?
        .into_inner();
    println!("watching {} ({SERVICE})", args.addr);
    let until = started + args.limit;
    while let Ok(Some(update)) = tokio::time::timeout_at(until, statuses.next()).await {
        let status = ServingStatus::try_from(update?.status).unwrap_or(ServingStatus::Unknown);
        println!(
            "{:6.2} s  {}",
            started.elapsed().as_secs_f64(),
            status.as_str_name()
        );
        if status != ServingStatus::Serving {
            println!("the replica is leaving: no more calls go there; watch ended");
            return Ok(());
        }
    }
    anyhow::bail!(
        "the replica was still SERVING after {}",
        program::duration::Show(args.limit)
    )
}
// ANCHOR_END: watch
