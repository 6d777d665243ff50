//! `cargo run -p grpc-server`: the Greeter over gRPC on 127.0.0.1:50051.

use std::process::ExitCode;

use clap::Parser;
use grpc_server::{Args, BoundServer};

#[tokio::main]
async fn main() -> ExitCode {
    program::init_tracing();
    let args = Args::parse();
    let result = async {
        let server = BoundServer::bind(&args).await?;
        server.serve(program::shutdown_signal()).await
    };
    program::exit_code(result.await)
}
