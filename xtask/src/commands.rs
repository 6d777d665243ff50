//! The book's commands against the code and the observations:
//!
//! - [`check_commands`]: every command in a ```console block is either parsed
//!   by the real program's parser (`cargo run ...`, `cargo xtask ...`) or run
//!   by a step of `book/observe/*.toml` (everything else), which
//!   `cargo xtask observe --check` reruns in CI;
//! - [`check_observed`]: every observed file a page shows is one that a step
//!   writes, and every command's file in `book/src/observed/` starts with that
//!   very command, so that the data and the book's files cannot drift apart.

use std::{collections::BTreeSet, path::Path};

use crate::{
    check::{Book, at},
    clis,
    markdown::{Page, shell_segments},
    observe::{
        self,
        steps::{Action, Chapter},
    },
};

/// Tools the book mentions that CI does not run: Docker has no engine on the
/// workshop's machines, and `mdbook serve` never exits (CI runs `mdbook build`).
const NOT_RUN: [&str; 2] = ["docker", "mdbook"];

pub fn check_commands(page: &Page, observed: &BTreeSet<String>, problems: &mut Vec<String>) {
    for (line, command) in page.console_commands() {
        let segments = match shell_segments(&command) {
            Ok(s) => s,
            Err(e) => {
                problems.push(format!("{}: {e}", at(page, line)));
                continue;
            }
        };
        let mut needs_observation = false;
        for segment in segments {
            let words: Vec<String> = segment
                .into_iter()
                .skip_while(|w| is_env_assignment(w))
                .collect();
            match words.first().map(String::as_str) {
                Some("cargo") => {
                    if let Err(e) = check_cargo(&words[1..]) {
                        problems.push(format!("{}: `{command}`: {e:#}", at(page, line)));
                    }
                }
                Some(tool) if NOT_RUN.contains(&tool) => {}
                Some(_) => needs_observation = true,
                None => {}
            }
        }
        if needs_observation && !observed.contains(command.trim()) {
            problems.push(format!(
                "{}: the book shows `{command}`, but no step of book/observe/*.toml runs it (add a `run` step)",
                at(page, line)
            ));
        }
    }
}

pub fn is_env_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    })
}

/// `cargo run` is parsed against the program; other cargo commands must name
/// real packages.
fn check_cargo(words: &[String]) -> anyhow::Result<()> {
    match words.first().map(String::as_str) {
        Some("run") => clis::check_cargo_run(&clis::cargo_run(&words[1..])?),
        Some("xtask") => clis::check_cargo_run(&clis::CargoRun {
            package: "xtask".into(),
            target: None,
            example: false,
            args: words[1..].to_vec(),
        }),
        Some("build" | "test" | "clippy" | "install" | "fmt") => {
            if words[0] != "install" {
                for pair in words.windows(2) {
                    if (pair[0] == "-p" || pair[0] == "--package")
                        && !clis::is_workspace_package(&pair[1])?
                    {
                        anyhow::bail!("no workspace package `{}`", pair[1]);
                    }
                }
            }
            Ok(())
        }
        other => anyhow::bail!(
            "the book's checks do not know `cargo {}`",
            other.unwrap_or("")
        ),
    }
}

/// The observed files of the book (`observed/NAME` as pages include or link
/// them) against what the steps write; and each written command file's first
/// line against its command.
pub fn check_observed(
    book: &Book,
    pages: &[Page],
    problems: &mut Vec<String>,
) -> anyhow::Result<()> {
    let chapters = observe::steps::read_all(&book.root)?;
    let written: BTreeSet<String> = chapters
        .iter()
        .flat_map(|c| &c.steps)
        .flat_map(|s| s.action.outputs())
        .map(str::to_string)
        .chain(chapters.iter().map(|c| observe::machine_file(&c.name)))
        .collect();
    for page in pages {
        let shown = page
            .directives("include")
            .into_iter()
            .chain(page.links())
            .filter_map(|(line, target)| {
                let path = target.split(':').next()?.to_string();
                let (dir, name) = path.rsplit_once('/')?;
                (dir.rsplit('/').next() == Some("observed")).then(|| (line, name.to_string()))
            });
        for (line, name) in shown {
            if !written.contains(&name) {
                problems.push(format!(
                    "{}: shows observed/{name}, which no step of book/observe/*.toml writes",
                    at(page, line)
                ));
            }
        }
    }
    let observed = book.root.join(observe::OBSERVED);
    for chapter in &chapters {
        check_first_lines(chapter, &observed, problems);
    }
    Ok(())
}

fn check_first_lines(chapter: &Chapter, observed: &Path, problems: &mut Vec<String>) {
    for step in &chapter.steps {
        let (file, command) = match &step.action {
            Action::Run(run) => (run.file.as_deref(), run.run.clone()),
            Action::Start(start) => (start.file.as_deref(), start.command_line()),
            _ => continue,
        };
        let Some(file) = file else { continue };
        let at = format!(
            "{}:{}: step {}",
            chapter.path.display(),
            step.line,
            step.number
        );
        match std::fs::read_to_string(observed.join(file)) {
            Ok(text) if text.lines().next() == Some(format!("$ {command}").as_str()) => {}
            Ok(text) => problems.push(format!(
                "{at}: runs `{command}`, but observed/{file} shows {:?}; rerun `cargo xtask observe {}`",
                text.lines().next().unwrap_or(""),
                chapter.name
            )),
            Err(_) => problems.push(format!(
                "{at}: writes observed/{file}, which the book does not have; run `cargo xtask observe {}`",
                chapter.name
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(dir: &Path, text: &str) -> Page {
        let path = dir.join("p.md");
        std::fs::write(&path, text).unwrap();
        Page::read(&path).unwrap()
    }

    #[test]
    fn a_renamed_flag_in_a_console_block_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let page = page(
            dir.path(),
            "```console\ncargo run -p grpc-server -- --mtls\ncargo run -p grpc-server -- --mutual-tls\ncurl -sS https://localhost:8443/healthz\nmdbook serve book\n```\n",
        );
        let observed: BTreeSet<String> =
            ["curl -sS https://localhost:8443/healthz".to_string()].into();
        let mut problems = Vec::new();
        check_commands(&page, &observed, &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("--mutual-tls"));

        let mut problems = Vec::new();
        check_commands(&page, &BTreeSet::new(), &mut problems);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("no step of book/observe/*.toml runs it")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_file_whose_command_is_not_its_steps_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ch04-ls.txt"), "$ ls -l certs/\n").unwrap();
        std::fs::write(
            dir.path().join("ch04-server.txt"),
            "$ cargo run -p grpc-server\nlog\n",
        )
        .unwrap();
        let chapter = observe::steps::parse(
            Path::new("book/observe/ch04.toml"),
            "[[step]]\nstart = \"grpc-server\"\nfile = \"ch04-server.txt\"\n[[step]]\nrun = \"ls certs/\"\nfile = \"ch04-ls.txt\"\n[[step]]\nrun = \"pwd\"\nfile = \"ch04-pwd.txt\"\n[[step]]\nstop = \"grpc-server\"\n",
        )
        .unwrap();
        let mut problems = Vec::new();
        check_first_lines(&chapter, dir.path(), &mut problems);
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert!(problems[0].starts_with("book/observe/ch04.toml:4: step 2: runs `ls certs/`"));
        assert!(problems[1].contains("ch04-pwd.txt, which the book does not have"));
    }

    #[test]
    fn an_observed_file_no_step_writes_is_reported() {
        let root = tempfile::tempdir().unwrap();
        let dir = |d: &str| {
            let d = root.path().join(d);
            std::fs::create_dir_all(&d).unwrap();
            d
        };
        std::fs::write(
            dir("book/observe").join("ch04.toml"),
            "[[step]]\nrun = \"ls\"\nfile = \"ch04-ls.txt\"\n",
        )
        .unwrap();
        std::fs::write(dir("book/src/observed").join("ch04-ls.txt"), "$ ls\n").unwrap();
        let page = page(
            &dir("book/src"),
            "{{#include observed/ch04-ls.txt}}\n{{#include observed/ch04-gone.txt}}\n![plot](observed/ch04-plot.svg)\n",
        );
        let book = Book {
            root: root.path().to_path_buf(),
        };
        let mut problems = Vec::new();
        check_observed(&book, &[page], &mut problems).unwrap();
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert!(problems[0].contains("observed/ch04-gone.txt, which no step"));
        assert!(problems[1].contains("observed/ch04-plot.svg, which no step"));
    }
}
