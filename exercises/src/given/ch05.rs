//! Chapter 5's exercise, the part it gives: reading `x-deadline-ms`, and the
//! answer to a call whose deadline passed.

use std::time::Duration;

use axum::{
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use proto::status::Code;
use rest_server::Problem;

/// The request header that carries the caller's deadline, in milliseconds
/// from when the server reads it.
pub const DEADLINE_HEADER: &str = "x-deadline-ms";

/// The longest deadline accepted: five minutes, far beyond the longest
/// greeting (`grpc_server::MAX_DELAY_MS`). A larger value is a client's bug
/// (microseconds sent as milliseconds, say), better refused than obeyed.
pub const MAX_DEADLINE: Duration = Duration::from_secs(300);

/// The deadline the request asks for: `None` without the header, a 400
/// problem naming the header if its value is not a whole number of
/// milliseconds from 1 to [`MAX_DEADLINE`].
pub fn parse_deadline(headers: &HeaderMap) -> Result<Option<Duration>, Problem> {
    let max_ms = MAX_DEADLINE.as_millis();
    let bad = |what: String| {
        Problem::invalid_argument(
            StatusCode::BAD_REQUEST,
            Some(DEADLINE_HEADER.into()),
            format!(
                "{DEADLINE_HEADER} {what}; expected a whole number of milliseconds \
                 from 1 to {max_ms}"
            ),
        )
    };
    let mut values = headers.get_all(DEADLINE_HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    // Two values (a proxy that appended its own, say) leave no way to tell
    // which one the caller meant.
    if values.next().is_some() {
        return Err(bad("appears more than once".into()));
    }
    let text = value
        .to_str()
        .map_err(|_| bad("is not visible ASCII".into()))?;
    // Digits only: `u64::from_str` would also take a leading `+`.
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(format!("is `{text}`")));
    }
    // All digits, so the parse can only fail by overflowing.
    match text.parse::<u128>() {
        // Zero would be a call that expired before it arrived: an unset
        // variable on the client, not a request to answer 504 at once.
        Ok(ms) if ms == 0 || ms > max_ms => Err(bad(format!("is {text}"))),
        Ok(ms) => Ok(Some(Duration::from_millis(ms as u64))),
        Err(_) => Err(bad(format!("is {text}"))),
    }
}

/// The answer to a call whose deadline passed before its handler was done.
pub fn expired(budget: Duration) -> Response {
    Problem::new(
        Code::DeadlineExceeded,
        StatusCode::GATEWAY_TIMEOUT,
        format!(
            "the {} ms of {DEADLINE_HEADER} passed before the answer was ready",
            budget.as_millis()
        ),
    )
    .into_response()
}
