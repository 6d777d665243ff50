//! Every program the book tells a reader to run, with its real command line.
//!
//! `cargo run -p grpc-server -- --mtls` in a chapter is checked by running
//! the `grpc-server` binary with `--mtls` and [`program::CHECK_ARGS`] set:
//! every program reads its command line with `program::args`, which then
//! only parses it, with the very parser the program uses, and exits. The
//! programs are found in the workspace (`cargo metadata`), not in a list
//! here: a new chapter's binary is checked as soon as it exists, and renaming
//! a flag, a binary or a package fails the check until the book says the new
//! name.

use std::{
    collections::BTreeSet,
    path::PathBuf,
    process::{Command, Stdio},
    sync::{Mutex, OnceLock},
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::{Parser, error::ErrorKind};
use serde::Deserialize;

/// A binary or an example of a workspace package.
#[derive(Debug, Clone, PartialEq)]
struct Program {
    package: String,
    name: String,
    example: bool,
}

/// What `cargo metadata --no-deps` says, as far as it is read here.
#[derive(Deserialize)]
struct Metadata {
    packages: Vec<Package>,
    target_directory: PathBuf,
}

#[derive(Deserialize)]
struct Package {
    name: String,
    targets: Vec<Target>,
    default_run: Option<String>,
}

#[derive(Deserialize)]
struct Target {
    name: String,
    kind: Vec<String>,
}

struct Workspace {
    programs: Vec<Program>,
    /// Each package's `default-run`, where it has one.
    default_run: Vec<(String, String)>,
    packages: BTreeSet<String>,
    target_dir: PathBuf,
}

/// The workspace's programs, read once per xtask run.
fn workspace() -> anyhow::Result<&'static Workspace> {
    static WORKSPACE: OnceLock<Workspace> = OnceLock::new();
    if let Some(w) = WORKSPACE.get() {
        return Ok(w);
    }
    let output = Command::new(env!("CARGO"))
        .current_dir(crate::check::workspace_root())
        .args(["metadata", "--no-deps", "--format-version", "1", "--locked"])
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run cargo metadata")?;
    anyhow::ensure!(output.status.success(), "cargo metadata failed");
    let metadata: Metadata =
        serde_json::from_slice(&output.stdout).context("cargo metadata's output")?;
    let mut programs = Vec::new();
    for package in &metadata.packages {
        for target in &package.targets {
            let example = target.kind.iter().any(|k| k == "example");
            if example || target.kind.iter().any(|k| k == "bin") {
                programs.push(Program {
                    package: package.name.clone(),
                    name: target.name.clone(),
                    example,
                });
            }
        }
    }
    let workspace = Workspace {
        programs,
        default_run: metadata
            .packages
            .iter()
            .filter_map(|p| Some((p.name.clone(), p.default_run.clone()?)))
            .collect(),
        packages: metadata.packages.iter().map(|p| p.name.clone()).collect(),
        target_dir: metadata.target_directory,
    };
    Ok(WORKSPACE.get_or_init(|| workspace))
}

/// The package whose binary (or example) is called `bin`.
pub fn package_of(bin: &str) -> Option<&'static str> {
    workspace()
        .ok()?
        .programs
        .iter()
        .find(|p| p.name == bin)
        .map(|p| p.package.as_str())
}

pub fn is_workspace_package(name: &str) -> anyhow::Result<bool> {
    Ok(workspace()?.packages.contains(name))
}

/// What `cargo run ...` would run, and with which arguments.
#[derive(Debug, PartialEq)]
pub struct CargoRun {
    pub package: String,
    pub target: Option<String>,
    pub example: bool,
    pub args: Vec<String>,
}

/// Reads the cargo options of `cargo run` that the book uses. `words` starts
/// after `cargo run`.
pub fn cargo_run(words: &[String]) -> anyhow::Result<CargoRun> {
    let mut package = None;
    let mut target = None;
    let mut example = false;
    let mut i = 0;
    while i < words.len() {
        match words[i].as_str() {
            "--" => {
                i += 1;
                break;
            }
            "-q" | "--quiet" | "--release" | "--locked" => {}
            "-p" | "--package" | "--bin" | "--example" => {
                let value = words
                    .get(i + 1)
                    .ok_or_else(|| anyhow::anyhow!("{} needs a value", words[i]))?;
                if words[i] == "-p" || words[i] == "--package" {
                    package = Some(value.clone());
                } else {
                    example = words[i] == "--example";
                    target = Some(value.clone());
                }
                i += 1;
            }
            other => {
                anyhow::bail!("cargo run option `{other}` is not one the book's checks understand")
            }
        }
        i += 1;
    }
    Ok(CargoRun {
        package: package.unwrap_or_else(|| "workshop".into()),
        target,
        example,
        args: words[i.min(words.len())..].to_vec(),
    })
}

/// How long a program may take to check its command line (a first build of
/// it is not counted).
const PATIENCE: Duration = Duration::from_secs(20);

/// Checks one `cargo run` against the workspace's programs and the
/// program's own parser.
pub fn check_cargo_run(run: &CargoRun) -> anyhow::Result<()> {
    if run.package == "xtask" {
        // This very program: its parser is at hand.
        return parse::<crate::Cli>(&run.args)
            .map_err(|e| rejects("xtask", &run.args, &e.render().to_string()));
    }
    let workspace = workspace()?;
    anyhow::ensure!(
        workspace.packages.contains(&run.package),
        "no package `{}` in the workspace",
        run.package
    );
    let in_package: Vec<&Program> = workspace
        .programs
        .iter()
        .filter(|p| p.package == run.package && p.example == run.example)
        .collect();
    let program = match &run.target {
        Some(target) => in_package
            .iter()
            .find(|p| p.name == *target)
            .ok_or_else(|| {
                anyhow::anyhow!("package `{}` has no program `{target}`", run.package)
            })?,
        // `cargo run` without --bin runs the package's `default-run`, or its
        // only binary.
        None => match workspace
            .default_run
            .iter()
            .find(|(p, _)| *p == run.package)
        {
            Some((_, name)) => in_package
                .iter()
                .find(|p| p.name == *name)
                .context("default-run names no binary")?,
            None if in_package.len() == 1 => &in_package[0],
            None => anyhow::bail!(
                "package `{}` has several programs (or none); the command must say which with --bin",
                run.package
            ),
        },
    };
    let exe = built(workspace, program)?;
    let mut child = Command::new(&exe)
        .args(&run.args)
        .env(program::CHECK_ARGS, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!(
                "`{}` did not exit within {PATIENCE:?} of checking its arguments: does its main \
                 read them with program::args?",
                program.name
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if status.success() {
        return Ok(());
    }
    let mut said = String::new();
    if let Some(mut err) = child.stderr.take() {
        use std::io::Read;
        let _ = err.read_to_string(&mut said);
    }
    Err(rejects(&program.name, &run.args, &said))
}

fn rejects(program: &str, args: &[String], message: &str) -> anyhow::Error {
    let first = message.lines().next().unwrap_or("").to_string();
    anyhow::anyhow!("`{program}` rejects {args:?}: {first}")
}

fn parse<T: Parser>(args: &[String]) -> Result<(), clap::Error> {
    let name = T::command().get_name().to_string();
    match T::try_parse_from(std::iter::once(name).chain(args.iter().cloned())) {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The program's executable, built (once per xtask run) as the workspace's
/// sources are now.
fn built(workspace: &Workspace, program: &Program) -> anyhow::Result<PathBuf> {
    static BUILT: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let kind = if program.example {
        "--example"
    } else {
        "--bin"
    };
    let mut built = BUILT.lock().expect("not poisoned");
    if !built.contains(&program.name) {
        let status = Command::new(env!("CARGO"))
            .current_dir(crate::check::workspace_root())
            .args([
                "build",
                "-q",
                "--locked",
                "-p",
                &program.package,
                kind,
                &program.name,
            ])
            .status()
            .context("cannot run cargo build")?;
        anyhow::ensure!(status.success(), "cannot build `{}`", program.name);
        built.insert(program.name.clone());
    }
    let dir = workspace.target_dir.join("debug");
    Ok(match program.example {
        true => dir.join("examples").join(&program.name),
        false => dir.join(&program.name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn reads_packages_binaries_and_arguments() {
        let run = cargo_run(&words("-q -p proto --bin wire_size -- --name Ada")).unwrap();
        assert_eq!(
            (run.package.as_str(), run.target.as_deref()),
            ("proto", Some("wire_size"))
        );
        assert_eq!(run.args, words("--name Ada"));
        assert_eq!(cargo_run(&[]).unwrap().package, "workshop");
    }

    #[test]
    fn accepts_the_real_flags() {
        check_cargo_run(&cargo_run(&words("-p grpc-server -- --mtls --addr 127.0.0.1:1")).unwrap())
            .unwrap();
        check_cargo_run(&cargo_run(&words("--example rest_client -- --help")).unwrap()).unwrap();
        check_cargo_run(&cargo_run(&words("-p certs -- --show")).unwrap()).unwrap();
        check_cargo_run(&cargo_run(&words("-p stack -- --help")).unwrap()).unwrap();
    }

    // A renamed flag, binary or package in the book must fail the check.
    #[test]
    fn rejects_a_renamed_flag_binary_or_package() {
        let flag = check_cargo_run(&cargo_run(&words("-p grpc-server -- --mutual-tls")).unwrap())
            .unwrap_err();
        assert!(flag.to_string().contains("--mutual-tls"), "{flag}");
        assert!(check_cargo_run(&cargo_run(&words("-p proto --bin wiresize")).unwrap()).is_err());
        assert!(
            check_cargo_run(&cargo_run(&words("-p xtask -- observe --chek")).unwrap()).is_err()
        );
        assert!(check_cargo_run(&cargo_run(&words("-p grpc-servr")).unwrap()).is_err());
        assert!(
            check_cargo_run(&cargo_run(&words("-p proto")).unwrap()).is_err(),
            "ambiguous binary"
        );
    }
}
