//! Chapter 7: one code for each error, the same over both protocols (the
//! solution).
//!
//! Each error gets the code whose retry advice is what its caller should do:
//! back off and honour pushback for a quota, retry the call as it is for a
//! dependency that did not answer, restart the read-modify-write for a lost
//! compare-and-set, and wait for the state to change for an archived book.

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
            // The request is wrong whatever the server's state.
            GreetError::InvalidName(_) => Code::InvalidArgument,
            // The caller asked for more than it may have: slow down.
            GreetError::QuotaExceeded { .. } => Code::ResourceExhausted,
            // The call did nothing and can be sent again as it is.
            GreetError::DirectoryUnavailable => Code::Unavailable,
            // Sending this write again would fail again: its version is
            // stale. The read before it has to be done again too.
            GreetError::VersionConflict { .. } => Code::Aborted,
            // Nothing the caller resends helps until the book is reopened.
            GreetError::BookArchived => Code::FailedPrecondition,
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
