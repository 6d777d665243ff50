//! Chapter 7: one code for each error, the same over both protocols.
//!
//! `GreetError` is what a greeting service that has grown up might fail
//! with: besides a bad name, a caller's quota, a directory it depends on, a
//! write that lost a race, and a guest book closed for writing. `code` picks
//! the gRPC status code for each; the gRPC status and the REST problem are
//! both made from that one code, the HTTP status from the chapter's table
//! (`proto::status`), so the two protocols cannot disagree. What this version
//! gets wrong is the choice itself: it calls everything but a bad name
//! "unavailable", so a caller is told to retry, as it is, a call that must
//! slow down, or be restarted from its read, or wait for someone to reopen
//! the book. Give each error the code whose retry advice fits it.
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch07`.

use std::fmt;

use axum::http::StatusCode;
use proto::status::{self, Code};
use rest_server::Problem;
use tonic::Status;

/// The ways a greeting can fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GreetError {
    /// The name breaks a rule of `check_request` (empty, too long).
    InvalidName(String),
    /// The caller has used all `limit` greetings of its quota for this
    /// minute; the next minute brings a fresh quota.
    QuotaExceeded { limit: u32 },
    /// The name directory the greeting is looked up in did not answer (it
    /// is restarting, or unreachable); the call did nothing.
    DirectoryUnavailable,
    /// Writing the greeting into the guest book is a compare-and-set on the
    /// book, which this call read at version `read`; another writer moved it
    /// to `found` in between, so the write was refused.
    VersionConflict { read: u64, found: u64 },
    /// The guest book the greeting would be written to is archived: nothing
    /// is written to it until someone reopens it.
    BookArchived,
}

impl fmt::Display for GreetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GreetError::InvalidName(why) => write!(f, "name: {why}"),
            GreetError::QuotaExceeded { limit } => {
                write!(f, "quota of {limit} greetings a minute used up")
            }
            GreetError::DirectoryUnavailable => write!(f, "name directory not answering"),
            GreetError::VersionConflict { read, found } => write!(
                f,
                "guest book changed since it was read (version {read}, now {found})"
            ),
            GreetError::BookArchived => write!(f, "the guest book is archived"),
        }
    }
}

impl std::error::Error for GreetError {}

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

    /// What a gRPC caller receives.
    pub fn to_status(&self) -> Status {
        Status::new(self.code(), self.to_string())
    }

    /// What a REST caller receives: problem details whose `type` names the
    /// same code, sent with the HTTP status the table gives that code.
    pub fn to_problem(&self) -> Problem {
        let code = self.code();
        let http = StatusCode::from_u16(status::info(code).http)
            .expect("the table's HTTP statuses are valid");
        Problem::new(code, http, self.to_string())
    }
}
