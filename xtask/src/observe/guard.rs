//! A child process that cannot outlive xtask. [`Guarded`] owns a child that
//! runs in a process group of its own, so that a signal reaches everything a
//! `bash -c` pipeline started, not only bash. Dropping the guard, on whatever
//! path (success, an early `?`, a panic, Ctrl-C turned into an error by
//! `wait.rs`), sends SIGINT to the group, waits a bounded time for it to end,
//! then kills it.
//!
//! The child takes SIGINT and SIGTERM with their default action even when
//! xtask was started with them ignored ([`stop_signals_reach_children`]).

use std::{
    os::unix::process::CommandExt,
    process::{Child, Command, ExitStatus},
    sync::OnceLock,
    time::{Duration, Instant},
};

use anyhow::Context;
use rustix::process::{Pid, Signal, kill_process_group};
use tokio::signal::unix::SignalKind;

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
        stop_signals_reach_children()?;
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

/// The signals a guard stops its child with, besides SIGKILL (which nothing
/// can ignore): SIGINT when dropped, SIGINT or SIGTERM when a step says so.
const STOP_SIGNALS: [(SignalKind, &str); 2] = [
    (SignalKind::interrupt(), "SIGINT"),
    (SignalKind::terminate(), "SIGTERM"),
];

/// Makes the stop signals end a child by default even when xtask was started
/// with them ignored: run in the background by a non-interactive shell
/// (`cmd &` ignores SIGINT and SIGQUIT), under `trap '' INT`, or by a CI
/// runner that does the same. An ignored signal stays ignored through fork
/// and exec, so every server and command xtask starts would ignore the
/// SIGINT meant to stop it, and a step would wait out its whole limit.
///
/// The child cannot reset it itself: that takes `pre_exec`, which is
/// `unsafe` (forbidden in this workspace); and a shell in between cannot
/// either, since POSIX (`trap`) says that "signals that were ignored on entry
/// to a non-interactive shell cannot be trapped or reset" (dash and bash both
/// keep them ignored). `env --default-signal` can, but only GNU's.
///
/// What exec does reset is a *caught* signal: "signals set to be caught by
/// the calling process image shall be set to the default action in the new
/// process image" (POSIX, exec), while ignored ones stay ignored. So xtask
/// catches each stop signal that it finds ignored, with Tokio's handler (a
/// safe API). Nobody listens to that handler, so to xtask the signal is as
/// good as ignored still, as whoever started it asked; only its children see
/// the difference. A signal at its default action is left alone (Ctrl-C must
/// still end xtask, or `cargo test`), and so is one that xtask already
/// catches (`observe` does, in `wait.rs`): exec resets both to the default.
fn stop_signals_reach_children() -> anyhow::Result<()> {
    static CAUGHT: OnceLock<Result<(), String>> = OnceLock::new();
    let caught = CAUGHT.get_or_init(|| {
        let mut to_catch = Vec::new();
        for (kind, name) in STOP_SIGNALS {
            if ignores("self", kind)? {
                to_catch.push((kind, name));
            }
        }
        if to_catch.is_empty() {
            return Ok(());
        }
        // The handler outlives the runtime and the listener (Tokio's
        // documentation: "the default platform behavior will NOT be reset").
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(|e| format!("cannot start a runtime to catch signals: {e}"))?;
        let _in_runtime = runtime.enter();
        for (kind, name) in to_catch {
            // Dropped at once: the handler stays, nothing listens.
            drop(tokio::signal::unix::signal(kind).map_err(|e| {
                format!("cannot catch {name}, which xtask was started with ignored: {e}")
            })?);
        }
        Ok(())
    });
    caught.clone().map_err(anyhow::Error::msg)
}

/// Whether `process` (`self`, or a pid) ignores `signal`: bit `n - 1` of the
/// `SigIgn` mask in its `/proc/.../status` is signal `n`.
fn ignores(process: &str, signal: SignalKind) -> Result<bool, String> {
    let path = format!("/proc/{process}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .ok_or_else(|| format!("no SigIgn mask in {path}"))?;
    Ok(mask & (1 << (signal.as_raw_value() - 1)) != 0)
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

    /// Set in the test process that
    /// `the_whole_pipeline_gets_the_signal_from_an_xtask_started_ignoring_it`
    /// starts.
    const STARTED_IGNORING: &str = "XTASK_TEST_STARTED_IGNORING_SIGINT";

    #[test]
    fn the_whole_pipeline_gets_the_signal() {
        if std::env::var_os(STARTED_IGNORING).is_some() {
            // The condition the test below reproduces, before anything is spawned.
            assert!(ignores("self", SignalKind::interrupt()).unwrap());
            assert!(ignores("self", SignalKind::terminate()).unwrap());
        }
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
        // Fails at once where the signal would be lost and the stop below
        // would wait out its limit.
        assert!(
            !ignores(&inner.to_string(), SignalKind::interrupt()).unwrap(),
            "the pipeline's sleep ignores SIGINT"
        );
        let status = guard.stop(Signal::INT, Duration::from_secs(60)).unwrap();
        assert!(!status.success());
        // The sleep was bash's grandchild; init reaps it once it has died.
        wait::until(Duration::from_secs(60), "the inner sleep to end", || {
            Ok((!alive(inner)).then_some(()))
        })
        .unwrap();
    }

    /// The test above, in a test process started with SIGINT and SIGTERM
    /// ignored, as a script's background job (`cmd &`) or some CI runners
    /// start it: the ignored signals must not reach the pipeline ignored.
    #[test]
    fn the_whole_pipeline_gets_the_signal_from_an_xtask_started_ignoring_it() {
        let output = Command::new("sh")
            .arg("-c")
            .arg("trap '' INT TERM; exec \"$@\"")
            .arg("sh")
            .arg(std::env::current_exe().unwrap())
            .args([
                "observe::guard::tests::the_whole_pipeline_gets_the_signal",
                "--exact",
                "--nocapture",
            ])
            .env(STARTED_IGNORING, "1")
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
        assert!(
            output.status.success() && stdout.contains("1 passed"),
            "{}\n{stdout}\n{stderr}",
            output.status
        );
    }
}
