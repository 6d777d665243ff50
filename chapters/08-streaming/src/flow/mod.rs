//! HTTP/2 flow control made visible: a fast sender, a slow reader, and the
//! bytes between them.
//!
//! [`run`] starts a `Streamer` server and a client in this process, over TLS
//! on `127.0.0.1:0`, with the HTTP/2 windows set explicitly on both ends. The
//! sender pushes messages as fast as tonic takes them; the reader takes one
//! message every `read_every`. Every `report_every` a [`Sample`] records how
//! many bytes the sender has handed to tonic, how many the reader has taken,
//! and the difference: the bytes in flight, which flow control bounds.
//!
//! - **upload** (client streaming): the client sends `Upload` chunks; the
//!   server's handler is the slow reader. The window in force is the one the
//!   *server* advertises.
//! - **download** (server streaming): the server's `Countdown` task sends
//!   ticks; the client is the slow reader. The window in force is the one the
//!   *client* advertises.
//!
//! One file per job:
//! - `config.rs`: [`Config`], [`Direction`], the default windows and the
//!   libraries' buffers ([`library_margin`]) the bound is made of;
//! - `units.rs`: sizes and durations, parsed and printed;
//! - `sample.rs`: [`Sample`], the running peak, and the sampler;
//! - `report.rs`: [`Report`], how the call ended ([`Ending`]), the summary;
//! - `run.rs`: the server, the client channel, and [`run`] with its two
//!   directions.

mod config;
mod report;
mod run;
mod sample;
mod units;

pub use config::{
    Config, Direction, HYPER_CLIENT_WINDOWS, HYPER_SERVER_WINDOWS, MAX_FRAME_BYTES, SPEC_WINDOW,
    TONIC_YIELD_BYTES, library_margin,
};
pub use report::{Ending, Report};
pub use run::run;
pub use sample::Sample;
pub use units::{kib, parse_size, size};
