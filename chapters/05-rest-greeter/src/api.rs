//! The HTTP surface of the Greeter.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{DefaultBodyLimit, State, rejection::BytesRejection},
    http::{HeaderMap, StatusCode, Version, header},
    routing::{get, post},
};
use grpc_server::{CallStats, check_request, greeting};
use proto::status::Code;
use serde::{Deserialize, Serialize};

use crate::{
    guard::{BODY_TIMEOUT, is_body_timeout},
    problem::Problem,
};

/// The largest request body accepted. A greeting is well under 1 KiB; the
/// limit stops a client from making us buffer megabytes before we can say no.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

// ANCHOR: request
/// `POST /v1/greetings` body. Unknown fields are refused: a misspelt
/// `"delayms"` should be an error, not a silent zero. (Protocol Buffers makes
/// the opposite choice, on purpose: see chapter 5.)
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GreetingRequest {
    pub name: String,
    #[serde(default)]
    pub delay_ms: u32,
}
// ANCHOR_END: request

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GreetingReply {
    pub message: String,
}

#[derive(Clone, Default)]
pub struct AppState {
    pub stats: Arc<CallStats>,
    /// Set when shutdown starts, so `/healthz` tells load balancers to go away.
    pub draining: Arc<AtomicBool>,
}

// ANCHOR: router
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/greetings", post(create_greeting))
        .route("/healthz", get(health))
        .fallback(|| async {
            Problem::new(
                Code::NotFound,
                StatusCode::NOT_FOUND,
                "no such resource; try POST /v1/greetings",
            )
        })
        // The resource exists, the operation does not: UNIMPLEMENTED, as gRPC
        // says of an unknown method, with HTTP's more precise 405.
        .method_not_allowed_fallback(|| async {
            Problem::new(
                Code::Unimplemented,
                StatusCode::METHOD_NOT_ALLOWED,
                "this resource does not support that method",
            )
        })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}
// ANCHOR_END: router

// ANCHOR: create_greeting
async fn create_greeting(
    State(state): State<AppState>,
    version: Version,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<GreetingReply>, Problem> {
    let request = decode(&headers, body)?;
    check_request(&request.name, request.delay_ms).map_err(Problem::from)?;

    // HTTP has no standard deadline header. All the server can learn is that
    // the client went away, and only when hyper notices and drops this future.
    let call = state.stats.start(protocol_label(version), None);
    // No timer for a zero delay: Tokio's 1 ms tick would add a millisecond (chapter 10).
    if request.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(request.delay_ms.into())).await;
    }
    call.finish();

    Ok(Json(GreetingReply {
        message: greeting(&request.name),
    }))
}
// ANCHOR_END: create_greeting

async fn health(State(state): State<AppState>) -> (StatusCode, Json<serde_json::Value>) {
    if state.draining.load(Ordering::Relaxed) {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({ "status": "NOT_SERVING" })),
        )
    } else {
        (
            StatusCode::OK,
            Json(serde_json::json!({ "status": "SERVING" })),
        )
    }
}

fn protocol_label(version: Version) -> &'static str {
    match version {
        Version::HTTP_2 => "REST POST /v1/greetings (HTTP/2)",
        Version::HTTP_11 => "REST POST /v1/greetings (HTTP/1.1)",
        _ => "REST POST /v1/greetings",
    }
}

// ANCHOR: decode
/// Turns a request into a [`GreetingRequest`], or into the problem that says
/// exactly what was wrong: the media type (415), the size (413), a body that
/// stopped arriving (408), the JSON syntax (400) or a field (422, naming it).
fn decode(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<GreetingRequest, Problem> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !is_json(content_type) {
        let got = if content_type.is_empty() {
            "no Content-Type".to_string()
        } else {
            format!("`{content_type}`")
        };
        return Err(Problem::new(
            Code::InvalidArgument,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("expected `Content-Type: application/json`, got {got}"),
        ));
    }
    let body = body.map_err(|rejection| {
        let status = rejection.status();
        if is_body_timeout(&rejection) {
            // The client stopped sending part-way (guard::BODY_TIMEOUT).
            Problem::new(
                Code::DeadlineExceeded,
                StatusCode::REQUEST_TIMEOUT,
                format!("the request body did not arrive within {BODY_TIMEOUT:?}"),
            )
        } else if status == StatusCode::PAYLOAD_TOO_LARGE {
            // What gRPC specifies for a message over the size limit.
            Problem::new(
                Code::ResourceExhausted,
                status,
                format!("request body is larger than the {MAX_BODY_BYTES}-byte limit"),
            )
        } else {
            Problem::new(Code::InvalidArgument, status, rejection.body_text())
        }
    })?;

    let mut json = serde_json::Deserializer::from_slice(&body);
    let request: GreetingRequest = serde_path_to_error::deserialize(&mut json).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return Problem::invalid_argument(
                StatusCode::BAD_REQUEST,
                None,
                format!("malformed JSON: {inner}"),
            );
        }
        // serde reports a missing field at the enclosing object ("."), naming
        // the field only in its message; a wrong type at the field's own path.
        let field = if path == "." {
            field_named_in(&inner.to_string())
        } else {
            Some(path)
        };
        let detail = match &field {
            Some(f) if !inner.to_string().contains(&format!("`{f}`")) => format!("{f}: {inner}"),
            _ => inner.to_string(),
        };
        Problem::invalid_argument(StatusCode::UNPROCESSABLE_ENTITY, field, detail)
    })?;
    json.end().map_err(|e| {
        Problem::invalid_argument(
            StatusCode::BAD_REQUEST,
            None,
            format!("malformed JSON: {e}"),
        )
    })?;
    Ok(request)
}
// ANCHOR_END: decode

fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The first back-quoted word of a serde message ("missing field `name`").
fn field_named_in(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(message[start..start + len].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(content_type: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, content_type.parse().unwrap());
        h
    }

    fn decode_str(body: &str) -> Result<GreetingRequest, Problem> {
        decode(
            &headers("application/json"),
            Ok(Bytes::from(body.to_string())),
        )
    }

    #[test]
    fn decodes_a_greeting_with_and_without_delay() {
        let r = decode_str(r#"{"name":"Ada","delay_ms":800}"#).unwrap();
        assert_eq!((r.name.as_str(), r.delay_ms), ("Ada", 800));
        assert_eq!(decode_str(r#"{"name":"Ada"}"#).unwrap().delay_ms, 0);
    }

    #[test]
    fn names_the_field_for_missing_wrong_type_and_unknown() {
        let missing = decode_str(r#"{"delay_ms":5}"#).unwrap_err();
        assert_eq!(
            (missing.status, missing.field.as_deref()),
            (422, Some("name"))
        );

        let wrong = decode_str(r#"{"name":"Ada","delay_ms":"soon"}"#).unwrap_err();
        assert_eq!(
            (wrong.status, wrong.field.as_deref()),
            (422, Some("delay_ms"))
        );
        assert!(
            wrong.detail.starts_with("delay_ms: invalid type"),
            "{}",
            wrong.detail
        );

        let negative = decode_str(r#"{"name":"Ada","delay_ms":-1}"#).unwrap_err();
        assert_eq!(negative.field.as_deref(), Some("delay_ms"));

        let unknown = decode_str(r#"{"name":"Ada","delayms":5}"#).unwrap_err();
        assert_eq!(
            (unknown.status, unknown.field.as_deref()),
            (422, Some("delayms"))
        );
    }

    #[test]
    fn malformed_json_is_a_400() {
        for body in [r#"{"name":"#, "not json", r#"{"name":"Ada"} trailing"#, ""] {
            let p = decode_str(body).unwrap_err();
            assert_eq!(p.status, 400, "{body:?}: {p:?}");
            assert!(p.detail.starts_with("malformed JSON"), "{}", p.detail);
        }
    }

    #[test]
    fn only_json_media_types_are_accepted() {
        for ok in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/merge+json",
        ] {
            assert!(is_json(ok), "{ok}");
        }
        for bad in [
            "",
            "text/plain",
            "application/x-www-form-urlencoded",
            "application/jsonp",
        ] {
            assert!(!is_json(bad), "{bad}");
        }
        let p = decode(&headers("text/plain"), Ok(Bytes::from_static(b"{}"))).unwrap_err();
        assert_eq!(p.status, 415);
        assert!(p.detail.contains("text/plain"), "{}", p.detail);
    }
}
