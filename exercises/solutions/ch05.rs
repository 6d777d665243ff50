//! Chapter 5: a deadline the REST server honours (the solution).
//!
//! The handler's future is awaited inside the timeout, not on a task of its
//! own. When the deadline passes, the timeout drops it, and with it whatever
//! the handler was awaiting: its `CallGuard` counts the call as ended early.
//! A client that goes away drops the middleware's future, which drops the
//! handler's the same way, as it did before there was a deadline.

use axum::{
    extract::Request,
    middleware::Next,
    response::{IntoResponse, Response},
};

pub use crate::given::ch05::{DEADLINE_HEADER, MAX_DEADLINE, expired, parse_deadline};

// ANCHOR: deadline
/// Middleware, for `axum::middleware::from_fn(deadline)`: runs the rest of
/// the request (the handler) within the time `x-deadline-ms` allows, and
/// answers 504 when that runs out. Without the header, no deadline.
pub async fn deadline(request: Request, next: Next) -> Response {
    let budget = match parse_deadline(request.headers()) {
        Ok(Some(budget)) => budget,
        Ok(None) => return next.run(request).await,
        Err(problem) => return problem.into_response(),
    };
    // The handler's future lives inside the timeout: when the deadline
    // passes, the timeout drops it at whatever it was awaiting, so the work
    // stops with the 504. (Work that never awaits cannot be stopped so; it
    // would have to check the time itself.)
    match tokio::time::timeout(budget, next.run(request)).await {
        Ok(response) => response,
        Err(_elapsed) => expired(budget),
    }
}
// ANCHOR_END: deadline
