//! The 17 gRPC status codes, in one table that everything else reads (chapter 7).
//!
//! The gRPC client prints its `meaning:` line from here, the REST server takes
//! its problem `type` and `title` from here, and the book's table is generated
//! from here (`cargo run -p proto --bin status_table`), so none of them can say
//! something different from the others.
//!
//! The HTTP column is Google's mapping of `google.rpc.Code` to HTTP (the one its
//! HTTP/JSON gateways use). The retry column follows gRPC's own guidance: the
//! status code documentation, the comments of `google.rpc.Code`, and the retry
//! design, in which only codes the client lists are retried, UNAVAILABLE being
//! the one that is safe by default.

pub use tonic::Code;

// ANCHOR: retry
/// Whether a caller may send the same call again after this code, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Retry {
    /// `OK`: there is nothing to retry.
    NotAnError,
    /// The same request will get the same answer. Fix the request, the caller
    /// or the data instead.
    Never,
    /// Usually transient: retry with exponential backoff and jitter, within the
    /// caller's overall deadline. For a call that changes state, only if it is
    /// idempotent or the server certainly never saw it.
    WithBackoff,
    /// The server (or a quota) asked the caller to slow down: retry only with
    /// backoff, honouring any pushback the server sent, within a retry budget.
    /// Retrying at once adds load exactly where there is too much.
    OnlyWithPushback,
    /// The server may have done the work: retry only an idempotent call, and
    /// only while the caller's overall deadline (shared by all attempts) lasts.
    OnlyIfIdempotent,
    /// Not this call on its own: restart the read-modify-write sequence it was
    /// part of, from the read.
    WholeSequence,
    /// Not until something else changes: fresh credentials, or the system
    /// state the call needs (a file that has grown, a directory emptied).
    AfterFix,
}
// ANCHOR_END: retry

impl Retry {
    /// The short verdict the book's table and the client print.
    pub fn verdict(self) -> &'static str {
        match self {
            Retry::NotAnError => "not an error",
            Retry::Never => "no",
            Retry::WithBackoff => "yes, with backoff",
            Retry::OnlyWithPushback => "only with backoff, honouring pushback",
            Retry::OnlyIfIdempotent => "only if idempotent, within the overall deadline",
            Retry::WholeSequence => "retry the whole read-modify-write, not the call",
            Retry::AfterFix => "not until the cause changes (credentials, state)",
        }
    }
}

// ANCHOR: info
/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusInfo {
    pub code: Code,
    /// The name every gRPC implementation prints, e.g. `INVALID_ARGUMENT`.
    pub name: &'static str,
    /// A short human title, used as the REST problem `title`.
    pub title: &'static str,
    /// What the code tells the caller about its call.
    pub meaning: &'static str,
    /// The HTTP status Google's mapping gives this code.
    pub http: u16,
    pub retry: Retry,
    /// Who typically produces it: the gRPC library (on which side) or the
    /// application.
    pub producer: &'static str,
}
// ANCHOR_END: info

/// Every code, indexed by its number.
pub const TABLE: [StatusInfo; 17] = [
    StatusInfo {
        code: Code::Ok,
        name: "OK",
        title: "OK",
        meaning: "The call succeeded and the reply is complete.",
        http: 200,
        retry: Retry::NotAnError,
        producer: "the server's handler, by returning a reply",
    },
    StatusInfo {
        code: Code::Cancelled,
        name: "CANCELLED",
        title: "Cancelled",
        meaning: "The call was cancelled before it completed, usually by the caller's side; whether the server did the work is unknown.",
        http: 499,
        retry: Retry::Never,
        producer: "the library on either side, when the client cancels the call; tonic also uses it for an expired grpc-timeout and for a call whose connection closed under it",
    },
    StatusInfo {
        code: Code::Unknown,
        name: "UNKNOWN",
        title: "Unknown",
        meaning: "The call failed and nobody said why; treat the outcome, including any side effects, as unknown.",
        http: 500,
        retry: Retry::Never,
        producer: "the server library, when a handler fails without a status; the client library, when a status cannot be parsed",
    },
    StatusInfo {
        code: Code::InvalidArgument,
        name: "INVALID_ARGUMENT",
        title: "Invalid argument",
        meaning: "The request itself is wrong, whatever the state of the server; the same request will fail again.",
        http: 400,
        retry: Retry::Never,
        producer: "the application, when it validates the request",
    },
    StatusInfo {
        code: Code::DeadlineExceeded,
        name: "DEADLINE_EXCEEDED",
        title: "Deadline exceeded",
        meaning: "The deadline passed before the reply arrived. The server may still have done the work.",
        http: 504,
        retry: Retry::OnlyIfIdempotent,
        producer: "the library on either side, when the deadline passes (tonic says CANCELLED instead; this workshop's servers correct it)",
    },
    StatusInfo {
        code: Code::NotFound,
        name: "NOT_FOUND",
        title: "Not found",
        meaning: "Something the request names does not exist, or not for this caller.",
        http: 404,
        retry: Retry::Never,
        producer: "the application",
    },
    StatusInfo {
        code: Code::AlreadyExists,
        name: "ALREADY_EXISTS",
        title: "Already exists",
        meaning: "What the request would create exists already.",
        http: 409,
        retry: Retry::Never,
        producer: "the application",
    },
    StatusInfo {
        code: Code::PermissionDenied,
        name: "PERMISSION_DENIED",
        title: "Permission denied",
        meaning: "The server knows who is calling, and that caller may not do this.",
        http: 403,
        retry: Retry::Never,
        producer: "the application or its authorization layer",
    },
    StatusInfo {
        code: Code::ResourceExhausted,
        name: "RESOURCE_EXHAUSTED",
        title: "Resource exhausted",
        meaning: "A limit was reached: a quota, a rate, the server's capacity, or a message size. Slow down, or send less.",
        http: 429,
        retry: Retry::OnlyWithPushback,
        producer: "the server library or middleware (load shedding, message size limits); the application, for quotas",
    },
    StatusInfo {
        code: Code::FailedPrecondition,
        name: "FAILED_PRECONDITION",
        title: "Failed precondition",
        meaning: "The system is not in a state that allows this call; it will keep failing until that state changes.",
        http: 400,
        retry: Retry::AfterFix,
        producer: "the application",
    },
    StatusInfo {
        code: Code::Aborted,
        name: "ABORTED",
        title: "Aborted",
        meaning: "The call lost a conflict with another (a transaction abort, a failed compare-and-set).",
        http: 409,
        retry: Retry::WholeSequence,
        producer: "the application",
    },
    StatusInfo {
        code: Code::OutOfRange,
        name: "OUT_OF_RANGE",
        title: "Out of range",
        meaning: "The request reaches past a valid range (say, past the end of a file); it may succeed once the range grows.",
        http: 400,
        retry: Retry::AfterFix,
        producer: "the application; tonic also uses it for a message over the size limit, where gRPC specifies RESOURCE_EXHAUSTED (this workshop's servers answer that)",
    },
    StatusInfo {
        code: Code::Unimplemented,
        name: "UNIMPLEMENTED",
        title: "Unimplemented",
        meaning: "The server does not offer this method or feature: a wrong name, or an older server.",
        http: 501,
        retry: Retry::Never,
        producer: "the server library, for an unknown service or method",
    },
    StatusInfo {
        code: Code::Internal,
        name: "INTERNAL",
        title: "Internal",
        meaning: "Something that should never break did (an invariant, a protocol rule, a message that would not decode): a bug, not a condition to wait out.",
        http: 500,
        retry: Retry::Never,
        producer: "the library on either side, for protocol and decoding errors; the application, for its bugs",
    },
    StatusInfo {
        code: Code::Unavailable,
        name: "UNAVAILABLE",
        title: "Unavailable",
        meaning: "The service could not be reached or is not serving right now (nothing listening, connection lost, shutting down). Usually transient.",
        http: 503,
        retry: Retry::WithBackoff,
        producer: "the client library, when it cannot connect or the connection breaks; a server that is shutting down",
    },
    StatusInfo {
        code: Code::DataLoss,
        name: "DATA_LOSS",
        title: "Data loss",
        meaning: "Data was lost or corrupted beyond recovery.",
        http: 500,
        retry: Retry::Never,
        producer: "the application",
    },
    StatusInfo {
        code: Code::Unauthenticated,
        name: "UNAUTHENTICATED",
        title: "Unauthenticated",
        meaning: "The call carried no valid credentials (missing, expired or wrong), so the server does not know who is calling.",
        http: 401,
        retry: Retry::AfterFix,
        producer: "the application's or a proxy's authentication layer; the library, for unusable credential metadata",
    },
];

impl StatusInfo {
    /// The code's number, as sent in `grpc-status`.
    pub fn number(&self) -> i32 {
        self.code as i32
    }

    /// The HTTP status with its reason phrase: `504 Gateway Timeout`. 499 is
    /// not in the HTTP standard; it is nginx's "client closed request", which
    /// Google's mapping borrows.
    pub fn http_label(&self) -> String {
        let reason = match self.http {
            200 => "OK",
            400 => "Bad Request",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "Not Found",
            409 => "Conflict",
            429 => "Too Many Requests",
            499 => "Client Closed Request",
            500 => "Internal Server Error",
            501 => "Not Implemented",
            503 => "Service Unavailable",
            504 => "Gateway Timeout",
            _ => "",
        };
        format!("{} {reason}", self.http).trim_end().to_string()
    }

    /// The name in kebab case: `invalid-argument`.
    pub fn slug(&self) -> String {
        self.name.to_ascii_lowercase().replace('_', "-")
    }

    /// The REST problem `type` for this code: `/problems/invalid-argument`.
    pub fn problem_type(&self) -> String {
        format!("{PROBLEM_TYPE_PREFIX}{}", self.slug())
    }
}

/// Problem types are relative URIs under this path (RFC 9457 allows relative
/// references; they resolve against the API's own address).
pub const PROBLEM_TYPE_PREFIX: &str = "/problems/";

/// The row for a code.
pub fn info(code: Code) -> &'static StatusInfo {
    // TABLE is indexed by number, and a test checks that it is.
    &TABLE[code as usize]
}

/// The row whose name is `name` (`"UNAVAILABLE"`), if any.
pub fn by_name(name: &str) -> Option<&'static StatusInfo> {
    TABLE.iter().find(|row| row.name == name)
}

/// The row whose problem type is `problem_type` (`"/problems/unavailable"`), if
/// any: the way back from a REST problem to a gRPC code.
pub fn from_problem_type(problem_type: &str) -> Option<&'static StatusInfo> {
    let slug = problem_type.strip_prefix(PROBLEM_TYPE_PREFIX)?;
    TABLE.iter().find(|row| row.slug() == slug)
}

/// The table as Markdown, exactly as `book/src/generated/status-codes.md`
/// holds it: two tables, so that each fits a page's width.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "<!-- Generated by `cargo xtask status-table` from \
         chapters/02-protobuf/src/status.rs; do not edit. -->\n\n\
         | # | code | what it means to the caller | HTTP | retry? |\n\
         |--:|------|-----------------------------|------|--------|\n",
    );
    for row in &TABLE {
        out.push_str(&format!(
            "| {} | `{}` | {} | {} | {} |\n",
            row.number(),
            row.name,
            row.meaning,
            row.http_label(),
            row.retry.verdict(),
        ));
    }
    out.push_str(
        "\nWho typically produces each code, the gRPC library (on which side) or the \
         application:\n\n| code | typically produced by |\n|------|-----------------------|\n",
    );
    for row in &TABLE {
        out.push_str(&format!("| `{}` | {} |\n", row.name, row.producer));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_indexed_by_number_and_matches_tonic() {
        for (number, row) in TABLE.iter().enumerate() {
            assert_eq!(row.number(), number as i32, "{row:?}");
            assert_eq!(Code::from_i32(number as i32), row.code, "{row:?}");
            // tonic's Debug name (`InvalidArgument`) is our name in another case.
            assert_eq!(
                format!("{:?}", row.code).to_ascii_lowercase(),
                row.name.replace('_', "").to_ascii_lowercase()
            );
        }
    }

    #[test]
    fn every_code_has_a_meaning_a_producer_an_http_status_and_a_verdict() {
        for row in &TABLE {
            assert!(row.meaning.ends_with('.'), "{row:?}");
            assert!(!row.producer.is_empty(), "{row:?}");
            assert!((200..600).contains(&row.http), "{row:?}");
            assert!(row.http_label().len() > 4, "no reason phrase: {row:?}");
            assert!(!row.retry.verdict().is_empty(), "{row:?}");
            assert!(!row.meaning.contains('|') && !row.producer.contains('|'));
            assert_eq!(row.retry == Retry::NotAnError, row.code == Code::Ok);
        }
    }

    #[test]
    fn google_rpc_http_mapping() {
        let expected = [
            200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401,
        ];
        let actual: Vec<u16> = TABLE.iter().map(|row| row.http).collect();
        assert_eq!(actual, expected);
    }

    #[test]
    fn retry_verdicts_follow_grpc_guidance() {
        assert_eq!(info(Code::Unavailable).retry, Retry::WithBackoff);
        assert_eq!(info(Code::ResourceExhausted).retry, Retry::OnlyWithPushback);
        assert_eq!(info(Code::DeadlineExceeded).retry, Retry::OnlyIfIdempotent);
        assert_eq!(info(Code::Aborted).retry, Retry::WholeSequence);
        for never in [Code::InvalidArgument, Code::NotFound, Code::Unimplemented] {
            assert_eq!(info(never).retry, Retry::Never, "{never:?}");
        }
        // Only UNAVAILABLE is a plain "yes".
        let plain_yes: Vec<_> = TABLE
            .iter()
            .filter(|row| row.retry == Retry::WithBackoff)
            .map(|row| row.name)
            .collect();
        assert_eq!(plain_yes, ["UNAVAILABLE"]);
    }

    #[test]
    fn names_and_problem_types_lead_back_to_their_row() {
        for row in &TABLE {
            assert_eq!(by_name(row.name), Some(row));
            assert_eq!(from_problem_type(&row.problem_type()), Some(row));
        }
        assert_eq!(
            info(Code::InvalidArgument).problem_type(),
            "/problems/invalid-argument"
        );
        assert_eq!(from_problem_type("about:blank"), None);
        assert_eq!(from_problem_type("/problems/no-such-code"), None);
    }
}
