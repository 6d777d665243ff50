//! What the workshop's programs read from Linux's `/proc`: about a process
//! (memory, CPU time, context switches, threads, allowed CPUs), about the
//! machine (load, model) and about its TCP connections. Elsewhere each reader
//! answers "nothing known" (0, empty, `None`) instead of failing: these
//! figures describe a run, they never decide whether it works.

use std::path::PathBuf;

use rustix::time::ClockId;
use serde::{Deserialize, Serialize};

/// A process to read about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pid {
    /// The process that asks.
    This,
    Of(u32),
}

impl Pid {
    fn dir(self) -> PathBuf {
        match self {
            Pid::This => PathBuf::from("/proc/self"),
            Pid::Of(pid) => PathBuf::from(format!("/proc/{pid}")),
        }
    }

    /// Each thread's folder, `/proc/PID/task/TID`.
    fn tasks(self) -> Vec<PathBuf> {
        std::fs::read_dir(self.dir().join("task"))
            .map(|tasks| tasks.flatten().map(|t| t.path()).collect())
            .unwrap_or_default()
    }
}

fn read(path: impl Into<PathBuf>) -> String {
    std::fs::read_to_string(path.into()).unwrap_or_default()
}

/// The value of a `Name:   value` line of a `status` file.
fn status_field(status: &str, name: &str) -> Option<String> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// Resident memory of the whole process, KiB (`VmRSS`).
pub fn rss_kib(pid: Pid) -> u64 {
    status_field(&read(pid.dir().join("status")), "VmRSS")
        .and_then(|v| v.trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// CPU time of the process so far, in nanoseconds, counted exactly (not in
/// clock ticks, as `stat` does). For this process the kernel's process CPU
/// clock, which keeps the time of threads that have ended (a load generator's
/// timing thread ends with its run); for another, the first field of each
/// live thread's `schedstat`, which leaves out ended threads: fine for the
/// servers measured here, whose threads live as long as they do.
pub fn cpu_ns(pid: Pid) -> u64 {
    match pid {
        Pid::This => clock_ns(ClockId::ProcessCPUTime),
        Pid::Of(_) => pid
            .tasks()
            .iter()
            .filter_map(|t| {
                read(t.join("schedstat"))
                    .split_whitespace()
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum(),
    }
}

/// CPU time of the calling thread so far, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(ClockId::ThreadCPUTime)
}

fn clock_ns(clock: ClockId) -> u64 {
    let t = rustix::time::clock_gettime(clock);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Voluntary and involuntary context switches of every thread so far.
pub fn context_switches(pid: Pid) -> u64 {
    pid.tasks()
        .iter()
        .map(|t| {
            let status = read(t.join("status"));
            ["voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"]
                .iter()
                .filter_map(|name| status_field(&status, name)?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// The process's threads, by the name the kernel knows them by (`comm`).
pub fn thread_names(pid: Pid) -> Vec<String> {
    pid.tasks()
        .iter()
        .map(|t| read(t.join("comm")).trim().to_string())
        .collect()
}

/// The CPUs the kernel lets this process run on (`Cpus_allowed_list`, which
/// `taskset` narrows), or `unknown`.
pub fn cpus_allowed() -> String {
    status_field(&read("/proc/self/status"), "Cpus_allowed_list")
        .unwrap_or_else(|| "unknown".into())
}

/// The machine's 1-minute load average: how much else wanted the CPUs lately.
pub fn loadavg_1m() -> Option<f64> {
    read("/proc/loadavg")
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Established TCP connections (IPv4 and IPv6) with this local port: a
/// server's port while a client holds a connection to it.
pub fn established_on(port: u16) -> usize {
    const ESTABLISHED: &str = "01";
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .flat_map(|table| {
            read(*table)
                .lines()
                .skip(1)
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let local_port = fields.get(1)?.rsplit(':').next()?;
                    let local_port = u16::from_str_radix(local_port, 16).ok()?;
                    (local_port == port && *fields.get(3)? == ESTABLISHED).then_some(())
                })
                .collect::<Vec<_>>()
        })
        .count()
}

/// What a result file says about the machine it was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub os: String,
    pub cpus: usize,
    pub cpu_model: String,
    pub kernel: String,
}

impl Machine {
    pub fn this() -> Machine {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_readable_where_there_is_a_proc() {
        if !std::path::Path::new("/proc/self/status").exists() {
            return;
        }
        assert!(rss_kib(Pid::This) > 0);
        assert!(cpu_ns(Pid::This) > 0);
        assert!(!thread_names(Pid::This).is_empty());
        assert_ne!(cpus_allowed(), "unknown");
        assert!(loadavg_1m().is_some());
        assert_eq!(
            rss_kib(Pid::Of(u32::MAX)),
            0,
            "no such process: nothing known"
        );
    }

    #[test]
    fn cpu_time_of_an_ended_thread_stays_counted() {
        let before = cpu_ns(Pid::This);
        // The thread spins until the kernel has counted 20 ms of CPU for it,
        // however busy the machine is, then ends.
        std::thread::spawn(|| while thread_cpu_ns() < 20_000_000 {})
            .join()
            .unwrap();
        assert!(cpu_ns(Pid::This) - before >= 20_000_000);
    }

    #[test]
    fn a_connection_to_a_listening_port_is_seen() {
        if !std::path::Path::new("/proc/net/tcp").exists() {
            return;
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(established_on(port), 0);
        let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _server = listener.accept().unwrap();
        assert_eq!(established_on(port), 1);
    }
}
