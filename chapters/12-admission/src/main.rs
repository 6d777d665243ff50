//! `cargo run --release -p admission`: chapter 12's experiment, and the two
//! processes it starts for every run.

use std::process::ExitCode;

use admission::{Args, Child};
use clap::Parser;
use harness::{Start, experiment::Steps};

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let result = match args.command {
        Some(Child::Serve) => admission::children::serve().await,
        Some(Child::Client) => admission::children::client().await,
        None => {
            let start = if args.run.resume {
                Start::Resume
            } else {
                Start::Fresh
            };
            let steps = Steps {
                run: admission::runner::run,
                render: admission::render::render,
            };
            harness::experiment::main(&args.run.flags, || args.run.config(), start, steps).await
        }
    };
    program::exit_code(result)
}
