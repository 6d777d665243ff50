//! `cargo run --release -p overload`: every overload policy at every load.

use std::process::ExitCode;

use clap::Parser;
use harness::Start;

#[tokio::main]
async fn main() -> ExitCode {
    let args = overload::Args::parse();
    program::exit_code(harness::experiment::main(&args.flags, || args.config(), Start::Fresh).await)
}
