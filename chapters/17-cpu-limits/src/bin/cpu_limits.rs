//! `cargo run --release -p cpu-limits --bin cpu_limits`: the chapter 17
//! experiment, and the servers it starts in their pods.

use std::process::ExitCode;

use cpu_limits::config::Args;
use harness::{Start, experiment::Steps};

fn main() -> ExitCode {
    let args = program::args::<Args>();
    let result = if args.serve_child {
        cpu_limits::server::serve_process()
    } else if let Some(cpu_limits::config::Command::Serve(serve)) = &args.command {
        cpu_limits::remote::serve(serve)
    } else {
        let steps = Steps {
            run: cpu_limits::run::run,
            // The run's rows are its tables: one per arm, load and block,
            // and half a second of calls per arm.
            reduce: harness::experiment::nothing_to_reduce,
            render: cpu_limits::render::render,
            raw: &[],
        };
        harness::experiment::main_on_one_thread(&args.flags, || args.config(), Start::Fresh, steps)
    };
    program::exit_code(result)
}
