//! `cargo run -p perf --bin frontend`: a Greeter on 127.0.0.1:50061 that calls
//! the real one, passing on the caller's remaining deadline minus a margin.

use std::process::ExitCode;

use perf::propagation::{Args, run};

#[tokio::main]
async fn main() -> ExitCode {
    program::init_tracing();
    let args = program::args::<Args>();
    program::exit_code(run(&args, program::shutdown_signal()).await)
}
