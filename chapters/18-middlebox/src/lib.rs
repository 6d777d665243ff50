//! Chapter 18: between two processes.
//!
//! - [`frames`]: HTTP/2's frame boundaries, followed in a passing byte stream.
//! - [`middlebox`]: what a load balancer or NAT does to an idle flow (forget
//!   it silently, or answer it with RST) and to PING frames (swallow them).
//! - [`enforce`]: the server's side of gRFC A8: too many pings earn a GOAWAY.
//! - [`server`]: the servers behind the middlebox; [`run`] and [`render`]:
//!   the experiment and its report.
pub mod enforce;
pub mod frames;
pub mod middlebox;
pub mod render;
pub mod run;
pub mod server;
