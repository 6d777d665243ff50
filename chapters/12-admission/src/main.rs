//! `cargo run --release -p admission`: chapter 12's experiment, and the two
//! processes it starts for every run.

use std::process::ExitCode;

use admission::{Args, Child, config::RunArgs};
use harness::{Start, experiment::Steps};

#[tokio::main]
async fn main() -> ExitCode {
    let args = program::args::<Args>();
    let result = match args.command {
        Some(Child::Serve) => admission::children::serve().await,
        Some(Child::Client) => admission::children::client().await,
        None => experiment(&args.run).await,
    };
    program::exit_code(result)
}

async fn experiment(args: &RunArgs) -> anyhow::Result<()> {
    let start = if args.resume {
        Start::Resume
    } else {
        Start::Fresh
    };
    // With --live, the page draws each attempt from the records it writes.
    let live = harness::live::start(&args.live, ingest::live::view).await?;
    let steps = Steps {
        run: async |config: &_, folder: &_| {
            admission::runner::run(config, folder, args.metrics_addr, live.as_ref()).await
        },
        reduce: admission::render::reduce,
        render: admission::render::render,
        raw: &["runs/"],
    };
    harness::experiment::main(&args.flags, || args.config(), start, steps).await?;
    harness::live::finish(live).await;
    Ok(())
}
