//! Chapter 10: performance and deadlines, measured honestly.
//!
//! - [`latency`]: the arms of `examples/latency_compare` (reused and fresh
//!   connections, TLS resumption, the naive client, HTTP/1.1 vs HTTP/2) and the
//!   raw TCP floor they are measured against.
//! - [`propagation`]: a frontend service that passes its caller's remaining
//!   deadline, minus a margin, on to the greeter.
//! - [`retry`]: what retrying every DEADLINE_EXCEEDED does to a slow server, and
//!   the usual rules against it added one at a time (one overall deadline with
//!   a timeout per attempt, idempotent-only, backoff with jitter, a retry budget).
//! - [`silent`]: a server that accepts connections and never answers, to
//!   show that a deadline does not cover connecting.
//! - [`choose`]: measure a method's p99 under a concurrency and suggest a deadline.
//! - [`plot`]: the storm over time and the arms' percentiles, as SVG (`--plot`).
//! - [`stats`]: percentiles (exact by the nearest rank, or from an HDR
//!   histogram), medians and spreads: this chapter's, and every later one's.

pub mod choose;
pub mod latency;
pub mod plot;
pub mod propagation;
pub mod retry;
pub mod silent;
pub mod stats;
