//! A child process that cannot outlive xtask. [`Guarded`] owns a child that
//! runs in a process group of its own, so that a signal reaches everything a
//! `bash -c` pipeline started, not only bash. Dropping the guard, on whatever
//! path (success, an early `?`, a panic, Ctrl-C turned into an error by
//! `wait.rs`), sends SIGINT to the group, waits a bounded time for it to end,
//! then kills it.

use std::{
    os::unix::process::CommandExt,
    process::{Child, Command, ExitStatus},
    time::{Duration, Instant},
};

use anyhow::Context;
use rustix::process::{Pid, Signal, kill_process_group};

use crate::observe::wait;

/// How long a dropped guard lets its process drain before killing it.
const DROP_GRACE: Duration = Duration::from_secs(10);

pub struct Guarded {
    name: String,
    child: Child,
    /// Set once the child has been reaped: from then on its pid may belong
    /// to someone else, and is never signalled.
    status: Option<ExitStatus>,
    grace: Duration,
}

impl Guarded {
    pub fn spawn(name: impl Into<String>, mut command: Command) -> anyhow::Result<Guarded> {
        let name = name.into();
        command.process_group(0);
        let child = command
            .spawn()
            .with_context(|| format!("cannot start {name}"))?;
        Ok(Guarded {
            name,
            child,
            status: None,
            grace: DROP_GRACE,
        })
    }

    /// Replaces how long a drop waits before it kills (tests use a short one).
    #[cfg(test)]
    pub fn with_grace(mut self, grace: Duration) -> Guarded {
        self.grace = grace;
        self
    }

    /// Its exit status, once it has exited.
    pub fn try_status(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self
                .child
                .try_wait()
                .with_context(|| format!("cannot ask whether {} has exited", self.name))?;
        }
        Ok(self.status)
    }

    /// Sends `signal` to its whole process group, unless it has exited.
    pub fn signal(&mut self, signal: Signal) -> anyhow::Result<()> {
        if self.try_status()?.is_some() {
            return Ok(());
        }
        let pid = Pid::from_child(&self.child);
        kill_process_group(pid, signal).with_context(|| format!("cannot signal {}", self.name))
    }

    /// Waits at most `limit` for it to exit by itself.
    pub fn wait(&mut self, limit: Duration) -> anyhow::Result<ExitStatus> {
        let what = format!("{} to exit", self.name);
        wait::until(limit, &what, || self.try_status())
    }

    /// Sends `signal`, then waits at most `limit`; kills it if that was not enough.
    pub fn stop(&mut self, signal: Signal, limit: Duration) -> anyhow::Result<ExitStatus> {
        self.signal(signal)?;
        let stopped = self.wait(limit);
        if stopped.is_err() {
            self.kill();
        }
        stopped
    }

    fn kill(&mut self) {
        if self.status.is_none() {
            let _ = kill_process_group(Pid::from_child(&self.child), Signal::KILL);
            self.status = self.child.wait().ok();
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if matches!(self.try_status(), Ok(Some(_))) {
            return;
        }
        // No interruptible waits here: this is the cleanup an interrupt asked for.
        let _ = self.signal(Signal::INT);
        let deadline = Instant::now() + self.grace;
        while Instant::now() < deadline {
            if matches!(self.try_status(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "{} did not stop within {:.0} s of SIGINT; killing it",
            self.name,
            self.grace.as_secs_f64()
        );
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a process with this pid still runs (a zombie, dead but not
    /// yet reaped by whoever adopted it, does not).
    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let state = stat.rsplit_once(") ")?.1.chars().next()?;
                Some(state != 'Z' && state != 'X')
            })
            .unwrap_or(false)
    }

    fn sleeper(script: &str) -> Command {
        let mut command = Command::new("bash");
        command.arg("-c").arg(script);
        command
    }

    /// Starts a child, then fails before anything stops it, as a step does
    /// when a later wait gives up.
    fn start_then_fail(pids: &mut Vec<u32>) -> anyhow::Result<()> {
        let guard = Guarded::spawn("sleep", sleeper("sleep 600"))?;
        pids.push(guard.child.id());
        std::fs::read_to_string("/nonexistent/observe/output")?;
        drop(guard);
        Ok(())
    }

    #[test]
    fn a_child_is_gone_once_an_early_return_drops_its_guard() {
        let mut pids = Vec::new();
        assert!(start_then_fail(&mut pids).is_err());
        assert!(!alive(pids[0]), "the child outlived its guard");
    }

    #[test]
    fn a_child_that_ignores_sigint_is_killed() {
        let guard = Guarded::spawn("stubborn", sleeper("trap '' INT; sleep 600; sleep 600"))
            .unwrap()
            .with_grace(Duration::from_millis(200));
        let pid = guard.child.id();
        drop(guard);
        assert!(!alive(pid));
    }

    #[test]
    fn the_whole_pipeline_gets_the_signal() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        // The pipeline's `sleep` writes its pid, then becomes the sleep.
        let script = format!(
            "bash -c 'echo $$ > {}; exec sleep 600' | cat",
            pid_file.display()
        );
        let mut guard = Guarded::spawn("pipeline", sleeper(&script)).unwrap();
        let inner: u32 = wait::until(Duration::from_secs(60), "the pid file", || {
            Ok(std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|t| t.trim().parse().ok()))
        })
        .unwrap();
        // Signal only once bash has become the sleep: bash defers a SIGINT
        // that arrives between the echo and the exec, and the exec then
        // drops it, so an earlier signal would leave the sleep running.
        wait::until(Duration::from_secs(60), "the exec of sleep", || {
            let comm = std::fs::read_to_string(format!("/proc/{inner}/comm")).unwrap_or_default();
            Ok((comm.trim() == "sleep").then_some(()))
        })
        .unwrap();
        let status = guard.stop(Signal::INT, Duration::from_secs(60)).unwrap();
        assert!(!status.success());
        // The sleep was bash's grandchild; init reaps it once it has died.
        wait::until(Duration::from_secs(60), "the inner sleep to end", || {
            Ok((!alive(inner)).then_some(()))
        })
        .unwrap();
    }
}
