//! `cargo run --release -p per-call --bin per_call`: the chapter 14 experiment,
//! and the server processes it starts.

use std::process::ExitCode;

use harness::{Start, experiment::Steps};
use per_call::config::Args;

fn main() -> ExitCode {
    let args = program::args::<Args>();
    let result = if args.serve_child {
        per_call::server::serve_process()
    } else if let Some(per_call::config::Command::Serve(serve)) = &args.command {
        per_call::remote::serve(serve)
    } else {
        // The generator runs on one core (see placement): a current-thread
        // runtime suits it, and starts no thread of its own.
        let steps = Steps {
            run: per_call::run::run,
            // The run counts every call into its step as it goes
            // (steps.csv) and keeps every Nth call's record
            // (samples.csv), which the report does not read.
            reduce: harness::experiment::nothing_to_reduce,
            render: per_call::render::render,
            raw: &[per_call::records::SAMPLES],
        };
        harness::experiment::main_on_one_thread(&args.flags, || args.config(), Start::Fresh, steps)
    };
    program::exit_code(result)
}
