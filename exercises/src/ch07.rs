//! Chapter 7: one code for each error, the same over both protocols.
//!
//! `GreetError` is what a greeting service that has grown up might fail with:
//! besides a bad name, a caller's quota, a directory it depends on, a write
//! that lost a race, and a guest book closed for writing. `code` picks the gRPC
//! status code for each; the gRPC status and the REST problem are both made
//! from that one code (in `given/ch07.rs`), the HTTP status from the chapter's
//! table (`proto::status`), so the two protocols cannot disagree. What this
//! version gets wrong is the choice itself: it calls everything but a bad name
//! "unavailable", so a caller is told to retry, as it is, a call that must slow
//! down, or be restarted from its read, or wait for someone to reopen the book.
//! Give each error the code whose retry advice fits it.
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch07`.

use proto::status::Code;

pub use crate::given::ch07::GreetError;

impl GreetError {
    // ANCHOR: code
    /// The gRPC status code for this error. Everything a caller should do
    /// next follows from it: the HTTP status and the retry advice are both
    /// read from the code's row of the chapter's table.
    pub fn code(&self) -> Code {
        match self {
            GreetError::InvalidName(_) => Code::InvalidArgument,
            // The request itself was fine: the server cannot serve it now.
            GreetError::QuotaExceeded { .. }
            | GreetError::DirectoryUnavailable
            | GreetError::VersionConflict { .. }
            | GreetError::BookArchived => Code::Unavailable,
        }
    }
    // ANCHOR_END: code
}
