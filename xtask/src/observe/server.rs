//! A server the observations started: from its binary, as `cargo run -p
//! PACKAGE` would run it, ready once it has written its `--ready-file`, its
//! output in a log file that steps take from in whole lines.

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context, bail};

use crate::observe::{guard::Guarded, output, steps, wait};

/// Servers start from built binaries: seconds would do; this allows a busy machine.
const READY_LIMIT: Duration = Duration::from_secs(60);

pub struct Server {
    pub program: String,
    pub child: Guarded,
    pub log: PathBuf,
    /// How much of `log` earlier files have taken.
    seen: usize,
    /// Where its whole log, and its stdout when kept apart, go once it has stopped.
    pub log_file: Option<String>,
    pub stdout: Option<(PathBuf, String)>,
}

impl Server {
    /// Starts the server of a `start` step, with its files at `scratch.*`,
    /// and returns once it is ready (or says why it is not, with its log).
    pub fn start(
        start: &steps::Start,
        root: &Path,
        target: &Path,
        scratch: &Path,
    ) -> anyhow::Result<Server> {
        let profile = if start.release { "release" } else { "debug" };
        let binary = target.join(profile).join(&start.start);
        if !binary.exists() {
            bail!(
                "{} does not exist; the build before the steps should have made it",
                binary.display()
            );
        }
        let at = |ext: &str| PathBuf::from(format!("{}.{ext}", scratch.display()));
        let (ready, log) = (at("ready"), at("log"));
        let log_sink = File::create(&log)?;
        let mut command = Command::new(&binary);
        command
            .args(&start.args)
            .arg("--ready-file")
            .arg(&ready)
            .envs(&start.env)
            .env("RUST_LOG", "info")
            .current_dir(root)
            .stdin(Stdio::null())
            .stderr(log_sink.try_clone()?);
        let stdout = match &start.stdout {
            Some(file) => {
                command.stdout(File::create(at("stdout"))?);
                Some((at("stdout"), file.clone()))
            }
            None => {
                command.stdout(log_sink);
                None
            }
        };
        let mut child = Guarded::spawn(start.start.clone(), command)?;
        let waited = program::ready_file::wait(&ready, READY_LIMIT, || {
            wait::check_interrupt(&format!("starting {}", start.start))?;
            Ok(child.try_status()?.is_none())
        });
        if let Err(e) = waited {
            drop(child);
            bail!(
                "{} is not ready: {e:#}; its log:\n{}",
                start.start,
                read_lossy(&log)?
            );
        }
        Ok(Server {
            program: start.start.clone(),
            child,
            log,
            seen: 0,
            log_file: start.log.clone(),
            stdout,
        })
    }

    /// What it logged since the last call; while it runs, only whole lines.
    pub fn take_log(&mut self, stopped: bool) -> anyhow::Result<String> {
        let bytes = std::fs::read(&self.log)
            .with_context(|| format!("cannot read {}'s log", self.program))?;
        let new = &bytes[self.seen.min(bytes.len())..];
        let end = if stopped {
            new.len()
        } else {
            output::complete_lines(new)
        };
        self.seen += end;
        Ok(String::from_utf8_lossy(&new[..end]).into_owned())
    }

    /// Leaves what it logged so far out of the next file that takes its log.
    pub fn skip_log(&mut self) -> anyhow::Result<()> {
        self.take_log(false).map(drop)
    }
}

pub fn read_lossy(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
