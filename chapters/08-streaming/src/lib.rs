//! Chapter 8: streaming calls, and HTTP/2 flow control made visible.
//!
//! - [`service`] is `streaming.v1.Streamer`: `Countdown` (server streaming),
//!   `Upload` (client streaming) and `Echo` (bidirectional).
//! - [`budget`] bounds the replies the service holds for clients that read
//!   slowly or not at all, per connection and for the whole server.
//! - [`stats`] counts what the service holds: open streams, the tasks that
//!   produce replies, and the bytes going each way, so that tests can show
//!   that a cancelled stream leaves nothing behind.
//! - [`flow`] is the flow-control demo: a fast sender, a slow reader, and the
//!   bytes between them, bounded by the HTTP/2 window. `flow_control` is its
//!   command line.
//! - [`slow_reader`] is a client that opens many streams and reads none, with
//!   the reply budget and without; `slow_reader` is its command line.

pub mod budget;
pub mod cli;
pub mod flow;
pub mod service;
pub mod slow_reader;
pub mod stats;

pub use service::Streamer;
pub use stats::{Meter, MeterSnapshot, StreamStats};
