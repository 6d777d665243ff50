use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    program::exit_code(loadgen::cli::run(loadgen::cli::Args::parse()).await)
}
