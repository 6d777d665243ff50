//! Every program the book tells a reader to run, with its real command line.
//!
//! `cargo run -p grpc-server -- --mtls` in a chapter is checked by handing
//! `--mtls` to `grpc_server::Cli::try_parse_from`, the very parser the binary
//! uses. Renaming a flag, a binary or a package therefore fails the check until
//! the book says the new name. A program missing from this table fails too, so
//! a new binary cannot slip into the book unchecked.

use clap::{Parser, error::ErrorKind};

type ParseFn = fn(&[String]) -> Result<(), clap::Error>;

/// (package, binary or example, parser).
const PROGRAMS: &[(&str, &str, ParseFn)] = &[
    ("workshop", "workshop", parse::<stack::Args>),
    ("workshop", "rest_client", parse::<grpc_client::RestArgs>),
    ("workshop", "latency_compare", parse::<perf::latency::Args>),
    ("perf", "choose_deadline", parse::<perf::choose::Args>),
    ("perf", "frontend", parse::<perf::propagation::Args>),
    ("perf", "retry_storm", parse::<perf::retry::Args>),
    ("perf", "silent", parse::<perf::silent::Args>),
    ("proto", "wire_size", parse::<proto::cli::WireSizeArgs>),
    ("proto", "grpc_frame", parse::<proto::cli::GrpcFrameArgs>),
    ("certs", "certs", parse::<certs::cli::Args>),
    ("grpc-server", "grpc-server", parse::<grpc_server::Cli>),
    ("grpc-client", "grpc-client", parse::<grpc_client::Args>),
    (
        "proto",
        "status_table",
        parse::<proto::cli::StatusTableArgs>,
    ),
    ("rest-server", "rest-server", parse::<rest_server::Cli>),
    ("streaming", "flow_control", parse::<streaming::cli::Args>),
    (
        "streaming",
        "slow_reader",
        parse::<streaming::slow_reader::Args>,
    ),
    ("stack", "stack", parse::<stack::Args>),
    ("loadgen", "loadgen", parse::<loadgen::cli::Args>),
    ("overload", "overload", parse::<overload::Args>),
    ("ingest", "ingest", parse::<ingest::Args>),
    ("per-call", "per_call", parse::<per_call::config::Args>),
    ("admission", "admission", parse::<admission::Args>),
    ("network", "network", parse::<network::cli::Cli>),
    ("fleet", "fleet", parse::<fleet::cli::Cli>),
    (
        "cpu-limits",
        "cpu_limits",
        parse::<cpu_limits::config::Args>,
    ),
    ("xtask", "xtask", parse::<crate::Cli>),
];

/// The package whose binary (or example) is called `bin`.
pub fn package_of(bin: &str) -> Option<&'static str> {
    PROGRAMS
        .iter()
        .find(|(_, name, _)| *name == bin)
        .map(|(package, _, _)| *package)
}

fn parse<T: Parser>(args: &[String]) -> Result<(), clap::Error> {
    let name = T::command().get_name().to_string();
    match T::try_parse_from(std::iter::once(name).chain(args.iter().cloned())) {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => Ok(()),
        Err(e) => Err(e),
    }
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

/// How a `cargo run` was checked.
#[derive(Debug, PartialEq)]
pub enum Checked {
    /// Its arguments parse with the program's own parser.
    Parsed,
    /// An example whose parser is private to its file: the command must be one
    /// that a step of `book/observe/*.toml` runs, so CI runs it for real.
    MustBeObserved,
}

/// Checks one `cargo run` against the program table and the program's parser.
pub fn check_cargo_run(run: &CargoRun) -> anyhow::Result<Checked> {
    if run.example
        && !PROGRAMS
            .iter()
            .any(|(p, t, _)| *p == run.package && Some(*t) == run.target.as_deref())
    {
        return Ok(Checked::MustBeObserved);
    }
    let in_package: Vec<_> = PROGRAMS
        .iter()
        .filter(|(p, _, _)| *p == run.package)
        .collect();
    anyhow::ensure!(
        !in_package.is_empty(),
        "no package `{}` in the program table (xtask/src/clis.rs)",
        run.package
    );
    let program = match &run.target {
        Some(target) => in_package
            .iter()
            .find(|(_, t, _)| t == target)
            .ok_or_else(|| {
                anyhow::anyhow!("package `{}` has no program `{target}`", run.package)
            })?,
        // `cargo run` without --bin runs the package's binary named after it
        // (the root's `default-run`), or its only one.
        None if in_package.iter().any(|(_, t, _)| *t == run.package) => in_package
            .iter()
            .find(|(_, t, _)| *t == run.package)
            .copied()
            .expect("just checked"),
        None if in_package.len() == 1 => in_package[0],
        None => anyhow::bail!(
            "package `{}` has several programs; the command must say which with --bin",
            run.package
        ),
    };
    (program.2)(&run.args).map_err(|e| {
        let message = e.render().to_string();
        let first = message.lines().next().unwrap_or("").to_string();
        anyhow::anyhow!("`{}` rejects {:?}: {first}", program.1, run.args)
    })?;
    Ok(Checked::Parsed)
}

pub fn is_workspace_package(name: &str) -> bool {
    PROGRAMS.iter().any(|(p, _, _)| *p == name)
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
        assert!(check_cargo_run(&cargo_run(&words("-p grpc-servr")).unwrap()).is_err());
        assert!(
            check_cargo_run(&cargo_run(&words("-p proto")).unwrap()).is_err(),
            "ambiguous binary"
        );
    }
}
