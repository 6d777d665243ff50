//! Chapter 13: wait, reject, retry or drop? What a server at capacity does
//! with the calls it cannot serve yet, compared under sustained overload.
//! It reads as config -> run -> records -> reduce -> render:
//!
//! - [`core`]: the rules that shed, queue, order and drop calls, with the
//!   clock passed in and tested without a runtime; [`server`] runs them in a
//!   fixed pool of workers behind the Greeter's `SayHello` on a real tonic
//!   server, and [`rest`] behind `POST /v1/greetings`, over HTTP/1.1 and HTTP/2.
//! - [`client`]: one overall deadline per call, and naive, budgeted or
//!   told-when retries of RESOURCE_EXHAUSTED (the budget is chapter 10's
//!   `RetryThrottle`), over gRPC or REST.
//! - [`config`]: the policies, loads and rules of a run, checked.
//! - [`run`]: every policy at every offered load, open-loop, with chapter
//!   11's `loadgen`, each cell on a fresh server; [`records`] are its rows.
//! - [`figures`]: goodput, latency, wasted work, amplification, from the rows.
//! - [`render`]: the rows reduced to a cell's figures (`results.json`),
//!   then the table and the charts from those.

pub mod client;
pub mod config;
pub mod core;
pub mod figures;
pub mod metrics;
pub mod records;
pub mod render;
pub mod rest;
pub mod run;
pub mod server;

pub use config::{Args, Config, Policy, Transport};
