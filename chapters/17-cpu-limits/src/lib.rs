//! Chapter 17: a server in a CPU quota, as Kubernetes runs a pod with
//! `limits: cpu`.
//!
//! The server ([`server`]) burns a fixed amount of CPU per call on one of
//! the arms' runtimes ([`config::Arm`]), inside a pod of chapter 14's kind
//! (`harness::pod`); the generator sends Poisson arrivals from its own core
//! ([`run`]); the report puts p99 beside the kernel's throttling counts
//! ([`render`]). [`remote`] is the same experiment across two machines: the
//! server alone in a pod of a real cluster, the generator in another.

pub mod config;
pub mod remote;
pub mod render;
pub mod run;
pub mod server;
