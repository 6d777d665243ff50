//! `cargo run -p network -- --help`: chapter 15's lab, proxy and experiment.

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    // Warnings only: the experiment's servers would log every call.
    program::init_tracing_at("warn");
    program::exit_code(network::cli::run(network::cli::Cli::parse()).await)
}
