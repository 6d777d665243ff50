//! `cargo run -p network -- --help`: chapter 15's lab, proxy and experiment.

use std::process::ExitCode;

use network::cli::{Cli, Command};

fn main() -> ExitCode {
    // Warnings only: the experiment's servers would log every call.
    program::init_tracing_at("warn");
    let cli = program::args::<Cli>();
    // `run --lab` moves into the client's namespace before the runtime
    // starts: its worker threads, and so every socket the run opens, follow.
    if let Command::Run(args) = &cli.command
        && args.lab
        && let Err(e) = network::lab::enter(network::lab::Side::Client)
    {
        return program::exit_code(Err(e));
    }
    let runtime = tokio::runtime::Runtime::new();
    program::exit_code(
        runtime
            .map_err(anyhow::Error::from)
            .and_then(|runtime| runtime.block_on(network::cli::run(cli))),
    )
}
