//! `cargo run -p rest-server`: the Greeter over REST on https://127.0.0.1:8443.

use std::process::ExitCode;

use clap::Parser;
use rest_server::{Args, BoundServer};

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
