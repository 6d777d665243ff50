//! Chapter 5: a deadline the REST server honours.
//!
//! HTTP has no standard deadline header, so this API defines one: a client
//! that will wait at most 50 ms sends `x-deadline-ms: 50`. The middleware
//! below reads it, refuses a malformed one with a 400 that names the header,
//! and answers 504 with problem details once the deadline has passed. But it
//! runs the handler on a task of its own and only stops *waiting* for it: the
//! handler works on to its end, for nobody, and a client that goes away
//! early no longer stops it either. Make the deadline stop the work itself.
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch05`.

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
    // The handler runs on a task of its own; the middleware waits for that
    // task, or for the deadline, whichever comes first.
    let work = tokio::spawn(next.run(request));
    match tokio::time::timeout(budget, work).await {
        Ok(joined) => {
            // A handler that panicked panics here, as it would without the task.
            joined.unwrap_or_else(|failed| std::panic::resume_unwind(failed.into_panic()))
        }
        Err(_elapsed) => expired(budget),
    }
}
// ANCHOR_END: deadline
