//! `cargo xtask observe [chNN ...] [--check]`: reruns the commands the book
//! shows and writes what they printed into `book/src/observed/` (with
//! `--check`, into `target/observed-check/`, then compares).
//!
//! - `steps.rs` reads `book/observe/chNN.toml`, the steps as data, and
//!   `validate.rs` checks them whole before anything runs;
//! - `run.rs` runs them: commands through `bash -c`, servers from their
//!   binaries (`server.rs`), each process under a `guard.rs` guard, each
//!   wait bounded (`wait.rs`);
//! - `output.rs` is what an observed file holds and how raw output becomes one;
//! - `build.rs` builds what the steps run, first;
//! - `compare.rs` is `--check`'s verdict; `machine.rs` writes each chapter's
//!   `chNN-machine.txt`; the runner writes its `chNN-times.toml` (`mdbook_figures::times`).

mod build;
mod compare;
mod guard;
mod machine;
mod output;
mod run;
mod server;
pub mod steps;
#[cfg(test)]
mod tests;
mod validate;
mod wait;

use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{Context, ensure};

/// The book's observed outputs, from the workspace root.
pub const OBSERVED: &str = "book/src/observed";

pub fn observe(root: &Path, names: &[String], check: bool) -> anyhow::Result<()> {
    let started = Instant::now();
    let chapters = steps::read_all(root)?;
    let selected = steps::select(&chapters, names)?;
    let book = root.join(OBSERVED);
    let out = match check {
        true => root.join("target/observed-check"),
        false => book.clone(),
    };
    if check {
        let _ = std::fs::remove_dir_all(&out);
    }
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    wait::stop_waiting_on_interrupt()?;

    let target = target_dir(root);
    build::run(&build::plan(&selected)?)?;
    // One file per chapter: chapters observed on different days, or on
    // different machines, each name their own.
    let machine = machine::describe()?;
    for chapter in &selected {
        std::fs::write(out.join(machine_file(&chapter.name)), &machine)?;
    }
    let mut runner = run::Runner::new(root, &out, &target)?;
    for chapter in &selected {
        runner.chapter(chapter)?;
    }
    drop(runner);
    let took = started.elapsed().as_secs_f64();
    let shown: Vec<&str> = selected.iter().map(|c| c.name.as_str()).collect();
    if !check {
        println!(
            "observed {} in {took:.0} s; outputs written to {}",
            shown.join(" "),
            out.display()
        );
        return Ok(());
    }
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let drift = compare::compare(&book, &out, &names)?;
    for d in &drift {
        eprintln!("{d}");
    }
    ensure!(
        drift.is_empty(),
        "{} observed command(s) behave differently now",
        drift.len()
    );
    println!(
        "every observed command of {} behaves as the book shows ({took:.0} s; fresh outputs in {})",
        shown.join(" "),
        out.display()
    );
    Ok(())
}

/// `ch12-machine.txt`: the machine chapter 12's outputs were observed on.
pub fn machine_file(chapter: &str) -> String {
    format!("{chapter}-machine.txt")
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_relative() { root.join(t) } else { t })
        .unwrap_or_else(|| root.join("target"))
}
