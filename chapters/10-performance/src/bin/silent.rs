//! `cargo run -p perf --bin silent`: accepts TCP connections on
//! 127.0.0.1:50071 and never answers them.

use std::process::ExitCode;

use perf::silent::{Args, run};

#[tokio::main]
async fn main() -> ExitCode {
    program::init_tracing();
    let args = program::args::<Args>();
    program::exit_code(run(&args, program::shutdown_signal()).await)
}
