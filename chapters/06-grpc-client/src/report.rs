//! What a failed call looks like to the reader: the code, the server's
//! message, and what the code means, all read from `proto::status`; then any
//! richer error details the server attached (google.rpc's standard messages).

use std::{error::Error as _, fmt, time::Duration};

use proto::status;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::cli::{DEFAULT_TARGET, Seconds};

/// A call's failure, as the client reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: Code,
    pub details: String,
    /// The status's error details, decoded, one printed line each
    /// ([`detail_lines`]); empty when it carried none.
    pub error_details: Vec<String>,
    /// What to do next, when the failure has one usual cause
    /// ([`Failure::with_next_step`]).
    pub next: Option<String>,
}

impl Failure {
    // ANCHOR: deadline_rule
    /// The failure a call's `status` stands for, given the deadline the call
    /// was sent with and the time from just before the call was started until
    /// the status arrived.
    ///
    /// tonic's client ends a call whose `grpc-timeout` has run out with
    /// CANCELLED "Timeout expired", where the gRPC specification says
    /// DEADLINE_EXCEEDED (a tonic server does the same, unless it corrects it
    /// as this workshop's servers do). The client cannot tell from the
    /// status alone whether its deadline passed or something cancelled the
    /// call, but it knows its own deadline and its own clock, so the rule is:
    ///
    /// *CANCELLED, on a call that had a deadline, arriving when at least the
    /// whole deadline has passed since the call started, is DEADLINE_EXCEEDED.*
    ///
    /// Every timer involved (ours, or the server's, which starts later) can
    /// only fire after that much time, so an expired deadline always matches.
    /// A CANCELLED before the deadline is left alone: something else ended the
    /// call. One that arrives after the deadline for another reason is still
    /// reported as DEADLINE_EXCEEDED, which is what the specification asks for
    /// once the deadline has passed. The message says the code was translated.
    pub fn from_status(status: &Status, deadline: Option<Seconds>, elapsed: Duration) -> Failure {
        if status.code() == Code::Cancelled
            && let Some(deadline) = deadline
            && elapsed >= deadline.duration
        {
            return Failure {
                code: Code::DeadlineExceeded,
                details: format!(
                    "{} (tonic reported CANCELLED; the {deadline} deadline had passed)",
                    message_of(status)
                ),
                error_details: detail_lines(&status.get_error_details()),
                next: None,
            };
        }
        Failure {
            code: status.code(),
            details: message_of(status),
            error_details: detail_lines(&status.get_error_details()),
            next: None,
        }
    }

    /// A failure this client found for itself: no status, so no details.
    pub fn new(code: Code, details: impl Into<String>) -> Failure {
        Failure {
            code,
            details: details.into(),
            error_details: Vec::new(),
            next: None,
        }
    }
    // ANCHOR_END: deadline_rule

    /// An eager connect that failed: no call was made, and the channel is
    /// unusable, which is what UNAVAILABLE means.
    pub fn connect(error: &tonic::transport::Error) -> Failure {
        Failure::new(Code::Unavailable, chain(error))
    }

    /// UNAVAILABLE's meaning ("usually transient, retry") is right for a
    /// server that went away; a refused connection to a server that was never
    /// started is the reader's usual case, and retrying will not fix it.
    pub fn with_next_step(mut self, target: &str) -> Failure {
        if self.code == Code::Unavailable && self.details.contains("Connection refused") {
            self.next = Some(refused_next_step(
                target,
                target == DEFAULT_TARGET,
                "start the server, or check --target (GRPC_TARGET)",
            ));
        }
        self
    }
}

/// The `next:` line for a refused connection, gRPC's or REST's: at the
/// stack's own address (`ours`), start the stack; elsewhere, `elsewhere`.
pub fn refused_next_step(at: &str, ours: bool, elsewhere: &str) -> String {
    let start = if ours {
        "start the stack with `cargo run` in another terminal"
    } else {
        elsewhere
    };
    format!("nothing is listening at {at}: {start}, then try again")
}

// ANCHOR: display
impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let row = status::info(self.code);
        writeln!(f, "RPC failed: {}", row.name)?;
        writeln!(f, "  details: {}", self.details)?;
        write!(f, "  meaning: {} (REST: {})", row.meaning, row.http_label())?;
        for line in &self.error_details {
            write!(f, "\n  {line}")?;
        }
        if let Some(next) = &self.next {
            write!(f, "\n  next: {next}")?;
        }
        Ok(())
    }
}
// ANCHOR_END: display

// ANCHOR: detail_lines
/// What a caller can act on in google.rpc's standard details, a line each:
/// which field to fix, how long to wait, which quota ran out, and the
/// machine-readable reason. Details this client has no use for are named, so
/// the reader knows they were there. The REST client prints a problem's
/// violations through here too, so both protocols read alike.
pub fn detail_lines(details: &ErrorDetails) -> Vec<String> {
    let mut lines = Vec::new();
    for v in details
        .bad_request()
        .map_or(&[][..], |d| &d.field_violations)
    {
        let reason = match v.reason.as_str() {
            "" => String::new(),
            reason => format!(" ({reason})"),
        };
        lines.push(format!("bad field: {}: {}{reason}", v.field, v.description));
    }
    if let Some(retry) = details.retry_info() {
        lines.push(match retry.retry_delay {
            Some(delay) => format!("retry after: {delay:?}"),
            None => "retry info: no delay given".into(),
        });
    }
    for v in details.quota_failure().map_or(&[][..], |d| &d.violations) {
        lines.push(format!("quota exceeded: {}: {}", v.subject, v.description));
    }
    if let Some(info) = details.error_info() {
        // Sorted: the metadata is a map, and the line should not shuffle.
        let metadata: std::collections::BTreeMap<_, _> = info.metadata.iter().collect();
        let mut line = format!("reason: {} (domain {})", info.reason, info.domain);
        for (key, value) in metadata {
            line.push_str(&format!(", {key}={value}"));
        }
        lines.push(line);
    }
    let others = [
        ("DebugInfo", details.debug_info().is_some()),
        (
            "PreconditionFailure",
            details.precondition_failure().is_some(),
        ),
        ("RequestInfo", details.request_info().is_some()),
        ("ResourceInfo", details.resource_info().is_some()),
        ("Help", details.help().is_some()),
        ("LocalizedMessage", details.localized_message().is_some()),
    ];
    for (name, _) in others.iter().filter(|(_, present)| *present) {
        lines.push(format!("also attached: {name}"));
    }
    lines
}
// ANCHOR_END: detail_lines

/// The status message and, when tonic kept the error behind it and that says
/// more ("Connection refused" behind "tcp connect error"), its root cause.
fn message_of(status: &Status) -> String {
    let mut text = status.message().to_string();
    let mut root = None;
    let mut source = status.source();
    while let Some(error) = source {
        root = Some(error.to_string());
        source = error.source();
    }
    if let Some(root) = root.filter(|root| !text.contains(root.as_str())) {
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&root);
    }
    if text.is_empty() {
        text = "(the server sent no message)".into();
    }
    text
}

/// An error and its sources on one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let more = inner.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_secs;

    fn half_second() -> Option<Seconds> {
        Some(parse_secs("0.5").unwrap())
    }

    #[test]
    fn cancelled_after_the_deadline_is_deadline_exceeded() {
        let status = Status::cancelled("Timeout expired");
        let failure = Failure::from_status(&status, half_second(), Duration::from_millis(501));
        assert_eq!(failure.code, Code::DeadlineExceeded);
        assert!(
            failure
                .details
                .starts_with("Timeout expired (tonic reported CANCELLED")
        );
        assert!(
            failure.details.contains("0.5s deadline"),
            "{}",
            failure.details
        );
    }

    #[test]
    fn cancelled_before_the_deadline_or_without_one_stays_cancelled() {
        let status = Status::cancelled("stream reset");
        for (deadline, elapsed) in [(half_second(), 499), (None, 10_000)] {
            let failure = Failure::from_status(&status, deadline, Duration::from_millis(elapsed));
            assert_eq!(failure.code, Code::Cancelled);
            assert_eq!(failure.details, "stream reset");
        }
    }

    #[test]
    fn other_codes_pass_through_even_after_the_deadline() {
        let status = Status::unavailable("connection refused");
        let failure = Failure::from_status(&status, half_second(), Duration::from_secs(1));
        assert_eq!(failure.code, Code::Unavailable);
    }

    #[test]
    fn the_report_has_three_lines_from_the_table() {
        let failure = Failure::new(Code::DeadlineExceeded, "Timeout expired");
        let text = failure.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "RPC failed: DEADLINE_EXCEEDED");
        assert_eq!(lines[1], "  details: Timeout expired");
        assert_eq!(
            lines[2],
            format!(
                "  meaning: {} (REST: 504 Gateway Timeout)",
                status::info(Code::DeadlineExceeded).meaning
            )
        );
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn a_bad_request_is_printed_after_the_three_lines() {
        let err = grpc_server::check_request("", 0).unwrap_err();
        let failure = Failure::from_status(&err.to_status(), None, Duration::ZERO);
        let text = failure.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "RPC failed: INVALID_ARGUMENT");
        assert_eq!(lines[1], "  details: name: must not be empty");
        assert_eq!(
            lines[3..],
            [
                "  bad field: name: must not be empty (NAME_EMPTY)",
                "  reason: NAME_EMPTY (domain greeter.workshop.example)",
            ]
        );
    }

    #[test]
    fn an_overload_refusal_prints_its_delay_quota_and_reason() {
        let mut details = ErrorDetails::with_retry_info(Some(Duration::from_millis(1500)));
        details
            .add_quota_failure_violation("connection", "2 calls at a time")
            .set_error_info(
                "OVERLOADED",
                "overload.workshop.example",
                [
                    ("queued".to_string(), "8".to_string()),
                    ("limit".into(), "2".into()),
                ],
            )
            .set_debug_info(Vec::<String>::new(), "queue full");
        let status = Status::with_error_details(Code::ResourceExhausted, "no room", details);
        let failure = Failure::from_status(&status, None, Duration::ZERO);
        assert_eq!(
            failure.error_details,
            [
                "retry after: 1.5s",
                "quota exceeded: connection: 2 calls at a time",
                "reason: OVERLOADED (domain overload.workshop.example), limit=2, queued=8",
                "also attached: DebugInfo",
            ]
        );
    }

    #[test]
    fn a_refused_connection_says_what_to_start() {
        let refused = || {
            Failure::from_status(
                &Status::unavailable("tcp connect error: Connection refused (os error 111)"),
                None,
                Duration::ZERO,
            )
        };
        let text = refused().with_next_step(DEFAULT_TARGET).to_string();
        assert_eq!(
            text.lines().last().unwrap(),
            "  next: nothing is listening at https://localhost:50051: start the stack \
             with `cargo run` in another terminal, then try again"
        );
        let other = refused().with_next_step("https://10.0.0.7:50051");
        assert!(other.next.unwrap().contains("check --target"));
        // A server that answered UNAVAILABLE itself is left with the table's meaning.
        let shed = Failure::new(Code::Unavailable, "draining").with_next_step(DEFAULT_TARGET);
        assert_eq!(shed.next, None);
    }

    #[test]
    fn a_status_without_details_prints_only_the_three_lines() {
        let failure = Failure::from_status(&Status::unavailable("gone"), None, Duration::ZERO);
        assert!(failure.error_details.is_empty());
        assert_eq!(failure.to_string().lines().count(), 3);
    }
}
