//! Problem details (RFC 9457): the one shape every error of this API takes.

use axum::{
    Json,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};

pub const CONTENT_TYPE: &str = "application/problem+json";

/// The problem type of a request this API understood but refuses. Other errors
/// (no such route, wrong method, body too large, not JSON) are plain HTTP
/// conditions and use `about:blank`, whose title is the status's reason phrase.
pub const INVALID_ARGUMENT: &str = "/problems/invalid-argument";

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
}

impl Problem {
    /// A plain HTTP condition: `type` is `about:blank`, `title` the reason phrase.
    pub fn http(status: StatusCode, detail: impl Into<String>) -> Self {
        Problem {
            kind: "about:blank".into(),
            title: status.canonical_reason().unwrap_or("Error").into(),
            status: status.as_u16(),
            detail: detail.into(),
            field: None,
        }
    }

    /// The request was understood, but a field's value is not acceptable.
    pub fn invalid_argument(
        status: StatusCode,
        field: Option<String>,
        detail: impl Into<String>,
    ) -> Self {
        Problem {
            kind: INVALID_ARGUMENT.into(),
            title: "Invalid argument".into(),
            status: status.as_u16(),
            detail: detail.into(),
            field,
        }
    }
}

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
