//! Chapter 13: wait, reject, retry or drop? What a server at capacity does
//! with the calls it cannot serve yet, compared under sustained overload.
//!
//! - [`server`]: a fixed pool of workers behind a queue; the rules that shed,
//!   queue, order and drop calls ([`server::Core`], tested with an explicit
//!   clock), run behind the Greeter's `SayHello` on a real tonic server.
//! - [`client`]: one overall deadline per call, and naive or budgeted retries
//!   of RESOURCE_EXHAUSTED (the budget is chapter 10's `RetryThrottle`).
//! - [`experiment`]: every policy at every offered load, open-loop, with
//!   chapter 11's `loadgen`; goodput, latency, wasted work, amplification.
//! - [`report`]: the run and its files (CSV, JSON, Markdown, SVG).

pub mod client;
pub mod experiment;
pub mod report;
pub mod server;

pub use experiment::{Args, Config, Policy};
