//! Chapter 5: the same Greeter over REST, with axum, hyper and rustls.
//!
//! - [`api`] is the HTTP surface: `POST /v1/greetings`, `GET /healthz`, and the
//!   translation of every kind of bad input into problem details.
//! - [`problem`] is RFC 9457's `application/problem+json` error body.
//! - [`guard`] wraps every request: header and declared body sizes are
//!   checked before the router, the body gets a time limit, and a body the
//!   handler did not read is drained after the answer, so that the client
//!   hears it.
//! - [`metrics`] counts requests by method, route and status for Prometheus,
//!   in the registry and on the `/metrics` port of chapter 4's metrics.
//! - [`server`] accepts TLS connections and serves each with HTTP/1.1 or HTTP/2,
//!   whichever the client negotiated, with explicit limits and graceful shutdown.
//!
//! The rules for a valid greeting and the early-end bookkeeping come from the
//! gRPC server's crate (chapter 4), so both protocols behave the same.

pub mod api;
pub mod guard;
pub mod metrics;
pub mod problem;
pub mod server;
#[cfg(feature = "testing")]
pub mod testing;

pub use problem::Problem;
pub use server::{Args, BoundServer, Cli};
