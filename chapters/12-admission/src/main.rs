use std::process::ExitCode;

use admission::{Args, Child};
use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let result = match args.command {
        Some(Child::Serve(serve)) => admission::children::serve(serve).await,
        Some(Child::Client(client)) => admission::children::client(client).await,
        None => admission::runner::run(args.run).await.map(|_| ()),
    };
    program::exit_code(result)
}
