//! The observations as data: `book/observe/chNN.toml`, one file per chapter,
//! whose `[[step]]`s run in order (book/observe/README.md describes each kind).
//!
//! - [`read_all`] reads every chapter's file and checks it whole before
//!   anything runs: an unknown kind or key, a file name of another chapter, a
//!   server never stopped or a `wait` for nothing is an error naming the file,
//!   the step and its line;
//! - [`select`] turns `ch04 ch12` into those chapters, in book order;
//! - [`SERVERS`] are the programs a `start` step may start.
//!
//! Running the steps is `run.rs`'s job.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use anyhow::{Context, bail};
use serde::{Deserialize, de::DeserializeOwned};

/// Where the chapters' step files live, from the workspace root.
pub const DIR: &str = "book/observe";

/// One chapter's observations.
#[derive(Debug)]
pub struct Chapter {
    /// `ch04`: the file's stem, and the prefix of every file its steps write.
    pub name: String,
    pub path: PathBuf,
    /// Write CRLF line ends as LF in every file of this chapter (`curl -D -`
    /// and `curl -i` print HTTP headers with CRLF).
    pub strip_cr: bool,
    pub steps: Vec<Step>,
}

#[derive(Debug)]
pub struct Step {
    /// 1-based position in the file, and the line where it starts.
    pub number: usize,
    pub line: usize,
    pub action: Action,
}

#[derive(Debug, PartialEq)]
pub enum Action {
    Run(Run),
    Start(Start),
    Stop(Stop),
    Wait(Wait),
    ServerLog(ServerLog),
    WaitForConnection(WaitForConnection),
    WaitForFreePorts(WaitForFreePorts),
    Copy(Copy),
    Move(Move),
}

/// `run = "COMMAND"`: runs `bash -c COMMAND` at the workspace root, as the
/// book prints it (`cargo run` as `cargo run -q`).
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Run {
    pub run: String,
    /// Gets `$ COMMAND`, stdout and stderr interleaved, `(exit status N)`.
    /// Without it the command is a preparation: its output is dropped and it
    /// must succeed.
    pub file: Option<String>,
    /// Runs while the next steps do, until a `wait = "FILE"`.
    #[serde(default)]
    pub background: bool,
    /// Gets what a running server logged while the command ran.
    pub log: Option<String>,
    /// Which server `log` reads, when more than one runs.
    pub of: Option<String>,
    /// `{tmp}` in a value is a fresh empty folder, written as relative in the output.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// `start = "PROGRAM"`: starts a server from its binary, as
/// `cargo run -p PACKAGE -- ARGS` would, and waits for its ready file.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Start {
    pub start: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// From target/release rather than target/debug.
    #[serde(default)]
    pub release: bool,
    /// Gets `$ cargo run ...` and what it logged until it was ready.
    pub file: Option<String>,
    /// Gets all it logged, once it has stopped.
    pub log: Option<String>,
    /// Gets its stdout, apart from its log (the stack's banner).
    pub stdout: Option<String>,
}

/// `stop = "PROGRAM"`: stops a server as a reader does, with Ctrl-C (or the
/// signal named), and waits until it has exited.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Stop {
    pub stop: String,
    #[serde(default)]
    pub signal: Signal,
    /// Gets what it logged since the last file that had its log.
    pub file: Option<String>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize, PartialEq)]
pub enum Signal {
    #[default]
    #[serde(rename = "SIGINT")]
    Interrupt,
    #[serde(rename = "SIGTERM")]
    Terminate,
}

/// `wait = "FILE"` (a background command) or `wait = "PROGRAM"` (a server
/// that stops by itself): waits until it has exited.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Wait {
    pub wait: String,
    /// For a server: gets what it logged since the last file that had its log.
    pub file: Option<String>,
    /// Adds to `file` instead of replacing it.
    #[serde(default)]
    pub append: bool,
}

/// `server_log = "FILE"`: what a running server logged since the last file
/// that had its log (half a second after the step before, since a server logs
/// a moment after its client has given up).
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerLog {
    pub server_log: String,
    pub of: Option<String>,
}

/// `wait_for_connection = PORT`: until a client holds a TCP connection to the
/// port, then half a second more: by then its call is in the server's slow part.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WaitForConnection {
    pub wait_for_connection: u16,
}

/// `wait_for_free_ports = [PORT, ...]`: until nothing listens on them (another
/// run may hold the default ports for a moment).
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WaitForFreePorts {
    pub wait_for_free_ports: Vec<u16>,
}

/// `copy = "PATH"`: a file a command wrote (from the workspace root;
/// `observed/NAME` is a file of this run) into the observed folder as `to`.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Copy {
    pub copy: String,
    pub to: String,
    /// Only its first N lines.
    pub head: Option<usize>,
    /// Only the lines that contain every one of these.
    #[serde(default)]
    pub lines_with: Vec<String>,
}

/// `move = "PATH"`: like `copy`, and the file is gone from where it was.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Move {
    #[serde(rename = "move")]
    pub from: String,
    pub to: String,
}

/// A program a `start` step may start: every one accepts `--ready-file PATH`.
pub struct Server {
    pub program: &'static str,
    pub package: &'static str,
}

pub const SERVERS: [Server; 7] = [
    Server {
        program: "workshop",
        package: "workshop",
    },
    Server {
        program: "grpc-server",
        package: "grpc-server",
    },
    Server {
        program: "rest-server",
        package: "rest-server",
    },
    Server {
        program: "frontend",
        package: "perf",
    },
    Server {
        program: "silent",
        package: "perf",
    },
    Server {
        program: "ingest",
        package: "ingest",
    },
    // `fleet replica` (chapter 16); its first argument names the subcommand.
    Server {
        program: "fleet",
        package: "fleet",
    },
];

impl Start {
    pub fn server(&self) -> &'static Server {
        SERVERS
            .iter()
            .find(|s| s.program == self.start)
            .expect("checked when the file was read")
    }

    /// The command a reader types for this server: `cargo run -p perf --bin
    /// frontend -- ARGS` (the root package, the stack, is plain `cargo run`).
    pub fn command_line(&self) -> String {
        let server = self.server();
        let mut line = String::from("cargo run");
        if self.release {
            line.push_str(" --release");
        }
        if server.package != "workshop" {
            line.push_str(&format!(" -p {}", server.package));
        }
        if server.program != server.package {
            line.push_str(&format!(" --bin {}", server.program));
        }
        if !self.args.is_empty() {
            line.push_str(" --");
            for arg in &self.args {
                line.push(' ');
                line.push_str(&shell_word(arg));
            }
        }
        line
    }
}

/// `arg` as a shell would need it typed.
fn shell_word(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=@,%+".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

impl Action {
    /// The files this step writes into the observed folder.
    pub fn outputs(&self) -> Vec<&str> {
        let all: Vec<Option<&String>> = match self {
            Action::Run(r) => vec![r.file.as_ref(), r.log.as_ref()],
            Action::Start(s) => vec![s.file.as_ref(), s.log.as_ref(), s.stdout.as_ref()],
            Action::Stop(s) => vec![s.file.as_ref()],
            Action::Wait(w) => vec![w.file.as_ref()],
            Action::ServerLog(l) => vec![Some(&l.server_log)],
            Action::Copy(c) => vec![Some(&c.to)],
            Action::Move(m) => vec![Some(&m.to)],
            Action::WaitForConnection(_) | Action::WaitForFreePorts(_) => vec![],
        };
        all.into_iter().flatten().map(String::as_str).collect()
    }
}

/// The keys that say what kind a step is; each step has exactly one.
const KINDS: [&str; 9] = [
    "run",
    "start",
    "stop",
    "wait",
    "server_log",
    "wait_for_connection",
    "wait_for_free_ports",
    "copy",
    "move",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepsFile {
    #[serde(default)]
    strip_cr: bool,
    #[serde(default)]
    step: Vec<toml::Spanned<toml::Table>>,
}

/// Reads and checks one chapter's file. `path` is shown in errors as given.
pub fn parse(path: &Path, text: &str) -> anyhow::Result<Chapter> {
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| is_chapter_name(s))
        .with_context(|| format!("{}: a step file is named chNN.toml", path.display()))?
        .to_string();
    let file: StepsFile =
        toml::from_str(text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut steps = Vec::new();
    for (i, spanned) in file.step.into_iter().enumerate() {
        let line = 1 + text[..spanned.span().start.min(text.len())]
            .matches('\n')
            .count();
        let (number, table) = (i + 1, spanned.into_inner());
        let action = action(table)
            .map_err(|e| anyhow::anyhow!("{}:{line}: step {number}: {e:#}", path.display()))?;
        steps.push(Step {
            number,
            line,
            action,
        });
    }
    let mut chapter = Chapter {
        name,
        path: path.to_path_buf(),
        strip_cr: file.strip_cr,
        steps,
    };
    crate::observe::validate::chapter(&mut chapter)?;
    Ok(chapter)
}

fn action(table: toml::Table) -> anyhow::Result<Action> {
    let kinds: Vec<&str> = KINDS
        .iter()
        .copied()
        .filter(|k| table.contains_key(*k))
        .collect();
    let kind = match kinds[..] {
        [kind] => kind,
        [] => bail!(
            "a step says what it does with one of the keys {}",
            KINDS.join(", ")
        ),
        _ => bail!(
            "a step does one thing; this one has {}",
            kinds.join(" and ")
        ),
    };
    fn typed<T: DeserializeOwned>(table: toml::Table) -> anyhow::Result<T> {
        toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| anyhow::anyhow!("{}", e.message()))
    }
    Ok(match kind {
        "run" => Action::Run(typed(table)?),
        "start" => Action::Start(typed(table)?),
        "stop" => Action::Stop(typed(table)?),
        "wait" => Action::Wait(typed(table)?),
        "server_log" => Action::ServerLog(typed(table)?),
        "wait_for_connection" => Action::WaitForConnection(typed(table)?),
        "wait_for_free_ports" => Action::WaitForFreePorts(typed(table)?),
        "copy" => Action::Copy(typed(table)?),
        _ => Action::Move(typed(table)?),
    })
}

fn is_chapter_name(s: &str) -> bool {
    s.len() == 4 && s.starts_with("ch") && s[2..].bytes().all(|b| b.is_ascii_digit())
}

/// Every chapter's observations, in book order.
pub fn read_all(root: &Path) -> anyhow::Result<Vec<Chapter>> {
    let dir = root.join(DIR);
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("cannot read {DIR}"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            paths.push(path);
        }
    }
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let shown = path.strip_prefix(root).unwrap_or(path);
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", shown.display()))?;
            parse(shown, &text)
        })
        .collect()
}

/// The chapters named (`ch04`), in book order; every chapter when none is.
pub fn select<'a>(chapters: &'a [Chapter], names: &[String]) -> anyhow::Result<Vec<&'a Chapter>> {
    for name in names {
        if !chapters.iter().any(|c| &c.name == name) {
            let known: Vec<&str> = chapters.iter().map(|c| c.name.as_str()).collect();
            bail!(
                "no {DIR}/{name}.toml: the chapters with observations are {}",
                known.join(", ")
            );
        }
    }
    Ok(chapters
        .iter()
        .filter(|c| names.is_empty() || names.contains(&c.name))
        .collect())
}
