//! Chapter 7's exercise, `exercises::ch07::GreetError`: for each error, the
//! code a gRPC caller receives, the HTTP status and problem type a REST caller
//! receives (as the REST server's response, through JSON), and the retry
//! advice the chapter's table gives for that code.

use axum::{
    body::to_bytes,
    http::{StatusCode, header},
    response::IntoResponse,
};
use exercises::ch07::GreetError;
use proto::status::{self, Code, Retry};
use rest_server::Problem;

/// Every error, once.
fn every_error() -> [GreetError; 5] {
    [
        GreetError::InvalidName("must not be empty".into()),
        GreetError::QuotaExceeded { limit: 60 },
        GreetError::DirectoryUnavailable,
        GreetError::VersionConflict { read: 7, found: 8 },
        GreetError::BookArchived,
    ]
}

/// Checks that `error` is sent as `code`, over HTTP as `http`, and so is
/// retried as `retry`; `why` says what the caller should do, for the failure
/// message.
fn assert_mapped(error: GreetError, code: Code, http: u16, retry: Retry, why: &str) {
    let row = status::info(code);
    assert_eq!(
        error.code(),
        code,
        "still to do (ch07): {error:?} should be {} (HTTP {http}, retry: {}): {why}",
        row.name,
        retry.verdict()
    );
    assert_eq!(row.http, http, "the table's HTTP status for {}", row.name);
    assert_eq!(
        row.retry, retry,
        "the table's retry advice for {}",
        row.name
    );
    assert_eq!(error.to_status().code(), code, "the gRPC status");
    let problem = error.to_problem();
    assert_eq!(problem.status, http, "the REST problem's status");
    assert_eq!(problem.kind, row.problem_type(), "the REST problem's type");
}

#[test]
fn a_bad_name_is_invalid_argument() {
    assert_mapped(
        GreetError::InvalidName("must not be empty".into()),
        Code::InvalidArgument,
        400,
        Retry::Never,
        "the same name will be refused again",
    );
}

#[test]
fn a_used_up_quota_is_resource_exhausted() {
    assert_mapped(
        GreetError::QuotaExceeded { limit: 60 },
        Code::ResourceExhausted,
        429,
        Retry::OnlyWithPushback,
        "the caller must slow down; retrying at once spends quota it no longer has",
    );
}

#[test]
fn a_directory_that_did_not_answer_is_unavailable() {
    assert_mapped(
        GreetError::DirectoryUnavailable,
        Code::Unavailable,
        503,
        Retry::WithBackoff,
        "the call did nothing and may be sent again, as it is, after a backoff",
    );
}

#[test]
fn a_lost_compare_and_set_is_aborted() {
    assert_mapped(
        GreetError::VersionConflict { read: 7, found: 8 },
        Code::Aborted,
        409,
        Retry::WholeSequence,
        "resending the write repeats its stale version; the caller must read the \
         book again and redo its change",
    );
}

#[test]
fn an_archived_book_is_a_failed_precondition() {
    assert_mapped(
        GreetError::BookArchived,
        Code::FailedPrecondition,
        400,
        Retry::AfterFix,
        "nothing the caller sends helps until someone reopens the book",
    );
    // 400, like a bad name: over HTTP only the problem type tells them apart.
    let archived = GreetError::BookArchived.to_problem();
    let bad_name = GreetError::InvalidName("x".into()).to_problem();
    assert_eq!(archived.status, bad_name.status);
    assert_ne!(archived.code(), bad_name.code());
}

#[test]
fn only_the_directory_error_may_be_resent_as_it_is() {
    let resent: Vec<GreetError> = every_error()
        .into_iter()
        .filter(|error| status::info(error.code()).retry == Retry::WithBackoff)
        .collect();
    assert_eq!(
        resent,
        [GreetError::DirectoryUnavailable],
        "still to do (ch07): a caller following the table would resend all of \
         these unchanged, but only a directory that did not answer is worth \
         that; a quota needs pushback, a lost compare-and-set a fresh read, an \
         archived book a change of state"
    );
}

#[tokio::test]
async fn both_protocols_carry_the_same_code() {
    for error in every_error() {
        let code = error.code();
        let status = error.to_status();
        assert_eq!(status.code(), code, "{error:?} over gRPC");
        assert_eq!(status.message(), error.to_string(), "{error:?} over gRPC");

        // The REST server's response, as a client reads it.
        let response = error.to_problem().into_response();
        assert_eq!(
            response.status(),
            StatusCode::from_u16(status::info(code).http).unwrap(),
            "{error:?} over REST: the table's HTTP status for its code"
        );
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            rest_server::problem::CONTENT_TYPE
        );
        let body = to_bytes(response.into_body(), 64 * 1024).await.unwrap();
        let problem = problem_in(&body);
        assert_eq!(problem.code(), Some(code), "{error:?} over REST: the type");
        assert_eq!(problem.title, status::info(code).title);
        assert_eq!(problem.detail, error.to_string());
    }
}

/// The problem details in a response body, decoded as a client would.
fn problem_in(body: &[u8]) -> Problem {
    axum::Json::<Problem>::from_bytes(body)
        .unwrap_or_else(|e| panic!("a problem body: {e}"))
        .0
}
