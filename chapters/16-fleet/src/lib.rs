//! Chapter 16: connections over time, and more than one server.
//!
//! - [`replica`]: one greeter replica with a latency of its own (none, a
//!   fixed extra, or a tail), health, an optional maximum connection age,
//!   and two ways to stop: drained (NOT_SERVING, grace, GOAWAY, wait) or
//!   killed (every socket closed at once).
//! - [`client`]: one call as a tower `Service`, with an absolute deadline.
//! - [`balance`]: round robin, tonic's balanced channel, and tower's p2c
//!   over peak-EWMA load, fed by the replicas' health.
//! - [`hedge`]: `tower::hedge` with a policy that never sends a copy after
//!   the deadline.
//! - [`lb`]: a layer-4 balancer that hands out connections in turn.
//! - [`experiment`]: `fleet run`, the four measurements side by side.
//! - [`cli`]: the command line.

pub mod balance;
pub mod cli;
pub mod client;
pub mod experiment;
pub mod hedge;
pub mod lb;
pub mod replica;
