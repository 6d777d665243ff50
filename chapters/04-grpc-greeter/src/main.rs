//! `cargo run -p grpc-server`: the Greeter over gRPC on 127.0.0.1:50051.

use std::process::ExitCode;

use clap::Parser;
use grpc_server::{Args, BoundServer};

#[tokio::main]
async fn main() -> ExitCode {
    grpc_server::init_tracing();
    let args = Args::parse();
    let result = async {
        let server = BoundServer::bind(&args).await?;
        server.serve(grpc_server::shutdown_signal()).await
    };
    certs::exit_code(result.await)
}
