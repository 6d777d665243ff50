//! `cargo run -p network -- ...`: the lab, the proxy, and the experiment.

use std::{net::SocketAddr, time::Duration};

use clap::{Parser, Subcommand};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::{
    experiment,
    lab::{self, Rate},
    proxy::{Mode, Path, Proxy},
};

/// A real network on one machine: a lab of two network namespaces (root), a
/// delay proxy (no privileges needed), and the chapter's experiment.
#[derive(Parser, Debug)]
#[command(name = "network", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Make the lab: namespaces wk15-client and wk15-server, a veth pair, tbf (root)
    Up(lab::UpArgs),
    /// Remove the lab, also what a crash left behind (root)
    Down,
    /// Show whether the lab is up
    Status,
    /// Run a command in one end of the lab (root): `in server -- COMMAND...`
    In(lab::InArgs),
    /// Forward TCP connections with a delay, jitter and a rate limit; type
    /// `stall`, `blackhole` or `forward` (and Enter) to change what it does
    Proxy(ProxyArgs),
    /// The chapter's experiment: handshakes, windows, head-of-line blocking,
    /// deadlines across hops and a dead peer, at several round-trip times
    Run(Box<experiment::Args>),
}

#[derive(clap::Args, Debug, Clone)]
pub struct ProxyArgs {
    /// Where the proxy listens
    #[arg(long, default_value = "127.0.0.1:50052")]
    pub listen: SocketAddr,
    /// The server it forwards to
    #[arg(long, default_value = "127.0.0.1:50051")]
    pub upstream: SocketAddr,
    /// One-way delay towards the server (and back, unless --delay-back)
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "10ms")]
    pub delay: Duration,
    /// One-way delay from the server back to the client
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true)]
    pub delay_back: Option<Duration>,
    /// Each chunk's delay varies by up to this much either way (seeded)
    #[arg(long, value_parser = program::duration::parse, allow_hyphen_values = true, default_value = "0ms")]
    pub jitter: Duration,
    /// Seed of the jitter
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Rate limit each way, like 20mbit, or off
    #[arg(long, default_value = "off")]
    pub rate: Rate,
}

impl ProxyArgs {
    pub fn path(&self) -> Path {
        Path {
            to_server: self.delay,
            to_client: self.delay_back.unwrap_or(self.delay),
            jitter: self.jitter,
            rate: self.rate.bytes_per_sec(),
            seed: self.seed,
        }
    }
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Up(args) => lab::up(&args),
        Command::Down => lab::down(),
        Command::Status => {
            print!("{}", lab::status()?);
            Ok(())
        }
        Command::In(args) => lab::run_in(&args),
        Command::Proxy(args) => proxy(&args).await,
        Command::Run(args) => experiment::main(*args).await,
    }
}

async fn proxy(args: &ProxyArgs) -> anyhow::Result<()> {
    let path = args.path();
    let proxy = Proxy::start(args.listen, args.upstream, path).await?;
    println!(
        "proxy on {} -> {}: {} ms towards the server, {} ms back, jitter ±{} ms, rate {}",
        proxy.addr(),
        args.upstream,
        path.to_server.as_secs_f64() * 1e3,
        path.to_client.as_secs_f64() * 1e3,
        path.jitter.as_secs_f64() * 1e3,
        args.rate,
    );
    println!("type stall, blackhole or forward (Enter); Ctrl-C stops");
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut line = Vec::new();
    loop {
        line.clear();
        tokio::select! {
            read = stdin.read_until(b'\n', &mut line) => match read {
                // stdin closed (say, run in the background): keep forwarding.
                Ok(0) | Err(_) => {
                    program::shutdown_signal().await;
                    break;
                }
                // Bytes, not text: a line that is not UTF-8 is a bad command,
                // not a reason to drop every connection.
                Ok(_) => match String::from_utf8_lossy(&line).trim() {
                    "" => {}
                    word => match word.parse::<Mode>() {
                        Ok(mode) => {
                            proxy.set(mode);
                            println!("{mode:?}: {} connections so far", proxy.accepted());
                        }
                        Err(error) => eprintln!("{error}"),
                    },
                },
            },
            _ = program::shutdown_signal() => break,
        }
    }
    Ok(())
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(word: &str) -> Result<Mode, String> {
        match word.to_ascii_lowercase().as_str() {
            "forward" => Ok(Mode::Forward),
            "stall" => Ok(Mode::Stall),
            "blackhole" => Ok(Mode::Blackhole),
            _ => Err(format!(
                "`{word}` is not a command: type stall, blackhole or forward"
            )),
        }
    }
}
