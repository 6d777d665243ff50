//! What a result file needs to say about where it came from.

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

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub os: String,
    pub cpus: usize,
    pub cpu_model: String,
    pub kernel: String,
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

impl Machine {
    pub fn this() -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let os = read("/etc/os-release")
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|s| s.trim_matches('"').to_string())
            .unwrap_or_else(|| std::env::consts::OS.to_string());
        let cpu_model = read("/proc/cpuinfo")
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, m)| m.trim().to_string())
            .unwrap_or_else(|| std::env::consts::ARCH.to_string());
        Machine {
            os,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        }
    }
}
