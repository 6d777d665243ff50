//! `cargo run -p fleet -- --help`: chapter 16's replica and experiment.

use std::process::ExitCode;

use fleet::cli::Cli;

fn main() -> ExitCode {
    // Warnings only: the replicas would log every call.
    program::init_tracing_at("warn");
    let cli = program::args::<Cli>();
    let runtime = tokio::runtime::Runtime::new();
    program::exit_code(
        runtime
            .map_err(anyhow::Error::from)
            .and_then(|runtime| runtime.block_on(fleet::cli::run(cli))),
    )
}
