//! Chapter 7: one code for each error, the same over both protocols (the
//! solution).
//!
//! Each error gets the code whose retry advice is what its caller should do:
//! back off and honour pushback for a quota, retry the call as it is for a
//! dependency that did not answer, restart the read-modify-write for a lost
//! compare-and-set, and wait for the state to change for an archived book.

use proto::status::Code;

pub use crate::given::ch07::GreetError;

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
}
