//! How long a reader waits at each step, measured, not guessed.
//!
//! `cargo xtask observe` times every command it runs and keeps the times in
//! `book/src/observed/chNN-times.toml`; the programs were built before the
//! first step, so a time is the run alone. A full experiment, which the
//! observations do not run, is timed by its own run: the `started_unix_s` and
//! `ended_unix_s` of the `meta.json` it wrote into `book/src/results/`.
//!
//! [`annotate`] puts the time under each console block of a page, so the
//! book shows what the runs measured and cannot drift from them.

use std::{collections::HashMap, path::Path, time::Duration};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// One chapter's observed commands and how long each took.
#[derive(Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Times {
    /// Every step of the chapter, servers and waits included.
    pub total_s: f64,
    #[serde(default, rename = "command")]
    pub commands: Vec<Command>,
}

#[derive(Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Command {
    pub run: String,
    pub seconds: f64,
    /// A server: `seconds` is how long it took to be ready; it then runs on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub server: bool,
}

/// `ch10-times.toml`, beside the chapter's other observed files.
pub fn file(chapter: &str) -> String {
    format!("{chapter}-times.toml")
}

impl Times {
    /// `commands`: each command, how long it took, and whether it is a server.
    pub fn new(total: Duration, commands: &[(String, Duration, bool)]) -> Times {
        let round = |d: Duration| (d.as_secs_f64() * 10.0).round() / 10.0;
        Times {
            total_s: round(total),
            commands: commands
                .iter()
                .map(|(run, took, server)| Command {
                    run: run.clone(),
                    seconds: round(*took),
                    server: *server,
                })
                .collect(),
        }
    }

    pub fn to_toml(&self) -> anyhow::Result<String> {
        Ok(format!(
            "# How long each command took when `cargo xtask observe` ran this chapter, on\n\
             # the machine its -machine.txt names; built beforehand, so the build is excluded.\n\
             {}",
            toml::to_string(self)?
        ))
    }

    /// The chapter's times, or none if it was never observed with them.
    pub fn read(src: &Path, chapter: &str) -> anyhow::Result<Times> {
        let path = src.join("observed").join(file(chapter));
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).with_context(|| format!("in {}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Times::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// The longest time a command took (a command may be run more than once).
    fn of(&self, run: &str, server: bool) -> Option<f64> {
        self.commands
            .iter()
            .filter(|c| c.run == run && c.server == server)
            .map(|c| c.seconds)
            .reduce(f64::max)
    }
}

/// "about 40 s", "about 3 min", "about 1 h 10 min".
pub fn about(seconds: f64) -> String {
    let s = seconds.max(1.0);
    match s {
        s if s < 10.0 => format!("about {s:.0} s"),
        s if s < 90.0 => format!("about {:.0} s", (s / 5.0).round() * 5.0),
        s if s < 3600.0 => format!("about {:.0} min", (s / 60.0).round()),
        s => format!(
            "about {:.0} h {:.0} min",
            (s / 3600.0).floor(),
            (s % 3600.0 / 60.0).round()
        ),
    }
}

/// The results folder a full run writes (`--out book/src/results/ch14`).
fn results_folder(command: &str) -> Option<&str> {
    let mut words = command.split_whitespace();
    while let Some(word) = words.next() {
        if word == "--out" {
            return words.next()?.strip_prefix("book/src/results/");
        }
    }
    None
}

/// How long the kept run in `book/src/results/<folder>` took, if it says.
fn kept_run(src: &Path, folder: &str) -> Option<f64> {
    let text = std::fs::read_to_string(src.join("results").join(folder).join("meta.json")).ok()?;
    let meta: serde_json::Value = serde_json::from_str(&text).ok()?;
    let field = |name: &str| meta.get(name)?.as_f64();
    Some(field("ended_unix_s")? - field("started_unix_s")?)
}

/// What the book says under one console block, or `None` when nothing in
/// it was timed. `kept` names the results folder of a full run the block
/// starts without naming it (`<!-- kept run: ch13 -->` under the block).
pub fn note(src: &Path, times: &Times, block: &Block) -> Option<String> {
    let observed: Vec<f64> = block
        .commands
        .iter()
        .filter_map(|c| times.of(c, false))
        .collect();
    let servers: Vec<f64> = block
        .commands
        .iter()
        .filter_map(|c| times.of(c, true))
        .collect();
    let full_runs: Vec<&str> = block
        .commands
        .iter()
        .filter_map(|c| results_folder(c))
        .chain(block.kept.as_deref())
        .collect();
    let kept: Vec<f64> = full_runs.iter().filter_map(|f| kept_run(src, f)).collect();
    let mut parts = Vec::new();
    if !observed.is_empty() {
        parts.push(format!(
            "{} when observed, build excluded",
            about(observed.iter().sum())
        ));
    }
    if !servers.is_empty() {
        parts.push(format!(
            "ready in {} when observed, build excluded; it runs until you stop it",
            about(servers.iter().sum())
        ));
    }
    if !kept.is_empty() {
        parts.push(format!("the kept run took {}", about(kept.iter().sum())));
    } else if !full_runs.is_empty() {
        // Runs kept before the harness wrote `ended_unix_s` say so, rather
        // than leave the reader guessing.
        parts.push("the kept run predates the harness recording its duration".to_string());
    }
    if parts.is_empty()
        && let Some(why) = &block.untimed
    {
        parts.push(format!("not timed by the observations: {why}"));
    }
    (!parts.is_empty()).then(|| format!("*⏱ {}.*", parts.join("; ")))
}

/// One console block of a page.
#[derive(Debug, Default)]
pub struct Block<'a> {
    /// The line its closing fence is on (0-based).
    pub close: usize,
    /// Its commands: the lines that are not blank or comments.
    pub commands: Vec<&'a str>,
    /// The kept run it starts, from a `<!-- kept run: NAME -->` line below it.
    pub kept: Option<String>,
    /// Why the observations do not time it, from a `<!-- not timed: WHY -->`
    /// line below it: said to the reader, never left silent.
    pub untimed: Option<String>,
}

const KEPT: &str = "<!-- kept run: ";
const UNTIMED: &str = "<!-- not timed: ";

/// The console blocks of a page, in order.
pub fn console_blocks(text: &str) -> Vec<Block<'_>> {
    let mut blocks: Vec<Block> = Vec::new();
    let mut open: Option<Vec<&str>> = None;
    let mut last_closed: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        match &mut open {
            None if trimmed == "```console" => open = Some(Vec::new()),
            None => {
                if let Some(block) = last_closed.and_then(|b| blocks.get_mut(b)) {
                    let marked = |prefix: &str| {
                        let text = trimmed.strip_prefix(prefix)?.strip_suffix(" -->")?;
                        Some(text.trim().to_string())
                    };
                    block.kept = block.kept.take().or_else(|| marked(KEPT));
                    block.untimed = block.untimed.take().or_else(|| marked(UNTIMED));
                }
                if !trimmed.is_empty() {
                    last_closed = None;
                }
            }
            Some(_) if trimmed.starts_with("```") => {
                blocks.push(Block {
                    close: i,
                    commands: open.take().unwrap_or_default(),
                    kept: None,
                    untimed: None,
                });
                last_closed = Some(blocks.len() - 1);
            }
            Some(commands) => {
                if !trimmed.is_empty() && !trimmed.starts_with('#') {
                    commands.push(trimmed);
                }
            }
        }
    }
    blocks
}

/// The page with a line of measured time under each console block that has one.
pub fn annotate(text: &str, src: &Path, times: &Times) -> String {
    let notes: HashMap<usize, String> = console_blocks(text)
        .iter()
        .filter_map(|block| Some((block.close, note(src, times, block)?)))
        .collect();
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.lines().enumerate() {
        out.push_str(line);
        out.push('\n');
        if let Some(note) = notes.get(&i) {
            out.push('\n');
            out.push_str(note);
            out.push('\n');
        }
    }
    out
}

/// Where a page asks for the short path's table: every chapter's observed
/// commands, in the book's order, with the time they took.
pub const SHORT_PATH: &str = "{{#short-path}}";

/// The short path through the book, measured: for each chapter in
/// SUMMARY.md's order, how long all its observed steps took (servers,
/// waits and quick runs, the build excluded), and the total.
pub fn short_path(src: &Path) -> anyhow::Result<String> {
    let summary = std::fs::read_to_string(src.join("SUMMARY.md"))
        .with_context(|| format!("cannot read {}", src.join("SUMMARY.md").display()))?;
    let mut table = String::from("| chapter | its commands, observed | took |\n|---|---:|---:|\n");
    let (mut total, mut seen) = (0.0, Vec::new());
    for line in summary.lines() {
        let Some((title, file)) = line
            .trim_start()
            .strip_prefix("- [")
            .and_then(|rest| rest.split_once("]("))
        else {
            continue;
        };
        let Some(chapter) = file.get(..4).filter(|c| c.starts_with("ch")) else {
            continue;
        };
        // A chapter of two pages was observed once.
        if seen.contains(&chapter) {
            continue;
        }
        seen.push(chapter);
        let times = Times::read(src, chapter)?;
        if times.commands.is_empty() {
            anyhow::bail!(
                "{chapter} has no {}: run `cargo xtask observe {chapter}`",
                file_name(chapter)
            );
        }
        total += times.total_s;
        table.push_str(&format!(
            "| {} ({title}) | {} | {} |\n",
            chapter.trim_start_matches("ch").trim_start_matches('0'),
            times.commands.len(),
            about(times.total_s).trim_start_matches("about "),
        ));
    }
    table.push_str(&format!(
        "| all | | {} |\n",
        about(total).trim_start_matches("about ")
    ));
    Ok(table)
}

fn file_name(chapter: &str) -> String {
    format!("observed/{}", file(chapter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_a_reader_would_say_them() {
        assert_eq!(about(0.2), "about 1 s");
        assert_eq!(about(7.4), "about 7 s");
        assert_eq!(about(42.0), "about 40 s");
        assert_eq!(about(200.0), "about 3 min");
        assert_eq!(about(4200.0), "about 1 h 10 min");
    }

    #[test]
    fn a_console_block_gets_its_commands_time_and_its_kept_runs() {
        let src = std::env::temp_dir().join(format!("figures-times-{}", std::process::id()));
        let results = src.join("results/ch99");
        std::fs::create_dir_all(&results).unwrap();
        std::fs::write(
            results.join("meta.json"),
            r#"{"started_unix_s": 1000, "ended_unix_s": 1600}"#,
        )
        .unwrap();
        let times = Times::new(
            Duration::from_secs(100),
            &[
                (
                    "cargo run -p a".into(),
                    Duration::from_millis(12_300),
                    false,
                ),
                ("cargo run -p s".into(), Duration::from_millis(900), true),
            ],
        );
        let block = |command: &str| format!("```console\n{command}\n```\n\n");
        let page = [
            block("cargo run -p a"),
            block("cargo run -p b -- --out book/src/results/ch99"),
            block("cargo run -p c"),
            block("cargo run -p d -- --out book/src/results/ch98"),
            block("cargo run -p e"),
            "<!-- kept run: ch99 -->\n\n".into(),
            block("cargo run -p s"),
            block("cargo test"),
            "<!-- not timed: CI runs it -->\n".into(),
        ]
        .concat();
        let out = annotate(&page, &src, &times);
        let notes: Vec<&str> = out.lines().filter(|l| l.contains('⏱')).collect();
        assert_eq!(
            notes,
            [
                "*⏱ about 10 s when observed, build excluded.*",
                "*⏱ the kept run took about 10 min.*",
                "*⏱ the kept run predates the harness recording its duration.*",
                "*⏱ the kept run took about 10 min.*",
                "*⏱ ready in about 1 s when observed, build excluded; it runs until you stop it.*",
                "*⏱ not timed by the observations: CI runs it.*",
            ],
            "one note per timed block, none for `cargo run -p c`: {out}"
        );
        let back: Times = toml::from_str(&times.to_toml().unwrap()).unwrap();
        assert_eq!(back, times);
        std::fs::remove_dir_all(&src).unwrap();
    }
}
