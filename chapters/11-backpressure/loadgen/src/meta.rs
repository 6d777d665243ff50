//! What a result file needs to say about where it came from.

use program::proc::Machine;
use serde::Serialize;

/// The program, its arguments, its build, and the machine it ran on.
#[derive(Debug, Clone, Serialize)]
pub struct RunMeta {
    pub program: String,
    pub args: Vec<String>,
    pub version: &'static str,
    /// `debug` or `release`: timings differ several-fold between them.
    pub build: &'static str,
    pub started_unix_s: u64,
    pub machine: Machine,
}

impl RunMeta {
    /// Describes the running process.
    pub fn now() -> RunMeta {
        let mut args = std::env::args();
        RunMeta {
            program: args.next().unwrap_or_default(),
            args: args.collect(),
            version: env!("CARGO_PKG_VERSION"),
            build: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            started_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            machine: Machine::this(),
        }
    }
}
