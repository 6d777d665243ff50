//! A CPU-limited "pod" on one machine: a cgroup with a CPU quota, as
//! Kubernetes gives a container with `limits: cpu`. The kernel's CFS bandwidth
//! control lets the group's processes run for `quota` of CPU time in every
//! `period` (100 ms, Kubernetes' default) and then stops them, all their
//! threads together, until the next period begins. A server in a pod of less
//! than a core saturates before a load generator on a core of its own does.
//!
//! cgroup v2 (`cpu.max`) and v1 (`cpu.cfs_quota_us`) both work; either needs
//! root and a writable cgroup filesystem. A child joins the group before it
//! runs a line of its own: [`Pod::wrapper`] is a shell that moves itself into
//! the group and then execs the program. The group is removed when the [`Pod`]
//! is dropped (a finished run, an error, a panic, a Ctrl-C that drops the run),
//! after killing whatever still runs in it; a group left by a process that was
//! killed outright is removed by the next [`Pod::create`].

use std::{
    fs, io,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context, bail};
use rustix::process::{Pid, Signal, kill_process};
use serde::{Deserialize, Serialize};

/// CFS's accounting period, as Kubernetes sets it.
pub const PERIOD: Duration = Duration::from_millis(100);

/// The kernel refuses a quota under 1 ms per period.
const MIN_QUOTA_US: u64 = 1_000;

/// The prefix of every group this module makes, then a name and the pid of
/// the process that made it: what [`remove_stale`] goes by.
const PREFIX: &str = "workshop-pod-";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// How often the kernel stopped the pod for having spent its quota.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Throttling {
    /// Periods in which something in the group was runnable.
    pub periods: u64,
    /// Of those, the periods that ended with the group stopped.
    pub throttled: u64,
    /// The time its processes were held back, in all.
    pub throttled_us: u64,
}

impl Throttling {
    /// What happened between `earlier` and this reading of the same pod.
    pub fn since(&self, earlier: &Throttling) -> Throttling {
        Throttling {
            periods: self.periods.saturating_sub(earlier.periods),
            throttled: self.throttled.saturating_sub(earlier.throttled),
            throttled_us: self.throttled_us.saturating_sub(earlier.throttled_us),
        }
    }

    // ANCHOR: prometheus
    /// These counts as Prometheus text, under the names cAdvisor gives a
    /// container's, so that a cluster's own queries work on them.
    pub fn prometheus(&self) -> String {
        format!(
            "# TYPE container_cpu_cfs_periods_total counter\n\
             container_cpu_cfs_periods_total {}\n\
             # TYPE container_cpu_cfs_throttled_periods_total counter\n\
             container_cpu_cfs_throttled_periods_total {}\n\
             # TYPE container_cpu_cfs_throttled_seconds_total counter\n\
             container_cpu_cfs_throttled_seconds_total {}\n",
            self.periods,
            self.throttled,
            self.throttled_us as f64 / 1e6
        )
    }
    // ANCHOR_END: prometheus
}

/// A cgroup with a CPU quota; dropping it kills what runs inside and removes it.
#[derive(Debug)]
pub struct Pod {
    dir: PathBuf,
    version: Version,
}

impl Pod {
    /// Makes the group `workshop-pod-NAME-PID` with `cpus` CPUs' worth of time
    /// per period (0.5: 50 ms of every 100 ms). `cpus` may be more than one:
    /// a quota spans however many cores the group's threads run on.
    pub fn create(name: &str, cpus: f64) -> anyhow::Result<Pod> {
        let quota_us = quota_us(cpus)?;
        let (version, root) =
            mounted().context("cannot set a CPU limit (run without the CPU limit option)")?;
        remove_stale(&root);
        if version == Version::V2 {
            // A v2 group has the cpu files only if its parent hands the
            // controller down; the root cgroup may hold processes and still
            // do so.
            let control = root.join("cgroup.subtree_control");
            let enabled = fs::read_to_string(&control).unwrap_or_default();
            if !enabled.split_whitespace().any(|c| c == "cpu") {
                fs::write(&control, "+cpu").map_err(|e| refusal(&control, &e))?;
            }
        }
        let dir = root.join(format!("{PREFIX}{name}-{}", std::process::id()));
        fs::create_dir(&dir).map_err(|e| refusal(&dir, &e))?;
        // From here on, dropping `pod` removes the group, whatever fails next.
        let pod = Pod { dir, version };
        let period_us = PERIOD.as_micros().to_string();
        match version {
            Version::V1 => {
                pod.write("cpu.cfs_period_us", &period_us)?;
                pod.write("cpu.cfs_quota_us", &quota_us.to_string())?;
            }
            Version::V2 => pod.write("cpu.max", &format!("{quota_us} {period_us}"))?,
        }
        Ok(pod)
    }

    // ANCHOR: wrapper
    /// The words to put before a program's command line so that it runs in
    /// the pod from its first instruction: `sh` writes its own pid into the
    /// group, then replaces itself with the program (`exec`), keeping the pid.
    pub fn wrapper(&self) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            r#"echo $$ > "$0" && exec "$@""#.into(),
            self.dir.join("cgroup.procs").display().to_string(),
        ]
    }
    // ANCHOR_END: wrapper

    pub fn path(&self) -> &Path {
        &self.dir
    }

    pub fn version(&self) -> Version {
        self.version
    }

    /// The quota and the period, in microseconds, as the kernel reads them back.
    pub fn quota_us(&self) -> anyhow::Result<(u64, u64)> {
        let numbers = |text: String| -> anyhow::Result<Vec<u64>> {
            text.split_whitespace()
                .map(|w| w.parse().context("the cgroup's quota is not a number"))
                .collect()
        };
        match self.version {
            Version::V1 => Ok((
                numbers(self.read("cpu.cfs_quota_us")?)?[0],
                numbers(self.read("cpu.cfs_period_us")?)?[0],
            )),
            Version::V2 => match numbers(self.read("cpu.max")?)?[..] {
                [quota, period] => Ok((quota, period)),
                _ => bail!("{}/cpu.max is not `QUOTA PERIOD`", self.dir.display()),
            },
        }
    }

    /// Lets the pod save up to `cpus` CPUs' worth of quota it left unused
    /// and spend it in a later period on top of that period's quota: CFS
    /// burst (Linux 5.14 and later; `cpu.cfs_burst_us` on v1, `cpu.max.burst`
    /// on v2). The kernel takes at most one period's quota. Kubernetes does
    /// not set it.
    pub fn set_burst(&self, cpus: f64) -> anyhow::Result<()> {
        let file = match self.version {
            Version::V1 => "cpu.cfs_burst_us",
            Version::V2 => "cpu.max.burst",
        };
        if !self.dir.join(file).exists() {
            bail!(
                "this kernel has no CPU burst ({}/{file} is missing; Linux 5.14 and later \
                 have it): leave out the arms that ask for it",
                self.dir.display()
            );
        }
        self.write(file, &quota_us(cpus)?.to_string())
    }

    /// The processes in the pod now.
    pub fn procs(&self) -> Vec<u32> {
        procs(&self.dir)
    }

    /// How often the pod was throttled so far (`cpu.stat`).
    pub fn throttling(&self) -> anyhow::Result<Throttling> {
        Ok(parse_cpu_stat(&self.read("cpu.stat")?))
    }

    fn write(&self, file: &str, value: &str) -> anyhow::Result<()> {
        let path = self.dir.join(file);
        fs::write(&path, value)
            .with_context(|| format!("cannot write {value} to {}", path.display()))
    }

    fn read(&self, file: &str) -> anyhow::Result<String> {
        let path = self.dir.join(file);
        fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        if let Err(e) = remove(&self.dir) {
            eprintln!("warning: {e:#}");
        }
    }
}

/// The mounted cgroup hierarchy that has the cpu controller, and its root.
fn mounted() -> anyhow::Result<(Version, PathBuf)> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo")
        .context("cannot read /proc/self/mountinfo to find the cgroup filesystem")?;
    cpu_hierarchy(&mountinfo, |dir| {
        fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default()
    })
    .context(
        "no cgroup filesystem with the cpu controller is mounted here (neither cgroup v2 \
         listing `cpu` in cgroup.controllers nor cgroup v1's `cpu`)",
    )
}

/// The group this process runs in, as a process inside a container or a pod
/// finds its own: the cpu hierarchy's mount, and the path `/proc/self/cgroup`
/// gives for it (`/` inside a container with its own cgroup namespace).
pub fn own() -> anyhow::Result<(Version, PathBuf)> {
    let (version, root) = mounted()?;
    let cgroup =
        fs::read_to_string("/proc/self/cgroup").context("cannot read /proc/self/cgroup")?;
    let path = own_path(&cgroup, version).context("/proc/self/cgroup names no cpu group")?;
    Ok((version, root.join(path.trim_start_matches('/'))))
}

/// This process's group's throttling counts and its quota (quota, period in
/// µs; `None`: no limit), read from the inside.
pub fn own_limits() -> anyhow::Result<(Throttling, Option<(u64, u64)>)> {
    let (version, dir) = own()?;
    let read = |file: &str| {
        let path = dir.join(file);
        fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
    };
    let stat = parse_cpu_stat(&read("cpu.stat")?);
    let number = |text: &str| text.trim().parse::<i64>().ok();
    let quota = match version {
        // v1 writes -1 for no limit; v2 writes `max`.
        Version::V1 => number(&read("cpu.cfs_quota_us")?)
            .zip(number(&read("cpu.cfs_period_us")?))
            .filter(|(q, _)| *q > 0)
            .map(|(q, p)| (q as u64, p as u64)),
        Version::V2 => match read("cpu.max")?.split_whitespace().collect::<Vec<_>>()[..] {
            [q, p] => number(q).zip(number(p)).map(|(q, p)| (q as u64, p as u64)),
            _ => None,
        },
    };
    Ok((stat, quota))
}

/// The path of the cpu group in `/proc/self/cgroup`: v2's `0::PATH` line, or
/// the v1 line whose controllers include `cpu`.
fn own_path(cgroup: &str, version: Version) -> Option<String> {
    cgroup.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let ours = match version {
            Version::V2 => controllers.is_empty(),
            Version::V1 => controllers.split(',').any(|c| c == "cpu"),
        };
        ours.then(|| path.to_string())
    })
}

/// Kills what runs in the group and removes it; a group is removable only once
/// the kernel has taken its last process out, shortly after the kill.
fn remove(dir: &Path) -> anyhow::Result<()> {
    for _ in 0..100 {
        for pid in procs(dir) {
            if let Some(pid) = Pid::from_raw(pid as i32) {
                let _ = kill_process(pid, Signal::KILL);
            }
        }
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    bail!(
        "cannot remove the cgroup {} (processes still in it: {:?}); `rmdir` it once they have exited",
        dir.display(),
        procs(dir)
    )
}

/// Removes the groups of processes that no longer exist (killed outright,
/// before their `Pod` could be dropped).
fn remove_stale(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(owner) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.rsplit('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{owner}")).exists() {
            let _ = remove(&entry.path());
        }
    }
}

fn procs(dir: &Path) -> Vec<u32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// `cpus` as microseconds per period, refused when the kernel would refuse it.
fn quota_us(cpus: f64) -> anyhow::Result<u64> {
    let quota = cpus * PERIOD.as_micros() as f64;
    if !quota.is_finite() || quota.round() < MIN_QUOTA_US as f64 {
        bail!(
            "a CPU limit of {cpus} is refused: the kernel's smallest quota is {} ms per {} ms period, {} CPUs",
            MIN_QUOTA_US / 1_000,
            PERIOD.as_millis(),
            MIN_QUOTA_US as f64 / PERIOD.as_micros() as f64
        );
    }
    Ok(quota.round() as u64)
}

/// Why the group could not be made, and what to do instead.
fn refusal(path: &Path, error: &io::Error) -> anyhow::Error {
    let why = match error.kind() {
        io::ErrorKind::PermissionDenied => {
            "a CPU limit needs root (run the command with sudo, or in CI as root)"
        }
        io::ErrorKind::ReadOnlyFilesystem => {
            "the cgroup filesystem is read-only here (inside a container, only a privileged one may write it)"
        }
        _ => "the cgroup filesystem did not accept it",
    };
    anyhow::anyhow!(
        "cannot set up a CPU-limited group at {} ({error}): {why}; to measure without a limit, \
         run without the CPU limit option",
        path.display()
    )
}

/// Where to make groups with the cpu controller, from `/proc/self/mountinfo`:
/// a cgroup v2 mount whose `cgroup.controllers` (read by `controllers`) lists
/// `cpu`, else the cgroup v1 hierarchy mounted with the `cpu` option.
fn cpu_hierarchy(
    mountinfo: &str,
    controllers: impl Fn(&Path) -> String,
) -> Option<(Version, PathBuf)> {
    // "36 25 0:31 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu"
    let mounts = mountinfo.lines().filter_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let point = PathBuf::from(before.split_whitespace().nth(4)?);
        let mut after = after.split_whitespace();
        let fstype = after.next()?;
        let options = after.nth(1).unwrap_or("");
        Some((point, fstype.to_string(), options.to_string()))
    });
    let mut v1 = None;
    for (point, fstype, options) in mounts {
        match fstype.as_str() {
            "cgroup2" if controllers(&point).split_whitespace().any(|c| c == "cpu") => {
                return Some((Version::V2, point));
            }
            "cgroup" if v1.is_none() && options.split(',').any(|o| o == "cpu") => {
                v1 = Some((Version::V1, point));
            }
            _ => {}
        }
    }
    v1
}

/// `cpu.stat`: v1 counts `throttled_time` in nanoseconds, v2 `throttled_usec`.
fn parse_cpu_stat(text: &str) -> Throttling {
    let mut stat = Throttling::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(' ') else {
            continue;
        };
        let Ok(value) = value.trim().parse::<u64>() else {
            continue;
        };
        match key {
            "nr_periods" => stat.periods = value,
            "nr_throttled" => stat.throttled = value,
            "throttled_time" => stat.throttled_us = value / 1_000,
            "throttled_usec" => stat.throttled_us = value,
            _ => {}
        }
    }
    stat
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1_HERE: &str = "\
29 1 254:0 / / rw,relatime - ext4 /dev/vda rw
35 29 0:30 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
36 35 0:31 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
37 35 0:32 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
46 35 0:41 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    const V2_SYSTEMD: &str = "\
24 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
";

    #[test]
    fn finds_v1s_cpu_mount_when_v2_has_no_cpu_controller() {
        let found = cpu_hierarchy(V1_HERE, |_| "hugetlb".into());
        assert_eq!(found, Some((Version::V1, "/sys/fs/cgroup/cpu".into())));
    }

    #[test]
    fn prefers_v2_when_it_has_the_cpu_controller() {
        let found = cpu_hierarchy(V2_SYSTEMD, |_| "cpuset cpu io memory pids".into());
        assert_eq!(found, Some((Version::V2, "/sys/fs/cgroup".into())));
        // Distributions often mount v1's cpu and cpuacct together.
        let combined =
            "36 35 0:31 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        assert_eq!(
            cpu_hierarchy(combined, |_| String::new()),
            Some((Version::V1, "/sys/fs/cgroup/cpu,cpuacct".into()))
        );
    }

    #[test]
    fn no_cpu_controller_is_none() {
        assert_eq!(cpu_hierarchy(V2_SYSTEMD, |_| "memory pids".into()), None);
        assert_eq!(cpu_hierarchy("", |_| String::new()), None);
    }

    #[test]
    fn quotas_the_kernel_refuses_are_refused_here() {
        assert_eq!(quota_us(0.5).unwrap(), 50_000);
        assert_eq!(quota_us(2.0).unwrap(), 200_000);
        for cpus in [0.0, 0.001, -1.0, f64::NAN, f64::INFINITY] {
            let e = quota_us(cpus).unwrap_err().to_string();
            assert!(
                e.contains("smallest quota is 1 ms per 100 ms"),
                "{cpus}: {e}"
            );
        }
    }

    #[test]
    fn a_refusal_says_what_is_missing_and_how_to_go_without() {
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        let e = refusal(Path::new("/sys/fs/cgroup/workshop-pod-x-1"), &denied).to_string();
        assert!(e.contains("/sys/fs/cgroup/workshop-pod-x-1"), "{e}");
        assert!(e.contains("needs root"), "{e}");
        assert!(e.contains("without the CPU limit option"), "{e}");
        let read_only = io::Error::from(io::ErrorKind::ReadOnlyFilesystem);
        let e = refusal(Path::new("/x"), &read_only).to_string();
        assert!(e.contains("read-only"), "{e}");
    }

    #[test]
    fn a_process_finds_its_own_group() {
        let v1 = "12:memory:/x\n4:cpu,cpuacct:/kubepods/pod1/c1\n0::/user.slice\n";
        assert_eq!(
            own_path(v1, Version::V1).as_deref(),
            Some("/kubepods/pod1/c1")
        );
        assert_eq!(own_path(v1, Version::V2).as_deref(), Some("/user.slice"));
        // Inside a container with its own cgroup namespace, its group is the root.
        assert_eq!(own_path("0::/\n", Version::V2).as_deref(), Some("/"));
        assert_eq!(own_path("3:memory:/x\n", Version::V1), None);
    }

    #[test]
    fn cpu_stat_reads_v1_nanoseconds_and_v2_microseconds() {
        let v1 = "nr_periods 30\nnr_throttled 29\nthrottled_time 1450000000\n";
        let v2 = "usage_usec 9\nnr_periods 30\nnr_throttled 29\nthrottled_usec 1450000\n";
        let expected = Throttling {
            periods: 30,
            throttled: 29,
            throttled_us: 1_450_000,
        };
        assert_eq!(parse_cpu_stat(v1), expected);
        assert_eq!(parse_cpu_stat(v2), expected);
    }
}
