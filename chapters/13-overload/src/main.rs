//! `cargo run --release -p overload`: every overload policy at every load.

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    // The message and its causes, not a backtrace: bad settings are the usual
    // reason, and the message names the flag.
    program::exit_code(
        overload::report::run(overload::Args::parse())
            .await
            .map(drop),
    )
}
