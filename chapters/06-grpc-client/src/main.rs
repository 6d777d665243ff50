//! `cargo run -p grpc-client -- hello --name Ada`: calls the Greeter (and the
//! Streamer) over gRPC. Everything but parsing lives in the library.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    program::exit_code(grpc_client::run(program::args::<grpc_client::Args>()).await)
}
