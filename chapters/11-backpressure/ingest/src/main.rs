use std::process::ExitCode;

use clap::Parser;
use ingest::{Args, Command};

#[tokio::main]
async fn main() -> ExitCode {
    let result = match Args::parse().command {
        Command::Serve(args) => {
            grpc_server::init_tracing();
            ingest::server::serve(args, |_| {}).await
        }
        Command::Compare(args) => ingest::compare::compare(args).await,
    };
    certs::exit_code(result)
}
