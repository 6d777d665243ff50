//! Chapter 14: `TCP_NODELAY` on connections you accept yourself (the
//! solution).
//!
//! Every accepted socket gets the option before tonic sees it. (The
//! chapter's server does the same in `bind`, in
//! `chapters/14-per-call/src/server.rs`.)

use std::io;

use tokio::net::TcpStream;
use tokio_stream::{Stream, StreamExt};

// ANCHOR: incoming
/// The connections to give tonic's `serve_with_incoming`, from those a
/// listener `accepted` (a `TcpListenerStream`), in the order it accepted
/// them. A failed accept stays an error, for tonic to log and skip.
pub fn incoming(
    accepted: impl Stream<Item = io::Result<TcpStream>>,
) -> impl Stream<Item = io::Result<TcpStream>> {
    accepted.map(|connection| {
        // A socket that refuses the option becomes an error, as in the
        // chapter's server: tonic skips it, which closes that one connection,
        // and goes on accepting. Served with Nagle on, it would slow its
        // calls without a word, and a measurement would price Nagle's
        // algorithm instead of the server. (tonic's own `serve` logs a
        // warning and serves it anyway.)
        connection.and_then(|stream| stream.set_nodelay(true).map(|()| stream))
    })
}
// ANCHOR_END: incoming
