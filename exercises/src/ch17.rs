//! Chapter 17: how many worker threads a runtime should start in a pod.
//!
//! A pod's CPU limit reaches the process as its cgroup's `cpu.max`: `QUOTA
//! PERIOD` in microseconds (`150000 100000` is 1.5 CPUs), or `max PERIOD`
//! for no limit. This version counts the CPUs the process may run on and
//! ignores the quota: what a runtime blind to its pod does, and why a
//! multi-thread server with eight workers spends a one-CPU quota in an
//! eighth of a period. Make it follow the rule of Rust's
//! `std::thread::available_parallelism`, which Tokio's default uses.
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch17`.

// ANCHOR: workers
/// The worker threads for a process whose cgroup's `cpu.max` reads
/// `cpu_max` and which may run on `cpus_allowed` CPUs.
pub fn workers(cpu_max: &str, cpus_allowed: usize) -> usize {
    let _ = cpu_max; // not used yet
    cpus_allowed
}
// ANCHOR_END: workers
