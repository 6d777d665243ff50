//! `cargo xtask ...`: the workshop's maintenance tasks.
//!
//! - `observe` reruns every command the book shows and writes what it printed
//!   to `book/src/observed/` (the script is `book/observe.sh`);
//! - `observe --check` reruns them into a scratch folder and fails if any
//!   command now fails where it succeeded (or the reverse): CI's proof that the
//!   book's commands still work;
//! - `check-book` checks includes, links, chapter shape, quizzes and every
//!   command in the book against the real programs;
//! - `answers` regenerates the answers appendix from the quizzes;
//! - `browser` opens the built book in headless Chromium and checks that a
//!   quiz and a plot really render.

mod browser;
mod check;
mod clis;
mod markdown;
mod quiz;

use std::{path::Path, process::ExitCode};

use clap::{Parser, Subcommand};

use crate::check::{Book, workspace_root};

/// The workshop's maintenance tasks (run as `cargo xtask <task>`).
#[derive(Parser, Debug)]
#[command(name = "xtask")]
pub struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand, Debug)]
enum Task {
    /// Regenerate book/src/observed/ from real runs (or, with --check, compare)
    Observe {
        /// Rerun into target/observed-check/ and compare with the book's files
        #[arg(long)]
        check: bool,
    },
    /// Check the book against the code: includes, links, shape, quizzes, commands
    CheckBook,
    /// Regenerate book/src/answers.md from book/quizzes/
    Answers,
    /// Render the built book in headless Chromium; screenshots go to target/browser/
    Browser,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let root = workspace_root();
    let result = match cli.task {
        Task::Observe { check } => observe(&root, check),
        Task::CheckBook => check_book(&root),
        Task::Answers => answers(&root),
        Task::Browser => browser::check(&root),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn check_book(root: &Path) -> anyhow::Result<()> {
    let problems = check::check(&Book {
        root: root.to_path_buf(),
    })?;
    for p in &problems {
        eprintln!("{p}");
    }
    anyhow::ensure!(
        problems.is_empty(),
        "{} problem(s) in the book",
        problems.len()
    );
    println!("the book's includes, links, chapters, quizzes and commands check out");
    Ok(())
}

fn answers(root: &Path) -> anyhow::Result<()> {
    let book = Book {
        root: root.to_path_buf(),
    };
    let text = quiz::appendix(&book.quizzes()?);
    std::fs::write(book.answers_path(), text)?;
    println!("wrote {}", book.answers_path().display());
    Ok(())
}

fn observe(root: &Path, check: bool) -> anyhow::Result<()> {
    let book_dir = root.join("book/src/observed");
    let out = if check {
        root.join("target/observed-check")
    } else {
        book_dir.clone()
    };
    if check {
        let _ = std::fs::remove_dir_all(&out);
    }
    let status = std::process::Command::new("bash")
        .arg(root.join("book/observe.sh"))
        .env("OBSERVED_DIR", &out)
        .status()?;
    anyhow::ensure!(status.success(), "book/observe.sh failed ({status})");
    if !check {
        println!("observed outputs written to {}", out.display());
        return Ok(());
    }
    let drift = compare_observed(&book_dir, &out)?;
    for d in &drift {
        eprintln!("{d}");
    }
    anyhow::ensure!(
        drift.is_empty(),
        "{} observed command(s) behave differently now",
        drift.len()
    );
    println!(
        "every observed command behaves as the book shows (fresh outputs in {})",
        out.display()
    );
    Ok(())
}

/// curl's exit status for a refused TLS handshake depends on a race (whether the
/// alert or the closed socket reaches it first, chapter 3), so for curl a
/// failure is a failure; our own programs' statuses must match exactly.
fn same_curl_failure(old: &str, new: &str) -> bool {
    let failed = |text: &str| text.lines().any(|l| l.starts_with("(exit status"));
    old.lines().next().is_some_and(|l| l.contains("curl ")) && failed(old) && failed(new)
}

/// Compares what matters in a rerun: the same commands ran, and each one
/// succeeded or failed as before. Timings and timestamps are allowed to differ.
fn compare_observed(book: &Path, fresh: &Path) -> anyhow::Result<Vec<String>> {
    let mut drift = Vec::new();
    for entry in std::fs::read_dir(book)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let old = std::fs::read_to_string(&path)?;
        let Ok(new) = std::fs::read_to_string(fresh.join(&name)) else {
            drift.push(format!(
                "{name}: the book has it, but the rerun did not write it"
            ));
            continue;
        };
        let command = |text: &str| {
            text.lines()
                .next()
                .filter(|l| l.starts_with("$ "))
                .map(str::to_string)
        };
        let status = |text: &str| {
            text.lines()
                .rev()
                .find(|l| l.starts_with("(exit status"))
                .map(str::to_string)
        };
        if command(&old) != command(&new) {
            drift.push(format!(
                "{name}: the command changed: {:?} -> {:?}",
                command(&old),
                command(&new)
            ));
        } else if command(&old).is_some()
            && status(&old) != status(&new)
            && !same_curl_failure(&old, &new)
        {
            let show = |s: Option<String>| s.unwrap_or_else(|| "success".into());
            drift.push(format!(
                "{name}: `{}` was {} and is now {}",
                command(&old).unwrap_or_default(),
                show(status(&old)),
                show(status(&new))
            ));
        }
    }
    Ok(drift)
}
