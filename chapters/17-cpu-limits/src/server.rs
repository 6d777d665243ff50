//! The server in the pod: `SayHello` burns a fixed amount of CPU time per call,
//! on one of the arm's runtimes, and says what it found inside the pod.
//!
//! The work is measured on the handler thread's own CPU clock, not on the
//! wall clock: a thread the kernel has stopped for the rest of a period does
//! not advance it, so every call costs the same CPU time whether or not the
//! pod was throttled in the middle of it, and the arms differ only in *when*
//! that time is granted.

use std::{net::SocketAddr, time::Duration};

use anyhow::Context;
use harness::child::Role;
use program::proc;
use proto::greeter::v1::{HelloReply, HelloRequest, greeter_server};
use serde::{Deserialize, Serialize};
use tonic::{Request, Response, Status};

use crate::config::Arm;

// ANCHOR: work
/// Spins until this thread has run for `work` of CPU time.
pub fn burn(work: Duration) {
    let until = proc::thread_cpu_ns() + work.as_nanos() as u64;
    let mut x = 0u64;
    while proc::thread_cpu_ns() < until {
        for _ in 0..64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}
// ANCHOR_END: work

/// The greeter whose every call burns this much CPU time.
#[derive(Debug, Clone, Copy)]
pub struct Work(pub Duration);

#[tonic::async_trait]
impl greeter_server::Greeter for Work {
    /// The work runs inline, in the task that received the call: a handler
    /// that computes, as most handlers do between their awaits.
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        burn(self.0);
        Ok(Response::new(HelloReply {
            message: request.into_inner().name,
        }))
    }
}

/// What the experiment hands the server process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Serve {
    pub arm: Arm,
    pub work_us: u64,
}

impl Role for Serve {
    const COMMAND: &'static [&'static str] = &["--serve-child"];
    type Ready = Inside;
    type Ask = ();
    type Answer = ();
}

// ANCHOR: inside
/// What the server process sees from inside its pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inside {
    pub addr: SocketAddr,
    pub pid: u32,
    /// `std::thread::available_parallelism()`: the CPUs this process may run
    /// on, capped by its cgroup's quota rounded down (at least 1).
    pub parallelism: usize,
    /// The worker threads of the runtime it built (Tokio's default is
    /// `available_parallelism`, unless `TOKIO_WORKER_THREADS` says otherwise).
    pub workers: usize,
    /// The CPUs it may run on (`Cpus_allowed_list`): every core of the
    /// machine, whatever the quota.
    pub cpus_allowed: String,
}
// ANCHOR_END: inside

/// The server process: `cpu_limits --serve-child`. Exits when stdin closes.
pub fn serve_process() -> anyhow::Result<()> {
    let Serve { arm, work_us } = harness::child::config()?;
    let runtime = arm.runtime().context("cannot build the runtime")?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let addr = listener.local_addr()?;
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let server = tonic::transport::Server::builder()
        .add_service(greeter_server::GreeterServer::new(Work(
            Duration::from_micros(work_us),
        )))
        .serve_with_incoming(incoming);
    harness::child::ready::<Serve>(&Inside {
        addr,
        pid: std::process::id(),
        parallelism: std::thread::available_parallelism().map_or(1, |n| n.get()),
        workers: runtime.metrics().num_workers(),
        cpus_allowed: proc::cpus_allowed(),
    })?;
    runtime.block_on(server)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burn_spends_the_cpu_time_it_is_asked_for() {
        let before = proc::thread_cpu_ns();
        burn(Duration::from_millis(5));
        let spent = proc::thread_cpu_ns() - before;
        // At least the work; the margin above is for a loaded test machine.
        assert!(spent >= 5_000_000, "{spent} ns");
        assert!(spent < 50_000_000, "{spent} ns");
    }
}
