//! `cargo xtask ...`: the workshop's maintenance tasks.
//!
//! - `observe` reruns every command the book shows, as the steps in
//!   `book/observe/chNN.toml` say, and writes what it printed to
//!   `book/src/observed/` (`observe ch04` does one chapter);
//! - `observe --check` reruns them into a scratch folder and fails if any
//!   command now fails where it succeeded (or the reverse): CI's proof that the
//!   book's commands still work;
//! - `check-book` checks includes, links, chapter shape, quizzes and every
//!   command in the book against the real programs;
//! - `hand-typed` lists the measured-looking numbers that pages type by hand (what
//!   check-book rejects), page by page;
//! - `answers` regenerates the answers appendix from the quizzes;
//! - `status-table` regenerates the book's table of gRPC status codes;
//! - `rerender` draws every committed run again from its records and fails
//!   on any difference (`--update` redraws them in place);
//! - `exercises` checks that every exercise's starter fails its tests, each
//!   saying what is still to do, and that its solution passes them;
//! - `browser` opens the built book in headless Chromium and checks that a
//!   quiz, a plot and the diagrams really render;
//! - `live-page` opens an experiment's `--live` page during a run and checks
//!   that it draws more as the run goes on.

mod anchors;
mod browser;
mod check;
mod clis;
mod commands;
mod exercises;
mod figures;
mod markdown;
mod observe;
mod quiz;
mod readme;
mod rerender;

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
        /// Only these chapters (ch04 ch12 ...), as book/observe/chNN.toml names them;
        /// every chapter when none is named
        #[arg(value_name = "CHAPTER")]
        chapters: Vec<String>,
        /// Rerun into target/observed-check/ and compare with the book's files
        #[arg(long)]
        check: bool,
    },
    /// Check the book against the code: includes, links, diagrams, shape, quizzes, commands
    CheckBook,
    /// List the numbers (with a unit, a decimal point or a thousands separator) that pages type by hand instead of drawing from a run
    HandTyped {
        /// Pages under book/src/ (ch06-clients.md ...); every page when none is named
        #[arg(value_name = "PAGE")]
        pages: Vec<String>,
    },
    /// Regenerate book/src/answers.md and instructors.md from book/quizzes/
    Answers,
    /// Regenerate book/src/generated/status-codes.md from proto::status
    StatusTable,
    /// Regenerate README.md's table of chapters from book/src/SUMMARY.md and each page's README line
    Readme,
    /// Draw every run kept in book/src/results/ again from its tables (with
    /// --render, into target/rerender/), and today's from its raw records in
    /// book/raw/; fail if a file differs
    Rerender {
        /// Redraw the committed runs in place instead of comparing
        #[arg(long)]
        update: bool,
        /// Reduce every run with raw records (book/raw/) from them first,
        /// not only today's
        #[arg(long)]
        from_raw: bool,
    },
    /// Check every exercise: its starter fails its tests, each saying what is
    /// still to do, and its solution passes them
    Exercises,
    /// Render the built book in headless Chromium; screenshots go to target/browser/
    Browser,
    /// Run chapter 11's quick experiment with --live and look at its page in
    /// headless Chromium twice: the second look must draw more than the first
    LivePage {
        /// Where the screenshot of the page goes
        #[arg(
            long,
            value_name = "PNG",
            default_value = "target/browser/ch11-live.png"
        )]
        shot: std::path::PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = program::args::<Cli>();
    let root = workspace_root();
    let result = match cli.task {
        Task::Observe { chapters, check } => observe::observe(&root, &chapters, check),
        Task::CheckBook => check_book(&root),
        Task::HandTyped { pages } => figures::list_hand_typed(&Book { root: root.clone() }, &pages),
        Task::Answers => answers(&root),
        Task::StatusTable => status_table(&root),
        Task::Readme => readme::write(&root),
        Task::Rerender { update, from_raw } => rerender::rerender(&root, update, from_raw),
        Task::Exercises => exercises::check(&root),
        Task::Browser => browser::check(&root),
        Task::LivePage { shot } => browser::live_page(&root, &root.join(shot)),
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
    println!("the book's includes, links, diagrams, chapters, quizzes and commands check out");
    Ok(())
}

fn answers(root: &Path) -> anyhow::Result<()> {
    let book = Book {
        root: root.to_path_buf(),
    };
    let quizzes = book.quizzes()?;
    std::fs::write(book.answers_path(), quiz::appendix(&quizzes))?;
    println!("wrote {}", book.answers_path().display());
    std::fs::write(book.instructors_path(), quiz::instructor_notes(&quizzes))?;
    println!("wrote {}", book.instructors_path().display());
    Ok(())
}

/// The book's copy of `cargo run -p proto --bin status_table`, which a test
/// compares with the code so that chapter 7 cannot drift from it.
fn status_table_path(root: &Path) -> std::path::PathBuf {
    root.join("book/src/generated/status-codes.md")
}

fn status_table(root: &Path) -> anyhow::Result<()> {
    let path = status_table_path(root);
    std::fs::write(&path, proto::status::markdown_table())?;
    println!(
        "wrote {} ({} codes)",
        path.display(),
        proto::status::TABLE.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_books_status_table_is_the_codes() {
        let path = status_table_path(&workspace_root());
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == proto::status::markdown_table(),
            "{} is out of date: run `cargo xtask status-table`",
            path.display()
        );
    }
}
