//! The command line of `latency_compare`, in the library so that the book's
//! checks parse exactly what the program parses.

use std::path::PathBuf;

use clap::Parser;

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
    /// and the naive client that rebuilds everything), beside a reused gRPC
    /// and REST (h2) arm to compare with
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
    /// Draw each arm's p50 and p99 (log scale, the floor's p50 as a line) as
    /// an SVG file
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
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
