//! Chapter 8: streaming calls, and HTTP/2 flow control made visible.
//!
//! - [`service`] is `streaming.v1.Streamer`: `Countdown` (server streaming),
//!   `Upload` (client streaming) and `Echo` (bidirectional).
//! - [`stats`] counts what the service holds: open streams, the tasks that
//!   produce replies, and the bytes going each way, so that tests can show
//!   that a cancelled stream leaves nothing behind.
//! - [`flow`] is the flow-control demo: a fast sender, a slow reader, and the
//!   bytes between them, bounded by the HTTP/2 window. `flow_control` is its
//!   command line.

pub mod cli;
pub mod flow;
pub mod service;
pub mod stats;

pub use service::Streamer;
pub use stats::{Meter, MeterSnapshot, StreamStats};
