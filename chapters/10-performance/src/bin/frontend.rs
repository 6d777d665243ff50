//! `cargo run -p perf --bin frontend`: a Greeter on 127.0.0.1:50061 that calls
//! the real one, passing on the caller's remaining deadline minus a margin.

use std::process::ExitCode;

use clap::Parser;
use perf::propagation::{Args, run};

#[tokio::main]
async fn main() -> ExitCode {
    grpc_server::init_tracing();
    let args = Args::parse();
    certs::exit_code(run(&args, grpc_server::shutdown_signal()).await)
}
