//! `cargo run --release --example latency_compare -- --calls 200`
//!
//! gRPC against REST, measured fairly: arms interleaved call by call, warm-up
//! excluded, percentiles, every sample kept with `--csv`. `--fresh-connections`
//! measures connection setup (resumed and full TLS handshakes, and the naive
//! client that rebuilds everything per call) beside a reused connection;
//! `--floor` adds a raw TCP ping-pong to compare against; `--plot FILE.svg`
//! draws each arm's p50 and p99. The code is in `perf::latency` (chapter 10).

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    program::exit_code(perf::latency::run(program::args::<perf::latency::Args>()).await)
}
