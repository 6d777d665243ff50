//! Chapter 6: clients.
//!
//! - [`cli`] is the command line of `grpc-client` and of the REST client example.
//! - [`channel`] builds the one tonic channel a process uses: TLS that trusts
//!   only the development CA, a connect timeout, lazy or eager connection.
//! - [`calls`] makes the calls: unary, the three kinds of stream, and a burst
//!   of concurrent calls on one connection.
//! - [`report`] turns a failed call into the reader's three lines, with the
//!   meaning from the status table (`proto::status`), then a line per error
//!   detail the status carried, and tells an expired deadline from a
//!   cancellation.
//! - [`rest`] is the REST client: one reqwest client, its connection pool,
//!   per-request timeouts, problem details.
//!
//! Chapter 10 reuses the channel builder, the deadline rule and the reports.

pub mod calls;
pub mod channel;
pub mod cli;
pub mod report;
pub mod rest;

use program::Exit;

pub use channel::{Target, endpoint};
pub use cli::{Args, Command, RestArgs};
pub use report::Failure;

/// Exit status of a call that failed (the report says how).
pub const EXIT_FAILED: u8 = 1;
/// Exit status when the client could not even be set up (bad URL, missing
/// certificate files); clap uses the same for a bad command line.
pub const EXIT_SETUP: u8 = 2;

/// Runs one `grpc-client` command line on one channel. A failed call is an
/// [`Exit`] with [`EXIT_FAILED`] and the failure's report; a client that could
/// not be set up, one with [`EXIT_SETUP`].
pub async fn run(args: Args) -> anyhow::Result<()> {
    let target = Target::from_args(&args);
    let endpoint = endpoint(&target).map_err(|e| Exit::error(EXIT_SETUP, e))?;
    let failed = |failure: Failure| Exit::report(EXIT_FAILED, failure.with_next_step(&target.url));
    let channel = channel::channel(&endpoint, args.connect)
        .await
        .map_err(failed)?;
    let options = calls::CallOptions {
        deadline: args.deadline,
        raw_status: args.raw_status,
    };
    let result = match &args.command {
        Command::Hello(hello) => {
            calls::hello(&channel, || endpoint.connect_lazy(), options, hello).await
        }
        Command::Countdown(countdown) => calls::countdown(&channel, options, countdown).await,
        Command::Upload(upload) => calls::upload(&channel, options, upload).await,
        Command::Echo(echo) => calls::echo(&channel, options, echo).await,
        Command::Burst(burst) => {
            // The burst prints its own tally, failures included.
            return if calls::burst(&channel, options, burst).await {
                Ok(())
            } else {
                Err(Exit::silent(EXIT_FAILED).into())
            };
        }
    };
    result.map_err(failed)?;
    Ok(())
}
