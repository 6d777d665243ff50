//! The command line of `flow_control`, in the library so that tests and the
//! book's checks parse exactly what the program parses.

use std::{path::PathBuf, time::Duration};

use clap::Parser;

use crate::flow::{Config, Direction, parse_size};

/// A fast sender and a slow reader on one gRPC stream, over TLS on loopback.
///
/// Starts a Streamer server and a client in this process, with the HTTP/2
/// windows set explicitly on both ends, and prints, every --report-every, the
/// bytes the sender has handed to tonic, the bytes the reader has taken, the
/// difference (in flight), and whether the sender's latest send had to wait.
/// Once the window is full, the sender waits for the reader.
#[derive(Parser, Debug)]
#[command(name = "flow_control", version)]
pub struct Args {
    /// Who sends: upload = the client (Upload RPC; the server reads slowly),
    /// download = the server (Countdown RPC; the client reads slowly)
    #[arg(long, value_enum, default_value = "upload")]
    pub direction: Direction,
    /// HTTP/2 stream window (SETTINGS_INITIAL_WINDOW_SIZE), on both ends: bytes
    /// or KiB/MiB [default: 1MiB, what hyper's server advertises unset]
    #[arg(long, value_parser = parse_size, default_value = "1MiB", hide_default_value = true)]
    pub window: u32,
    /// HTTP/2 connection window, on both ends [default: the same as --window]
    #[arg(long, value_parser = parse_size)]
    pub connection_window: Option<u32>,
    /// Payload bytes per message
    #[arg(long, value_parser = parse_size, default_value = "16KiB")]
    pub message: u32,
    /// The reader takes one message, then pauses this long
    #[arg(long, value_parser = program::duration::parse, default_value = "10ms")]
    pub read_every: Duration,
    /// How long the sender sends
    #[arg(long, value_parser = program::duration::parse, default_value = "3s")]
    pub duration: Duration,
    /// How often to print a line
    #[arg(long, value_parser = program::duration::parse, default_value = "250ms")]
    pub report_every: Duration,
    /// Upload only: how long the reader may take to finish what is in flight
    /// once the sender stops; past it, the call is cancelled
    #[arg(long, value_parser = program::duration::parse, default_value = "10s")]
    pub drain_limit: Duration,
    /// Also write every sample to this CSV file
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
}

impl Args {
    pub fn config(&self) -> Config {
        Config {
            direction: self.direction,
            stream_window: self.window,
            connection_window: self.connection_window.unwrap_or(self.window),
            message_bytes: self.message,
            read_every: self.read_every,
            duration: self.duration,
            report_every: self.report_every,
            drain_limit: self.drain_limit,
        }
    }
}
