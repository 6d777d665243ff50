//! Problem details (RFC 9457): the one shape every error of this API takes.

use axum::{
    Json,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use grpc_server::InvalidRequest;
use proto::status::{self, Code};
use serde::{Deserialize, Serialize};

pub const CONTENT_TYPE: &str = "application/problem+json";

/// The problem type of a request this API understood but refuses; every
/// problem type is `/problems/<code>`, from the gRPC status table.
pub const INVALID_ARGUMENT: &str = "/problems/invalid-argument";

// ANCHOR: problem
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// Extension member: the request field at fault, when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Extension member: what the gRPC server sends as google.rpc.BadRequest,
    /// one entry per field that broke a rule (chapter 7). A boxed slice, not a
    /// Vec: it never grows, and it keeps `Problem`, every handler's error, small.
    #[serde(default, skip_serializing_if = "<[Violation]>::is_empty")]
    pub violations: Box<[Violation]>,
}

/// One rule a request broke, with the same three parts as gRPC's
/// `BadRequest.FieldViolation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    pub field: String,
    pub description: String,
    pub reason: String,
}
// ANCHOR_END: problem

// ANCHOR: from_code
impl Problem {
    /// A problem whose `type` and `title` come from the gRPC status table
    /// (chapter 7), so a REST client and a gRPC client read the same kind of
    /// error the same way. `status` is the HTTP status actually sent: HTTP
    /// often has a more precise one than the table's (415, 413, 405), and the
    /// code says which kind of error it is.
    pub fn new(code: Code, status: StatusCode, detail: impl Into<String>) -> Self {
        let row = status::info(code);
        Problem {
            kind: row.problem_type(),
            title: row.title.into(),
            status: status.as_u16(),
            detail: detail.into(),
            field: None,
            violations: Box::default(),
        }
    }

    /// The gRPC code this problem stands for, read back from its `type`.
    pub fn code(&self) -> Option<Code> {
        status::from_problem_type(&self.kind).map(|row| row.code)
    }

    /// The request was understood, but a field's value is not acceptable.
    pub fn invalid_argument(
        status: StatusCode,
        field: Option<String>,
        detail: impl Into<String>,
    ) -> Self {
        Problem {
            field,
            ..Problem::new(Code::InvalidArgument, status, detail)
        }
    }
}
// ANCHOR_END: from_code

// ANCHOR: from_invalid
/// A request that broke one of the greeter's rules: the same field,
/// description and reason the gRPC server puts in its status details.
impl From<InvalidRequest> for Problem {
    fn from(e: InvalidRequest) -> Problem {
        let violation = Violation {
            field: e.field.into(),
            description: e.description.clone(),
            reason: e.reason.into(),
        };
        Problem {
            violations: Box::new([violation]),
            ..Problem::invalid_argument(
                StatusCode::BAD_REQUEST,
                Some(e.field.into()),
                e.to_string(),
            )
        }
    }
}
// ANCHOR_END: from_invalid

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, Json(self)).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_problem_details() {
        for row in &status::TABLE {
            let status =
                StatusCode::from_u16(row.http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let problem = Problem::new(row.code, status, "detail");
            assert_eq!(problem.title, row.title);
            assert!(
                problem.kind.starts_with(status::PROBLEM_TYPE_PREFIX),
                "{problem:?}"
            );
            // Through JSON, as a client receives it.
            let json = serde_json::to_string(&problem).unwrap();
            let back: Problem = serde_json::from_str(&json).unwrap();
            assert_eq!(back.code(), Some(row.code), "{json}");
        }
    }

    #[test]
    fn the_invalid_argument_type_is_the_tables() {
        let problem = Problem::invalid_argument(StatusCode::UNPROCESSABLE_ENTITY, None, "x");
        assert_eq!(problem.kind, INVALID_ARGUMENT);
        assert_eq!(problem.title, "Invalid argument");
        assert_eq!(problem.code(), Some(Code::InvalidArgument));
    }

    #[test]
    fn a_broken_rule_names_its_field_in_violations() {
        let err = grpc_server::check_request("", 0).unwrap_err();
        let problem = Problem::from(err.clone());
        assert_eq!(
            (problem.status, problem.code()),
            (400, Some(Code::InvalidArgument))
        );
        let json = serde_json::to_value(&problem).unwrap();
        assert_eq!(
            json["violations"],
            serde_json::json!([{
                "field": "name",
                "description": err.description,
                "reason": "NAME_EMPTY",
            }])
        );
        // Problems without violations keep the member out of the JSON.
        let plain = serde_json::to_value(Problem::new(Code::NotFound, StatusCode::NOT_FOUND, "x"));
        assert!(plain.unwrap().get("violations").is_none());
    }
}
