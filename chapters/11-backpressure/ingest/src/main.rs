use std::process::ExitCode;

use ingest::{Args, Command};

#[tokio::main]
async fn main() -> ExitCode {
    let result = match program::args::<Args>().command {
        Command::Serve(args) => {
            program::init_tracing();
            ingest::server::run(args).await
        }
        Command::ServeChild => {
            program::init_tracing();
            ingest::server::child().await
        }
        Command::Compare(args) => ingest::compare::compare(args).await,
    };
    program::exit_code(result)
}
