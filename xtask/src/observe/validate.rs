//! What a chapter's steps must get right before any of them runs: file names
//! of their own chapter, each written by one step (or appended to on purpose),
//! commands on one line, known servers, every server stopped and every
//! background command waited for. It also settles whose log a step reads when
//! only one server runs, so that running never has to guess.

use std::{collections::BTreeMap, path::Path};

use anyhow::{Context, bail, ensure};

use crate::observe::steps::{Action, Chapter, SERVERS, Step};

/// What has started and not ended, and which step did it.
#[derive(Default)]
struct State {
    servers: Vec<(String, usize)>,
    background: Vec<(String, usize)>,
    written: BTreeMap<String, usize>,
}

pub fn chapter(chapter: &mut Chapter) -> anyhow::Result<()> {
    let mut state = State::default();
    for step in &mut chapter.steps {
        let (line, number) = (step.line, step.number);
        check(&chapter.name, step, &mut state).map_err(|e| {
            anyhow::anyhow!("{}:{line}: step {number}: {e:#}", chapter.path.display())
        })?;
    }
    if let Some((program, step)) = state.servers.first() {
        bail!(
            "{}: {program}, started by step {step}, is never stopped (add a `stop` or `wait` step)",
            chapter.path.display()
        );
    }
    if let Some((file, step)) = state.background.first() {
        bail!(
            "{}: the background command of step {step} is never waited for (add `wait = \"{file}\"`)",
            chapter.path.display()
        );
    }
    Ok(())
}

fn check(chapter: &str, step: &mut Step, state: &mut State) -> anyhow::Result<()> {
    let number = step.number;
    let appends = matches!(&step.action, Action::Wait(w) if w.append);
    for name in step.action.outputs() {
        ensure!(
            name.starts_with(&format!("{chapter}-"))
                && !name.contains('/')
                && Path::new(name).extension().is_some(),
            "`{name}` is no file of this chapter: its files are named {chapter}-NAME.EXT"
        );
        if let Some(earlier) = state.written.get(name)
            && !appends
        {
            bail!("writes {name}, which step {earlier} writes too (`append = true` adds to it)");
        }
        state.written.entry(name.to_string()).or_insert(number);
    }
    match &mut step.action {
        Action::Run(run) => {
            let command = run.run.trim().to_string();
            ensure!(!command.is_empty(), "`run` is empty");
            ensure!(
                !command.contains('\n'),
                "a command is one line, as the book shows it"
            );
            run.run = command;
            ensure!(
                !(run.background && run.log.is_some()),
                "a background command has no `log`; take it with `server_log` after its `wait`"
            );
            ensure!(
                run.of.is_none() || run.log.is_some(),
                "`of` says whose log `log` takes, and this step has no `log`"
            );
            if run.log.is_some() {
                run.of = Some(whose_log(&run.of, state)?);
            }
            if run.background {
                let file = run
                    .file
                    .clone()
                    .context("a background command needs a `file`: its `wait` names it")?;
                state.background.push((file, number));
            }
        }
        Action::Start(start) => {
            if !SERVERS.iter().any(|s| s.program == start.start) {
                let known: Vec<&str> = SERVERS.iter().map(|s| s.program).collect();
                bail!(
                    "no server `{}` to start; the servers are {}",
                    start.start,
                    known.join(", ")
                );
            }
            if let Some((_, by)) = state.servers.iter().find(|(p, _)| *p == start.start) {
                bail!("{} runs already (started by step {by})", start.start);
            }
            ensure!(
                start.stdout.is_none() || start.log.is_some(),
                "`stdout` keeps stdout apart from the log that `log` names, and this step has no `log`"
            );
            ensure!(
                !start.args.iter().any(|a| a.starts_with("--ready-file")),
                "every server gets --ready-file from the runner; leave it out of `args`"
            );
            state.servers.push((start.start.clone(), number));
        }
        Action::Stop(stop) => end_server(&stop.stop, state)?,
        Action::Wait(wait) => {
            if let Some(i) = state.background.iter().position(|(f, _)| *f == wait.wait) {
                ensure!(
                    wait.file.is_none() && !wait.append,
                    "a background command's output goes to its own `file`; this `wait` takes none"
                );
                state.background.remove(i);
            } else if state.servers.iter().any(|(p, _)| *p == wait.wait) {
                ensure!(
                    wait.file.is_some() || !wait.append,
                    "`append` adds to `file`, and this step has none"
                );
                end_server(&wait.wait, state)?;
            } else {
                bail!(
                    "nothing to wait for: `{}` is neither a background command's file nor a running server",
                    wait.wait
                );
            }
        }
        Action::ServerLog(log) => log.of = Some(whose_log(&log.of, state)?),
        Action::WaitForConnection(w) => {
            ensure!(w.wait_for_connection != 0, "port 0 is no port to wait on")
        }
        Action::WaitForFreePorts(w) => ensure!(
            !w.wait_for_free_ports.is_empty() && !w.wait_for_free_ports.contains(&0),
            "`wait_for_free_ports` lists real ports"
        ),
        Action::Copy(copy) => relative(&copy.copy)?,
        Action::Move(m) => relative(&m.from)?,
    }
    Ok(())
}

fn end_server(program: &str, state: &mut State) -> anyhow::Result<()> {
    let i = state
        .servers
        .iter()
        .position(|(p, _)| p == program)
        .with_context(|| format!("{program} is not running here"))?;
    state.servers.remove(i);
    Ok(())
}

/// The server a log step reads: the one named, or the only one running.
fn whose_log(of: &Option<String>, state: &State) -> anyhow::Result<String> {
    let running: Vec<&str> = state.servers.iter().map(|(p, _)| p.as_str()).collect();
    match (of, &running[..]) {
        (Some(name), _) if running.contains(&name.as_str()) => Ok(name.clone()),
        (Some(name), _) => bail!("`of = \"{name}\"`, but {name} is not running here"),
        (None, [only]) => Ok(only.to_string()),
        (None, []) => bail!("no server runs here, so there is no log to take"),
        (None, several) => bail!(
            "{} run here; say whose log with `of`",
            several.join(" and ")
        ),
    }
}

fn relative(path: &str) -> anyhow::Result<()> {
    let p = Path::new(path);
    ensure!(
        p.is_relative() && !p.components().any(|c| c.as_os_str() == ".."),
        "`{path}`: copy from inside the workspace, with a path relative to its root"
    );
    Ok(())
}
