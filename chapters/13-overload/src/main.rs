//! `cargo run --release -p overload`: every overload policy at every load.

use std::process::ExitCode;

use harness::{Start, experiment::Steps};

#[tokio::main]
async fn main() -> ExitCode {
    program::exit_code(experiment(program::args::<overload::Args>()).await)
}

async fn experiment(args: overload::Args) -> anyhow::Result<()> {
    // With --live, the page draws the report's charts as the cells end.
    let live = harness::live::start(&args.live, overload::render::live).await?;
    let steps = Steps {
        run: async |config: &overload::Config, folder: &harness::Folder| {
            overload::run::run(config, folder, args.metrics_addr, live.as_ref()).await
        },
        reduce: overload::render::reduce,
        render: overload::render::render,
        raw: &["raw/"],
    };
    harness::experiment::main(&args.flags, || args.config(), Start::Fresh, steps).await?;
    harness::live::finish(live).await;
    Ok(())
}
