//! Chapter 4: the Greeter over gRPC, with tonic and rustls.
//!
//! - [`greeter`] is the service: validation, the `delay_ms` wait, the reply.
//! - [`lifetime`] notices calls that end before their reply is ready (the client
//!   cancelled, or the deadline passed), logs them and counts them. The REST
//!   server of chapter 5 reuses it, along with the validation rules.
//! - [`server`] puts the service on the network: TLS, optional mTLS, health,
//!   reflection, explicit limits and graceful shutdown.
//! - [`refuse`] answers, before any handler runs, the requests that are not
//!   gRPC calls (wrong media type or method) or carry too much metadata.
//! - [`spec_codes`] answers what tonic's server would report under other
//!   codes with the specification's: DEADLINE_EXCEEDED for an expired
//!   `grpc-timeout` (tonic: CANCELLED), RESOURCE_EXHAUSTED for a message over
//!   the size limit (tonic: OUT_OF_RANGE). Every server of this workshop that
//!   serves deadlines puts it in front of its services.
//! - [`metrics`] counts calls by method and code for Prometheus
//!   (`--metrics-addr`), and serves them; the REST server shares its registry.
//! - [`trace`] opens a span per call, continuing the caller's trace
//!   (`traceparent`), so every hop's log shows the same trace and deadline.
//! - [`connection`] closes a connection that never sends the HTTP/2 preface;
//!   the REST server of chapter 5 uses it too.
//! - `testing` (behind the feature of that name) is the scaffolding that the
//!   integration tests of this and later chapters share: a throwaway PKI, a
//!   server that stops when the test drops it, a TLS channel, bounded waits.

pub mod connection;
pub mod greeter;
pub mod lifetime;
pub mod metrics;
pub mod refuse;
pub mod server;
pub mod spec_codes;
#[cfg(feature = "testing")]
pub mod testing;
pub mod trace;

pub use greeter::{
    ERROR_DOMAIN, Greeter, InvalidRequest, MAX_DELAY_MS, MAX_NAME_CHARS, check_request, greeting,
};
pub use lifetime::{CallGuard, CallStats};
pub use server::{Args, BoundServer, Cli};
