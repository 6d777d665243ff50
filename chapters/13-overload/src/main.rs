//! `cargo run --release -p overload`: every overload policy at every load.

use std::process::ExitCode;

use clap::Parser;
use harness::{Start, experiment::Steps};

#[tokio::main]
async fn main() -> ExitCode {
    let args = overload::Args::parse();
    let steps = Steps {
        run: async |config: &overload::Config, folder: &harness::Folder| {
            overload::run::run(config, folder, args.metrics_addr).await
        },
        render: overload::render::render,
    };
    program::exit_code(
        harness::experiment::main(&args.flags, || args.config(), Start::Fresh, steps).await,
    )
}
