//! Chapter 14: the per-call price.
//!
//! The same tiny echo is served as a unary call (`greeter.v1.Greeter/SayHello`)
//! and as messages on long-lived bidirectional streams
//! (`streaming.v1.Streamer/Echo`), by a server that runs in a runtime
//! configuration of our choosing ([`arm`]) in a process of its own, pinned to
//! one core ([`server`]). The load generator on the other core drives both
//! shapes open-loop through a ramp of rates ([`load`], [`ramp`]), and
//! [`experiment`] puts arms, repeats, files and plots together.

pub mod arm;
pub mod experiment;
pub mod h2load;
pub mod load;
pub mod ramp;
pub mod server;
pub mod syscalls;

pub use arm::{Arm, Flavour, Handler};
