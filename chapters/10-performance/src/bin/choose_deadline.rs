//! `cargo run -p perf --bin choose_deadline -- --method SayHello --concurrency 8 --calls 500`
//!
//! Measures a method's p99 with CONCURRENCY calls in flight and suggests a
//! deadline of p99 x HEADROOM. The code is in `perf::choose`.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    program::exit_code(perf::choose::run(program::args::<perf::choose::Args>()).await)
}
