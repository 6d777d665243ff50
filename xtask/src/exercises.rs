//! `cargo xtask exercises`: proves both directions of every exercise in
//! `exercises/`. Each starter must fail its chapter's tests, and every test it
//! fails must say `still to do (chNN)`, so that a reader who runs them learns
//! what is missing; built with `--features solutions`, every test must pass.

use std::{
    path::Path,
    process::{Command, Output},
};

use anyhow::{Context, ensure};

/// The exercises' workspace, from the workshop's root.
pub const DIR: &str = "exercises";

/// The chapters that have an exercise: `exercises/tests/chNN.rs`, each with
/// its starter in `src/` and its solution in `solutions/`.
pub fn chapters(root: &Path) -> anyhow::Result<Vec<String>> {
    let dir = root.join(DIR);
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir.join("tests")).context("cannot list exercises/tests")? {
        let path = entry?.path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "rs") {
            for part in ["src", "solutions"] {
                let file = dir.join(part).join(format!("{name}.rs"));
                ensure!(
                    file.is_file(),
                    "the exercise {name} has no {}",
                    file.display()
                );
            }
            names.push(name.to_string());
        }
    }
    names.sort();
    ensure!(!names.is_empty(), "no exercises in {DIR}/tests");
    Ok(names)
}

pub fn check(root: &Path) -> anyhow::Result<()> {
    let chapters = chapters(root)?;
    for chapter in &chapters {
        let out = cargo_test(root, &["--test", chapter])?;
        let text = output_text(&out);
        let failed = failed_tests(&text);
        ensure!(
            !out.status.success() && text.contains("test result: FAILED"),
            "the starter of exercise {chapter} passes its tests (or they did not run):\n{text}"
        );
        let marker = format!("still to do ({chapter})");
        let silent: Vec<_> = failed
            .iter()
            .filter(|(_, section)| !section.contains(&marker))
            .map(|(name, _)| name.as_str())
            .collect();
        ensure!(
            silent.is_empty(),
            "exercise {chapter}: these tests fail on the starter without saying \
             `{marker}`: {silent:?}\n{text}"
        );
        println!(
            "{chapter}: the starter fails {} test(s), each saying what is still to do",
            failed.len()
        );
    }
    let out = cargo_test(root, &["--features", "solutions"])?;
    ensure!(
        out.status.success(),
        "the solutions fail their tests:\n{}",
        output_text(&out)
    );
    println!("the solutions of {} pass every test", chapters.join(", "));
    Ok(())
}

fn cargo_test(root: &Path, args: &[&str]) -> anyhow::Result<Output> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    Command::new(cargo)
        .current_dir(root)
        .args(["test", "--locked", "--manifest-path"])
        .arg(Path::new(DIR).join("Cargo.toml"))
        .args(args)
        .output()
        .context("cannot run cargo test for the exercises")
}

fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Each failed test of libtest's output, with its `---- NAME stdout ----`
/// section (where its panic message is).
fn failed_tests(text: &str) -> Vec<(String, String)> {
    let mut tests = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(name) = line
            .strip_prefix("---- ")
            .and_then(|l| l.strip_suffix(" stdout ----"))
        {
            tests.extend(current.take());
            current = Some((name.to_string(), String::new()));
        } else if line.starts_with("failures:") || line.starts_with("test result:") {
            tests.extend(current.take());
        } else if let Some((_, section)) = &mut current {
            section.push_str(line);
            section.push('\n');
        }
    }
    tests.extend(current);
    tests
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failed_test_is_read_with_its_own_message() {
        let text = "running 3 tests\ntest a ... FAILED\ntest b ... ok\ntest c ... FAILED\n\n\
                    failures:\n\n---- a stdout ----\nthread 'a' panicked at x.rs:1:1:\n\
                    still to do (ch11): reserve first\n\n---- c stdout ----\n\
                    thread 'c' panicked at x.rs:2:1:\nassertion failed\n\n\
                    failures:\n    a\n    c\n\ntest result: FAILED. 1 passed; 2 failed\n";
        let failed = failed_tests(text);
        assert_eq!(failed.len(), 2);
        assert_eq!(failed[0].0, "a");
        assert!(failed[0].1.contains("still to do (ch11)"));
        assert_eq!(failed[1].0, "c");
        assert!(!failed[1].1.contains("still to do"));
    }
}
