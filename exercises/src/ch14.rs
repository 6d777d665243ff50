//! Chapter 14: `TCP_NODELAY` on connections you accept yourself.
//!
//! The chapter's server binds its own listener and hands tonic the
//! connections it accepts, with `serve_with_incoming`. tonic's own
//! `Server::serve` turns on `TCP_NODELAY` for each connection it accepts;
//! `serve_with_incoming` serves them as they come, with Nagle's algorithm on,
//! so a small reply can wait for the client's ACK of the one before. This
//! version hands each connection on as the kernel made it. Make every
//! connection it hands on have `TCP_NODELAY` set.
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch14`.

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
        // As the kernel made it: Nagle's algorithm on.
        connection
    })
}
// ANCHOR_END: incoming
