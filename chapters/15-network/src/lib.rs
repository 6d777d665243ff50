//! Chapter 15: a real network on one machine.
//!
//! - [`proxy`]: a delay proxy (tokio) that holds every chunk for a one-way
//!   delay, with seeded jitter that never reorders the byte stream, an
//!   optional rate limit, and stall and blackhole on command.
//! - [`lab`]: `network up` / `down`: two network namespaces joined by a veth
//!   pair with a `tbf` rate limit, for separate network stacks (root only).
//! - [`experiment`]: `network run`: what distance does to calls, measured
//!   side by side at several round-trip times through the proxy.
//! - [`cli`]: the command line.
pub mod cli;
pub mod experiment;
pub mod lab;
pub mod proxy;
