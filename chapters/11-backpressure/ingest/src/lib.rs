//! The ingest server of chapters 11-12, and chapter 11's experiment.
//!
//! One client-streaming `Ingest` call feeds messages to a handler; the handler
//! puts them in a queue ([`service`]); workers serve them at a speed set by a
//! [`plan`]. Whether the queue is unbounded or gated by [`admission`] is the
//! whole difference chapter 11 measures; [`record`] keeps every message's
//! timestamps and the queue's depth over time; [`server`] puts it on the
//! network as its own process, and [`metrics`] lets Prometheus watch its gate
//! while it runs; [`compare`] is the experiment, and [`live`] what its
//! `--live` page draws while it runs.

pub mod admission;
pub mod compare;
pub mod live;
pub mod metrics;
pub mod plan;
pub mod record;
pub mod server;
pub mod service;

use clap::{Parser, Subcommand};

/// The ingest server, and the experiment that compares its two queues.
#[derive(Parser, Debug, Clone)]
#[command(name = "ingest", version)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug, Clone)]
pub enum Command {
    /// Serve ingest.v1.Ingest over TLS (default 127.0.0.1:50071)
    Serve(server::ServeArgs),
    /// Chapter 11's experiment: unbounded vs reserve-before-receive, same load
    Compare(compare::CompareArgs),
    /// The server, configured by the experiment that starts it (not for use by hand)
    #[command(hide = true)]
    ServeChild,
}
