//! `examples/latency_compare`: gRPC and REST latency, measured so that the
//! comparison means something.
//!
//! Every arm makes the same greeting. The arms run interleaved, call by call
//! (A B C A B C ...), so that whatever drifts during the run (CPU frequency,
//! another program, the page cache) lands on every arm alike. Warm-up calls are
//! made the same way and thrown away. Every sample is kept, for `--csv`.
//!
//! The arms change one thing at a time:
//! - reused: one gRPC channel; one `reqwest::Client` over HTTP/2, and one over
//!   HTTP/1.1 (the protocol, with the framework held still);
//! - `--fresh-connections`: a new TCP + TLS connection per call made with one
//!   shared TLS configuration, with session resumption on and then off; the same
//!   through reqwest with its pool turned off; and the naive client that rebuilds
//!   everything (reads the CA file, builds a TLS configuration and a client) for
//!   every call; beside the reused gRPC and REST (h2) arms, to compare with;
//! - `--floor`: a raw TCP ping-pong of the request's size on loopback, the least
//!   a request and its answer can cost on this machine.
//!
//! One file per job, in the order a run uses them:
//! - `args.rs`: the command line;
//! - `caller.rs`: what makes one call (reused channel and clients, the naive
//!   clients) and times it; `fresh.rs`: a new TLS connection per call, with
//!   resumption counted; `floor.rs`: the TCP ping-pong and its echo listener;
//! - `arms.rs`: where the servers are, and the arms of a run;
//! - `measure.rs`: the interleaved schedule, the measuring loop, the samples
//!   and their CSV;
//! - `report.rs`: what the run prints (and draws, with `--plot`); `run.rs`:
//!   the program, start to end.
//!
//! The statistics are [`crate::stats`].

mod args;
mod arms;
mod caller;
mod floor;
mod fresh;
mod measure;
mod report;
mod run;

pub use args::Args;
pub use arms::{Arm, Servers, arms};
pub use caller::{CALL_TIMEOUT, Caller, NAME, rest_body};
pub use floor::{echo_listener, floor_arm};
pub use fresh::{Handshakes, Http, connect_tls, fresh_tls};
pub use measure::{Samples, Step, measure, schedule, write_csv};
pub use report::format_line;
pub use run::run;
