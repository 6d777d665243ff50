//! `cargo xtask rerender`: every run the book keeps in `book/src/results/` is
//! drawn again from its tables, with `--render`, into a scratch copy, and
//! every file must come out byte for byte as committed. This is what makes
//! "`--render` reproduces the report" a check and not a claim: a change to a
//! table, a plot or the report's wording that the committed runs do not
//! reflect fails here until `cargo xtask rerender --update` redraws them.
//!
//! A run's raw records are kept compressed in `book/raw/NAME/`, outside the
//! published book. One such run per day (rotating, so that every week sees
//! each) is also reduced again from them (`--render --from-raw`), which
//! proves the reduce step; `--from-raw` does it for every run.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, bail, ensure};

use crate::clis;

/// A committed run, and the program that draws it.
#[derive(Debug, PartialEq)]
struct Run {
    dir: PathBuf,
    package: &'static str,
    bin: String,
    /// `compare` for `ingest compare --render`, `run` for `network run ...`.
    subcommand: Option<String>,
}

/// Where the book keeps its runs' raw records: `RAW/NAME` for the run in
/// `book/src/results/NAME`.
pub const RAW: &str = "book/raw";

/// Redraws every committed run into target/rerender/ and compares; with
/// `update`, redraws them in place instead. With `all_raw`, every run with
/// raw records is reduced from them first; without it, one of them, today's.
pub fn rerender(root: &Path, update: bool, all_raw: bool) -> anyhow::Result<()> {
    let runs = committed_runs(&root.join("book/src/results"))?;
    let with_raw: Vec<&Run> = runs.iter().filter(|r| raw_of(root, r).is_some()).collect();
    check_raw_layout(root, &runs)?;
    let today = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs()
        / 86_400) as usize;
    let todays = with_raw
        .get(today % with_raw.len().max(1))
        .map(|r| r.dir.clone());
    let scratch = root.join("target/rerender");
    let mut differ = Vec::new();
    for run in &runs {
        let name = run
            .dir
            .file_name()
            .context("a results folder has no name")?;
        let shown = run.dir.strip_prefix(root).unwrap_or(&run.dir).display();
        let raw = raw_of(root, run).filter(|_| all_raw || todays.as_ref() == Some(&run.dir));
        let target = if update {
            run.dir.clone()
        } else {
            let copy = scratch.join(name);
            if copy.exists() {
                fs::remove_dir_all(&copy)
                    .with_context(|| format!("cannot empty {}", copy.display()))?;
            }
            copy_tree(&run.dir, &copy)?;
            copy
        };
        render(root, run, &target, raw.as_deref())?;
        let from = match &raw {
            Some(raw) => format!(
                "reduced again from {}",
                raw.strip_prefix(root).unwrap_or(raw).display()
            ),
            None => "drawn again from its tables".to_string(),
        };
        if update {
            println!("{shown}: {from}, in place");
            continue;
        }
        let changed = compare(&run.dir, &target)?;
        if changed.is_empty() {
            println!("{shown}: {from}, identical");
        } else {
            for file in &changed {
                println!("{shown}: {file} differs from a fresh --render");
            }
            differ.push(shown.to_string());
        }
    }
    if update {
        println!("{} committed runs drawn again in place", runs.len());
        return Ok(());
    }
    ensure!(
        differ.is_empty(),
        "{} committed run(s) no longer render as committed: {}; look at the difference \
         (target/rerender/ holds the fresh drawing), then `cargo xtask rerender --update`",
        differ.len(),
        differ.join(", ")
    );
    println!(
        "{} committed runs render byte for byte as committed",
        runs.len()
    );
    Ok(())
}

/// The folder of the run's raw records, if it has one.
fn raw_of(root: &Path, run: &Run) -> Option<PathBuf> {
    let raw = root.join(RAW).join(run.dir.file_name()?);
    raw.join("meta.json").is_file().then_some(raw)
}

/// Raw records stay out of the published book, and each folder of them
/// belongs to a committed run.
fn check_raw_layout(root: &Path, runs: &[Run]) -> anyhow::Result<()> {
    for run in runs {
        if let Some(file) = files(&run.dir)?.into_iter().find(|f| f.ends_with(".zst")) {
            bail!(
                "{}: {file} is a raw record in the published book; run the experiment \
                 with --raw-out {RAW}/NAME, or move the compressed records there",
                run.dir.display()
            );
        }
    }
    let Ok(entries) = fs::read_dir(root.join(RAW)) else {
        return Ok(());
    };
    for entry in entries {
        let raw = entry?.path();
        let name = raw.file_name().unwrap_or_default();
        ensure!(
            runs.iter().any(|r| r.dir.file_name() == Some(name)),
            "{} holds the raw records of no committed run (book/src/results/{} is missing)",
            raw.display(),
            name.display()
        );
    }
    Ok(())
}

/// Every folder with a run's `meta.json` under `results`, in name order.
fn committed_runs(results: &Path) -> anyhow::Result<Vec<Run>> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(results)
        .with_context(|| format!("cannot list {}", results.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("meta.json").is_file())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let meta = harness::Folder::open(&dir)?.meta()?;
            run_of(dir, &meta.program, &meta.args)
        })
        .collect()
}

/// Which package's binary wrote the run, from the program path and arguments
/// its `meta.json` recorded.
fn run_of(dir: PathBuf, program: &str, args: &[String]) -> anyhow::Result<Run> {
    let bin = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .context("meta.json names no program")?
        .to_string();
    let Some(package) = clis::package_of(&bin) else {
        bail!("{}: no package has a binary `{bin}`", dir.display());
    };
    let subcommand = args.first().filter(|a| !a.starts_with('-')).cloned();
    Ok(Run {
        dir,
        package,
        bin,
        subcommand,
    })
}

fn render(root: &Path, run: &Run, target: &Path, raw: Option<&Path>) -> anyhow::Result<()> {
    let mut command = Command::new(env!("CARGO"));
    command
        .current_dir(root)
        .args([
            "run",
            "-q",
            "--locked",
            "-p",
            run.package,
            "--bin",
            &run.bin,
            "--",
        ])
        .args(&run.subcommand)
        .arg("--render")
        .arg(target);
    if let Some(raw) = raw {
        command.arg("--from-raw").arg(raw);
    }
    let output = command
        .output()
        .with_context(|| format!("cannot run {command:?}"))?;
    ensure!(
        output.status.success(),
        "{command:?} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// The files that differ between `committed` and `fresh`, or exist in one only.
fn compare(committed: &Path, fresh: &Path) -> anyhow::Result<Vec<String>> {
    let (a, b) = (files(committed)?, files(fresh)?);
    let mut changed = Vec::new();
    for name in a.union(&b) {
        let same = match (fs::read(committed.join(name)), fs::read(fresh.join(name))) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        };
        if !same {
            changed.push(name.clone());
        }
    }
    Ok(changed)
}

/// Every file under `dir`, as paths relative to it.
fn files(dir: &Path) -> anyhow::Result<BTreeSet<String>> {
    let mut found = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in
            fs::read_dir(&next).with_context(|| format!("cannot list {}", next.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(dir)?.display().to_string();
                found.insert(relative);
            }
        }
    }
    Ok(found)
}

fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    for name in files(from)? {
        let target = to.join(&name);
        fs::create_dir_all(target.parent().unwrap_or(to))?;
        fs::copy(from.join(&name), &target)
            .with_context(|| format!("cannot copy {name} to {}", to.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_drawn_by_the_binary_its_meta_names() {
        let run = run_of(
            "ch15".into(),
            "target/release/network",
            &["run".into(), "--out".into(), "x".into()],
        )
        .unwrap();
        assert_eq!(run.package, "network");
        assert_eq!(run.subcommand.as_deref(), Some("run"));
        let run = run_of(
            "ch14".into(),
            "./target/release/per_call",
            &["--step".into()],
        )
        .unwrap();
        assert_eq!((run.package, run.bin.as_str()), ("per-call", "per_call"));
        assert_eq!(run.subcommand, None);
        let e = run_of("x".into(), "target/debug/nothing", &[]).unwrap_err();
        assert!(e.to_string().contains("no package has a binary `nothing`"));
    }

    #[test]
    fn one_changed_byte_or_a_missing_file_is_a_difference() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for d in [&a, &b] {
            fs::create_dir_all(d.join("raw")).unwrap();
            fs::write(d.join("results.md"), "| p99 | 41.2 |\n").unwrap();
            fs::write(d.join("raw/x.csv"), "1\n").unwrap();
        }
        assert!(compare(&a, &b).unwrap().is_empty());
        fs::write(b.join("results.md"), "| p99 | 41.3 |\n").unwrap();
        fs::write(b.join("new.svg"), "<svg/>").unwrap();
        assert_eq!(compare(&a, &b).unwrap(), ["new.svg", "results.md"]);
    }

    /// Every committed run names a binary this check can find.
    #[test]
    fn every_committed_run_has_its_program() {
        let runs =
            committed_runs(&crate::check::workspace_root().join("book/src/results")).unwrap();
        assert!(!runs.is_empty());
    }
}
