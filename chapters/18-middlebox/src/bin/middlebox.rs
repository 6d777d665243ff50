//! `cargo run -p middlebox -- --help`: chapter 18's middlebox, on its own or
//! in the chapter's experiment.

use std::{net::SocketAddr, process::ExitCode, time::Duration};

use clap::{Parser, Subcommand};
use harness::{Start, experiment::Steps};
use middlebox::{
    middlebox::{Middlebox, OnIdle, Policy},
    run::Args,
};

/// Between two processes: what an idle middlebox does to a connection, and
/// what keepalive settings do about it.
#[derive(Parser, Debug)]
#[command(name = "middlebox", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Relay TCP connections as a load balancer does: forget a flow after
    /// --idle without a byte, silently or with a RST; optionally swallow
    /// HTTP/2 PING frames (plaintext HTTP/2 only)
    Proxy(ProxyArgs),
    /// The chapter's experiment: keepalive settings against idle
    /// middleboxes, and a chatty client against gRFC A8's ping policy
    Run(Box<Args>),
}

#[derive(clap::Args, Debug)]
struct ProxyArgs {
    /// Where the middlebox listens
    #[arg(long, default_value = "127.0.0.1:50062")]
    listen: SocketAddr,
    /// The server it forwards to
    #[arg(long, default_value = "127.0.0.1:50061")]
    upstream: SocketAddr,
    /// Forget a flow after this long without a byte either way (off: never)
    #[arg(long, value_parser = parse_idle, default_value = "350s")]
    idle: Option<Duration>,
    /// What a forgotten flow gets when a byte arrives: nothing, or a RST
    #[arg(long, value_enum, default_value = "drop")]
    on_idle: OnIdle,
    /// Swallow every HTTP/2 PING frame, both ways
    #[arg(long)]
    eat_pings: bool,
}

fn parse_idle(text: &str) -> Result<Option<Duration>, String> {
    if text == "off" {
        return Ok(None);
    }
    program::duration::parse(text).map(Some)
}

fn main() -> ExitCode {
    // Warnings only: the experiment's servers would log every connection.
    program::init_tracing_at("warn");
    let cli = program::args::<Cli>();
    let result = match cli.command {
        Command::Run(args) => {
            let steps = Steps {
                run: middlebox::run::run,
                // The run's rows are its tables: one per cell, call and ping.
                reduce: harness::experiment::nothing_to_reduce,
                render: middlebox::render::render,
                raw: &[],
            };
            tokio::runtime::Runtime::new()
                .map_err(anyhow::Error::from)
                .and_then(|runtime| {
                    runtime.block_on(harness::experiment::main(
                        &args.flags,
                        || args.config(),
                        Start::Fresh,
                        steps,
                    ))
                })
        }
        Command::Proxy(args) => tokio::runtime::Runtime::new()
            .map_err(anyhow::Error::from)
            .and_then(|runtime| runtime.block_on(proxy(args))),
    };
    program::exit_code(result)
}

async fn proxy(args: ProxyArgs) -> anyhow::Result<()> {
    let policy = Policy {
        idle: args.idle,
        on_idle: args.on_idle,
        eat_pings: args.eat_pings,
    };
    let middlebox = Middlebox::start(args.listen, args.upstream, policy).await?;
    println!(
        "middlebox on {} -> {}: forgets a flow idle for {} ({}){}; Ctrl-C stops",
        middlebox.addr(),
        args.upstream,
        args.idle
            .map_or("never".into(), |d| program::duration::Show(d).to_string()),
        match args.on_idle {
            OnIdle::Drop => "silently",
            OnIdle::Reset => "with a RST",
        },
        if args.eat_pings {
            ", swallows PINGs"
        } else {
            ""
        },
    );
    // A line every ten seconds while something changed: a reader watching
    // it sees flows being forgotten as they are.
    let mut last = middlebox.counts();
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let now = middlebox.counts();
                if now != last {
                    println!(
                        "  connections {}, forgotten {}, RSTs {}, PINGs passed {}, eaten {}, bytes lost {}",
                        now.flows, now.expired, now.resets, now.pings_passed, now.pings_eaten, now.bytes_lost
                    );
                    last = now;
                }
            }
            _ = program::shutdown_signal() => return Ok(()),
        }
    }
}
