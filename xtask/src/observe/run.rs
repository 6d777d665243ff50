//! Runs a chapter's steps (see `steps.rs` for what each kind means) and
//! writes what they printed into the observed folder.
//!
//! Every process is a [`Guarded`] child (servers through `server.rs`), and
//! the [`Runner`] owns them all:
//! however a chapter ends (an error, a panic, Ctrl-C), dropping the runner
//! stops the background commands and then the servers, newest first. Raw
//! output goes to a scratch folder first and is normalised on its way out.

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use rustix::process::Signal as UnixSignal;

use crate::observe::{
    guard::Guarded,
    output::{self, Normalise},
    server::{Server, read_lossy},
    steps::{self, Action, Chapter},
    wait,
};
use mdbook_figures::times::{self, Times};

/// A command may build in release mode before it runs an experiment.
const RUN_LIMIT: Duration = Duration::from_secs(30 * 60);
/// A server drains its calls for up to 30 s (their DRAIN_TIMEOUT) before it exits.
const STOP_LIMIT: Duration = Duration::from_secs(45);
/// A server that stops by itself has been told to by then (`--calls`).
const EXIT_LIMIT: Duration = Duration::from_secs(60);
/// The client's `cargo run` may wait for cargo's lock or build first.
const CONNECT_LIMIT: Duration = Duration::from_secs(180);
/// Another run may hold the default ports for a while.
const FREE_PORTS_LIMIT: Duration = Duration::from_secs(120);
/// A server logs a moment after its client has given up; and a call is in
/// the server's slow part this long after its client has connected.
const SETTLE: Duration = Duration::from_millis(500);

struct Background {
    file: String,
    command: String,
    started: Instant,
    child: Guarded,
    output: PathBuf,
    normalise: Normalise,
    _tmp: Option<tempfile::TempDir>,
}

pub struct Runner {
    root: PathBuf,
    out: PathBuf,
    target: PathBuf,
    scratch: tempfile::TempDir,
    normalise: Normalise,
    background: Vec<Background>,
    servers: Vec<Server>,
    spawned: usize,
    /// How long each command of the chapter took (`mdbook_figures::times`).
    times: Vec<(String, Duration, bool)>,
}

impl Drop for Runner {
    fn drop(&mut self) {
        // Clients before the servers they call; each guard stops its process.
        while self.background.pop().is_some() {}
        while self.servers.pop().is_some() {}
    }
}

impl Runner {
    /// Writes into `out`; commands run at `root`, servers from `target`.
    pub fn new(root: &Path, out: &Path, target: &Path) -> anyhow::Result<Runner> {
        Ok(Runner {
            root: root.to_path_buf(),
            out: out.to_path_buf(),
            target: target.to_path_buf(),
            scratch: tempfile::Builder::new().prefix("xtask-observe").tempdir()?,
            normalise: Normalise::new(root),
            background: Vec::new(),
            servers: Vec::new(),
            spawned: 0,
            times: Vec::new(),
        })
    }

    pub fn chapter(&mut self, chapter: &Chapter) -> anyhow::Result<()> {
        let normalise = self.normalise.clone().strip_cr(chapter.strip_cr);
        let started = Instant::now();
        self.times.clear();
        for step in &chapter.steps {
            eprintln!(
                "observe {} step {}: {}",
                chapter.name,
                step.number,
                summary(&step.action)
            );
            self.step(&step.action, &normalise).with_context(|| {
                format!(
                    "{}:{}: step {}",
                    chapter.path.display(),
                    step.line,
                    step.number
                )
            })?;
        }
        let times = Times::new(started.elapsed(), &std::mem::take(&mut self.times));
        self.write(&times::file(&chapter.name), &times.to_toml()?, false)
    }

    fn step(&mut self, action: &Action, normalise: &Normalise) -> anyhow::Result<()> {
        match action {
            Action::Run(run) => self.run(run, normalise),
            Action::Start(start) => self.start(start, normalise),
            Action::Stop(stop) => {
                let signal = match stop.signal {
                    steps::Signal::Interrupt => UnixSignal::INT,
                    steps::Signal::Terminate => UnixSignal::TERM,
                };
                let mut server = self.take_server(&stop.stop)?;
                server.child.stop(signal, STOP_LIMIT)?;
                self.finish(server, stop.file.as_deref(), false, normalise)
            }
            Action::Wait(w) => {
                if let Some(i) = self.background.iter().position(|b| b.file == w.wait) {
                    let mut command = self.background.remove(i);
                    let status = command.child.wait(RUN_LIMIT)?;
                    self.times
                        .push((command.command.clone(), command.started.elapsed(), false));
                    let raw = read_lossy(&command.output)?;
                    let text = output::command_output(&command.command, &raw, status);
                    self.write(&command.file, &command.normalise.apply(&text), false)
                } else {
                    let mut server = self.take_server(&w.wait)?;
                    server.child.wait(EXIT_LIMIT)?;
                    self.finish(server, w.file.as_deref(), w.append, normalise)
                }
            }
            Action::ServerLog(log) => {
                wait::pause(SETTLE)?;
                let text = self.server(log.of.as_deref())?.take_log(false)?;
                self.write(&log.server_log, &normalise.apply(&text), false)
            }
            Action::WaitForConnection(w) => {
                let port = w.wait_for_connection;
                let what = format!("a client to connect to port {port}");
                wait::until(CONNECT_LIMIT, &what, || {
                    Ok((program::proc::established_on(port) > 0).then_some(()))
                })?;
                wait::pause(SETTLE)
            }
            Action::WaitForFreePorts(w) => {
                let ports = &w.wait_for_free_ports;
                let what = format!("nothing to listen on ports {ports:?}");
                wait::until(FREE_PORTS_LIMIT, &what, || {
                    Ok(ports.iter().all(|p| wait::port_is_free(*p)).then_some(()))
                })
            }
            Action::Copy(copy) => {
                let text = read_lossy(&self.source(&copy.copy))?;
                let mut lines: Vec<&str> = text
                    .lines()
                    .filter(|l| copy.lines_with.iter().all(|w| l.contains(w.as_str())))
                    .collect();
                lines.truncate(copy.head.unwrap_or(usize::MAX));
                let kept: String = lines.iter().map(|l| format!("{l}\n")).collect();
                self.write(&copy.to, &kept, false)
            }
            Action::Move(m) => {
                let from = self.source(&m.from);
                std::fs::copy(&from, self.out.join(&m.to))
                    .with_context(|| format!("cannot copy {} to {}", m.from, m.to))?;
                std::fs::remove_file(&from).with_context(|| format!("cannot remove {}", m.from))
            }
        }
    }

    fn run(&mut self, run: &steps::Run, normalise: &Normalise) -> anyhow::Result<()> {
        // `{tmp}` in the environment: an empty folder of its own, shown as relative.
        let tmp = match run.env.values().any(|v| v.contains("{tmp}")) {
            true => Some(tempfile::tempdir()?),
            false => None,
        };
        let normalise = match &tmp {
            Some(t) => normalise.clone().with_prefix(t.path()),
            None => normalise.clone(),
        };
        let output = self.scratch_path("output");
        let sink = File::create(&output)?;
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(output::quiet_cargo(&run.run))
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(sink.try_clone()?)
            .stderr(sink);
        for (name, value) in &run.env {
            let tmp_dir = tmp.as_ref().map(|t| t.path().display().to_string());
            command.env(
                name,
                value.replace("{tmp}", tmp_dir.as_deref().unwrap_or("")),
            );
        }
        // The log a command is observed with starts where the command does.
        if let Some(of) = &run.of {
            self.server(Some(of))?.skip_log()?;
        }
        let started = Instant::now();
        let mut child = Guarded::spawn(format!("`{}`", run.run), command)?;
        if run.background {
            self.background.push(Background {
                file: run
                    .file
                    .clone()
                    .context("checked: a background run has a file")?,
                command: run.run.clone(),
                started,
                child,
                output,
                normalise,
                _tmp: tmp,
            });
            return Ok(());
        }
        let status = child.wait(RUN_LIMIT)?;
        self.times.push((run.run.clone(), started.elapsed(), false));
        let raw = read_lossy(&output)?;
        match &run.file {
            Some(file) => {
                let text = output::command_output(&run.run, &raw, status);
                self.write(file, &normalise.apply(&text), false)?;
            }
            None if !status.success() => bail!("`{}` failed ({status}):\n{raw}", run.run),
            None => {}
        }
        if let (Some(file), Some(of)) = (&run.log, &run.of) {
            wait::pause(SETTLE)?;
            let text = self.server(Some(of))?.take_log(false)?;
            self.write(file, &normalise.apply(&text), false)?;
        }
        Ok(())
    }

    fn start(&mut self, start: &steps::Start, normalise: &Normalise) -> anyhow::Result<()> {
        let scratch = self.scratch_path(&start.start);
        let started = Instant::now();
        let mut server = Server::start(start, &self.root, &self.target, &scratch)?;
        // A server's time is how long it took to be ready, under the command
        // a reader types for it (its environment first, as a shell writes it).
        let env: String = start.env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
        self.times.push((
            format!("{env}{}", start.command_line()),
            started.elapsed(),
            true,
        ));
        let startup = server.take_log(false)?;
        self.servers.push(server);
        if let Some(file) = &start.file {
            let text = format!("$ {}\n{startup}", start.command_line());
            self.write(file, &normalise.apply(&text), false)?;
        }
        Ok(())
    }

    /// Writes what a stopped server logged since the last file took its log,
    /// then its whole log and stdout where the start step asked for them.
    fn finish(
        &mut self,
        mut server: Server,
        file: Option<&str>,
        append: bool,
        normalise: &Normalise,
    ) -> anyhow::Result<()> {
        let rest = server.take_log(true)?;
        if let Some(file) = file {
            self.write(file, &normalise.apply(&rest), append)?;
        }
        if let Some(file) = &server.log_file {
            self.write(file, &normalise.apply(&read_lossy(&server.log)?), false)?;
        }
        if let Some((path, file)) = &server.stdout {
            self.write(file, &normalise.apply(&read_lossy(path)?), false)?;
        }
        Ok(())
    }

    fn server(&mut self, program: Option<&str>) -> anyhow::Result<&mut Server> {
        let program = program.context("checked: a log step names its server")?;
        self.servers
            .iter_mut()
            .find(|s| s.program == program)
            .with_context(|| format!("{program} is not running"))
    }

    fn take_server(&mut self, program: &str) -> anyhow::Result<Server> {
        let i = self
            .servers
            .iter()
            .position(|s| s.program == program)
            .with_context(|| format!("{program} is not running"))?;
        Ok(self.servers.remove(i))
    }

    /// `copy` and `move` read from the workspace root, `observed/` from this run.
    fn source(&self, path: &str) -> PathBuf {
        match path.strip_prefix("observed/") {
            Some(name) => self.out.join(name),
            None => self.root.join(path),
        }
    }

    fn scratch_path(&mut self, name: &str) -> PathBuf {
        self.spawned += 1;
        self.scratch.path().join(format!("{}-{name}", self.spawned))
    }

    fn write(&self, name: &str, text: &str, append: bool) -> anyhow::Result<()> {
        let path = self.out.join(name);
        let text = match append {
            true => std::fs::read_to_string(&path).unwrap_or_default() + text,
            false => text.to_string(),
        };
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    }
}

/// A few words for the progress line.
fn summary(action: &Action) -> String {
    match action {
        Action::Run(r) => r.file.clone().unwrap_or_else(|| r.run.clone()),
        Action::Start(s) => format!("start {}", s.start),
        Action::Stop(s) => format!("stop {}", s.stop),
        Action::Wait(w) => format!("wait for {}", w.wait),
        Action::ServerLog(l) => l.server_log.clone(),
        Action::WaitForConnection(w) => {
            format!("wait for a connection to :{}", w.wait_for_connection)
        }
        Action::WaitForFreePorts(w) => {
            format!("wait for free ports {:?}", w.wait_for_free_ports)
        }
        Action::Copy(c) => c.to.clone(),
        Action::Move(m) => m.to.clone(),
    }
}
