//! `cargo run --example rest_client -- https://localhost:8443/v1/greetings --name Ada`
//!
//! The REST counterpart of `grpc-client hello` (chapter 6): one reqwest client,
//! reused for every request, an optional per-request `--timeout`, and problem
//! details printed, with their gRPC code, when the server refuses. The code is
//! in the `grpc-client` crate (`grpc_client::rest`) so that later chapters can
//! reuse it.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    program::exit_code(grpc_client::rest::run(program::args::<grpc_client::RestArgs>()).await)
}
