//! Chapter 7's exercise, the part it gives: the errors, and the gRPC status
//! and REST problem made from the one code that `GreetError::code` (the
//! exercise) picks for each.

use std::fmt;

use axum::http::StatusCode;
use proto::status;
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
