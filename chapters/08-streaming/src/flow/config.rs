//! One run's settings, and the numbers they are checked against: HTTP/2's and
//! the libraries' default windows, and the bytes the libraries hold beyond the
//! window.

use std::time::Duration;

use proto::streaming::v1::Chunk;

use super::size;
use crate::{service::MAX_COUNT, stats::wire_bytes};

/// Which way the bytes flow, and so who reads slowly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Direction {
    /// Client streaming (`Upload`): the client sends, the server reads slowly
    Upload,
    /// Server streaming (`Countdown`): the server sends, the client reads slowly
    Download,
}

// ANCHOR: defaults
/// HTTP/2's own initial window (RFC 9113, section 6.9.2): what each side may
/// send before the peer's SETTINGS arrive, and the smallest window this demo
/// accepts, so that moment cannot blur its numbers.
pub const SPEC_WINDOW: u32 = 65_535;
/// What hyper's HTTP/2 *server* advertises when nobody sets a window
/// (`DEFAULT_STREAM_WINDOW`, `DEFAULT_CONN_WINDOW` in hyper's
/// `src/proto/h2/server.rs`). tonic's `Server` passes `None` unless told
/// otherwise, so this is what a tonic server uses, although tonic's
/// documentation says 65,535.
pub const HYPER_SERVER_WINDOWS: (u32, u32) = (1024 * 1024, 1024 * 1024);
/// The same for hyper's *client* (`src/proto/h2/client.rs`): 2 MiB per
/// stream, 5 MiB per connection. tonic's `Endpoint` passes these through.
pub const HYPER_CLIENT_WINDOWS: (u32, u32) = (2 * 1024 * 1024, 5 * 1024 * 1024);
// ANCHOR_END: defaults

// ANCHOR: buffers
/// tonic's encoder hands hyper a chunk once it holds at least this many bytes
/// of encoded messages (`DEFAULT_YIELD_THRESHOLD` in tonic's `codec`), so one
/// chunk is at most this plus one message.
pub const TONIC_YIELD_BYTES: u64 = 32 * 1024;
/// The largest DATA frame either side accepts (hyper's default
/// SETTINGS_MAX_FRAME_SIZE, 16 KiB). tonic's decoder asks for the next frame
/// only when it does not yet hold a whole message.
pub const MAX_FRAME_BYTES: u64 = 16 * 1024;

/// Bytes the libraries may hold beyond the window, for messages of
/// `message_wire` bytes each (payload plus framing):
///
/// - sender side: the chunk hyper holds while it waits for window, and up to
///   one more chunk that h2 has accepted past the window (hyper hands h2 a
///   whole chunk as soon as *any* window is free);
/// - receiver side: tonic's decoder buffer, at most one frame plus the part of
///   a message it has already read.
///
/// Bytes in the sockets, in TLS and in the receiver's h2 buffers are not in
/// this margin: the sender has already spent window on them.
pub fn library_margin(message_wire: u64) -> u64 {
    let chunk = TONIC_YIELD_BYTES + message_wire;
    2 * chunk + MAX_FRAME_BYTES + message_wire
}
// ANCHOR_END: buffers

/// One run's settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub direction: Direction,
    /// SETTINGS_INITIAL_WINDOW_SIZE, on both ends.
    pub stream_window: u32,
    /// The connection-level window, on both ends.
    pub connection_window: u32,
    /// Payload bytes per message.
    pub message_bytes: u32,
    /// The reader takes one message, then pauses this long.
    pub read_every: Duration,
    /// How long the sender sends.
    pub duration: Duration,
    /// How often a [`Sample`] is taken.
    pub report_every: Duration,
    /// An upload's reader may take this long after the sender stops to read
    /// what is still in flight; past it, the call is cancelled.
    pub drain_limit: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            direction: Direction::Upload,
            stream_window: HYPER_SERVER_WINDOWS.0,
            connection_window: HYPER_SERVER_WINDOWS.1,
            message_bytes: 16 * 1024,
            read_every: Duration::from_millis(10),
            duration: Duration::from_secs(3),
            report_every: Duration::from_millis(250),
            drain_limit: Duration::from_secs(10),
        }
    }
}

impl Config {
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.stream_window >= SPEC_WINDOW && self.connection_window >= SPEC_WINDOW,
            "windows must be at least {SPEC_WINDOW} bytes, HTTP/2's initial window"
        );
        anyhow::ensure!(
            self.stream_window <= i32::MAX as u32 && self.connection_window <= i32::MAX as u32,
            "HTTP/2 windows are at most 2^31-1 bytes"
        );
        anyhow::ensure!(
            self.message_bytes <= crate::service::MAX_PAYLOAD_BYTES,
            "messages carry at most {} bytes",
            crate::service::MAX_PAYLOAD_BYTES
        );
        anyhow::ensure!(
            !self.report_every.is_zero(),
            "the report interval must not be zero"
        );
        Ok(())
    }

    /// The bytes one message occupies in DATA frames.
    pub fn message_wire(&self) -> u64 {
        match self.direction {
            Direction::Upload => wire_bytes(&Chunk {
                seq: u64::MAX, // the longest varint a seq can take
                data: vec![0; self.message_bytes as usize],
            }),
            Direction::Download => wire_bytes(&proto::streaming::v1::Tick {
                remaining: MAX_COUNT,
                payload: vec![0; self.message_bytes as usize],
            }),
        }
    }

    /// What limits a single stream: the smaller of its own window and the
    /// connection's.
    pub fn effective_window(&self) -> u64 {
        self.stream_window.min(self.connection_window).into()
    }

    /// The most bytes that can be in flight: the window plus the libraries'
    /// buffers ([`library_margin`]).
    pub fn bound(&self) -> u64 {
        self.effective_window() + library_margin(self.message_wire())
    }

    /// Where the numbers come from, for the top of the report.
    pub fn describe_windows(&self) -> String {
        let (receiver, defaults) = match self.direction {
            Direction::Upload => ("server (it receives the upload)", HYPER_SERVER_WINDOWS),
            Direction::Download => ("client (it receives the ticks)", HYPER_CLIENT_WINDOWS),
        };
        format!(
            "HTTP/2 windows in force: {} per stream, {} per connection, advertised by the {receiver}.\n\
             Set explicitly on both ends (tonic Server and Endpoint: initial_stream_window_size,\n\
             initial_connection_window_size), adaptive window off. Unset, hyper would advertise\n\
             {} per stream and {} per connection here; tonic's documentation says 65,535.",
            size(self.stream_window.into()),
            size(self.connection_window.into()),
            size(defaults.0.into()),
            size(defaults.1.into()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_is_two_chunks_a_frame_and_a_message() {
        let message = 16 * 1024 + 10;
        assert_eq!(
            library_margin(message),
            2 * (32 * 1024 + message) + 16 * 1024 + message
        );
        let config = Config::default();
        assert_eq!(
            config.bound(),
            1024 * 1024 + library_margin(config.message_wire())
        );
    }
}
