//! Chapter 14: the per-call price.
//!
//! The same tiny echo is served as a unary call (`greeter.v1.Greeter/SayHello`)
//! and as messages on long-lived bidirectional streams
//! (`streaming.v1.Streamer/Echo`), and as REST (`POST /v1/greetings` over
//! HTTP/1.1 and over HTTP/2, [`rest`]), by a server that runs in a runtime
//! configuration of our choosing ([`arm`]) in a process of its own, pinned to
//! one core ([`server`], [`placement`]). The load generator on the other core
//! drives every shape open-loop through a ramp of rates ([`load`], [`ramp`]).
//! It reads as config -> run -> records -> render: [`config`], [`run`]
//! (with [`h2load`] and [`syscalls`] as cross-checks), [`records`],
//! [`summary`] and [`render`]. [`remote`] splits the two across machines:
//! `per_call serve` in one pod, the experiment's `--target` in another.

pub mod arm;
pub mod config;
pub mod h2load;
pub mod load;
pub mod placement;
pub mod ramp;
pub mod records;
pub mod remote;
pub mod render;
pub mod rest;
pub mod run;
pub mod server;
pub mod summary;
pub mod syscalls;

pub use arm::{Arm, Flavour, Handler};
