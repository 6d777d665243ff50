//! `cargo run --release -p overload`: every overload policy at every load.

use clap::Parser;

#[tokio::main]
async fn main() {
    if let Err(error) = overload::report::run(overload::Args::parse()).await {
        // The message and its causes, not a backtrace: bad settings are the
        // usual reason, and the message names the flag.
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}
