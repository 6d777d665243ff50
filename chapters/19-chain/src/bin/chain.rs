//! `cargo run --release -p chain -- run`: the chapter 19 experiment, and the
//! three processes of the chain it starts (`--hop-child`).

use std::process::ExitCode;

use chain::run::Args;
use clap::{Parser, Subcommand};
use harness::{Start, experiment::Steps};

/// Retries across a chain: a storm that outlives its trigger, and the
/// throttles that end it.
#[derive(Parser, Debug)]
#[command(version)]
struct Cli {
    /// A process of the chain, started by the experiment (not for use by hand)
    #[arg(long, hide = true)]
    hop_child: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Halve the leaf's capacity for a few seconds under each retry variant; writes CSV, Markdown and SVG to --out
    Run(Box<Args>),
    /// What gRFC A6's maxTokens and tokenRatio allow, in attempts per call
    A6(A6Args),
}

#[derive(clap::Args, Debug)]
struct A6Args {
    /// Attempts per call, the first included (A6 caps maxAttempts at 5)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=5))]
    max_attempts: u32,
    /// Hops in a row that each retry under their own throttle
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10))]
    layers: u32,
}

/// A6's example (10, 0.1), a larger bucket, and two generous ratios.
const PAIRS: [(f64, f64); 4] = [(10.0, 0.1), (100.0, 0.1), (100.0, 1.0), (1000.0, 0.5)];

fn main() -> ExitCode {
    let cli = program::args::<Cli>();
    let result = match cli.command {
        _ if cli.hop_child => chain::servers::hop_process(),
        Some(Command::Run(args)) => {
            let steps = Steps {
                run: chain::run::run,
                reduce: chain::render::reduce,
                render: chain::render::render,
                raw: &["raw/"],
            };
            harness::experiment::main_on_one_thread(
                &args.flags,
                || args.config(),
                Start::Fresh,
                steps,
            )
        }
        Some(Command::A6(a6)) => {
            print!("{}", chain::a6::table(&PAIRS, a6.max_attempts, a6.layers));
            Ok(())
        }
        None => Err(anyhow::anyhow!(
            "say what to do: `chain run` (see `chain --help`)"
        )),
    };
    program::exit_code(result)
}
