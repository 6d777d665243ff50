//! Builds what the steps will run, before the first step runs: a step that
//! pipes `cargo run` into `curl --max-time 0.5` must not spend that half
//! second compiling.
//!
//! Each program is built exactly as its `cargo run -p PACKAGE` will build it:
//! cargo resolves features per set of packages built, so `cargo build
//! --workspace` would leave `cargo run -p proto` a different build to make.
//! The servers come last, because `start` runs the binary that the last
//! build of its package left in target/.

use std::process::Command;

use anyhow::{Context, ensure};

use crate::{
    clis,
    markdown::shell_segments,
    observe::steps::{Action, Chapter},
};

/// The `cargo build` argument lists for these chapters, without repeats.
pub fn plan(chapters: &[&Chapter]) -> anyhow::Result<Vec<Vec<String>>> {
    let mut builds: Vec<Vec<String>> = Vec::new();
    let mut servers = Vec::new();
    for step in chapters.iter().flat_map(|c| &c.steps) {
        match &step.action {
            Action::Run(run) => {
                for segment in shell_segments(&run.run)? {
                    let words: Vec<String> = segment
                        .into_iter()
                        .skip_while(|w| w.contains('=') && !w.starts_with('-'))
                        .collect();
                    if words.len() >= 2 && words[0] == "cargo" && words[1] == "run" {
                        builds.push(cargo_build(&words[2..])?);
                    }
                }
            }
            Action::Start(start) => {
                let server = start.server();
                let mut build = vec!["build", "-q"];
                if start.release {
                    build.push("--release");
                }
                build.extend(["-p", server.package, "--bin", server.program]);
                servers.push(build.into_iter().map(String::from).collect());
            }
            _ => {}
        }
    }
    let mut unique: Vec<Vec<String>> = Vec::new();
    for build in builds {
        if !unique.contains(&build) {
            unique.push(build);
        }
    }
    for server in servers {
        unique.retain(|b| *b != server);
        unique.push(server);
    }
    Ok(unique)
}

/// `cargo run OPTIONS -- ARGS` as the `cargo build` that prepares it.
fn cargo_build(run_words: &[String]) -> anyhow::Result<Vec<String>> {
    let run = clis::cargo_run(run_words)?;
    let options = run_words.iter().take_while(|w| *w != "--");
    let mut build = vec!["build".to_string(), "-q".to_string()];
    if options.clone().any(|w| w == "--release") {
        build.push("--release".into());
    }
    build.extend(["-p".to_string(), run.package]);
    if let Some(target) = run.target {
        build.push(if run.example { "--example" } else { "--bin" }.into());
        build.push(target);
    } else if options.clone().all(|w| w != "-p" && w != "--package") {
        // Plain `cargo run` at the root: the root package's default binary.
        build.extend(["--bin".to_string(), "workshop".to_string()]);
    }
    Ok(build)
}

pub fn run(builds: &[Vec<String>]) -> anyhow::Result<()> {
    for args in builds {
        eprintln!("observe: cargo {}", args.join(" "));
        let status = Command::new("cargo")
            .args(args)
            .status()
            .context("cannot run cargo")?;
        ensure!(
            status.success(),
            "`cargo {}` failed ({status})",
            args.join(" ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::steps::parse;

    #[test]
    fn builds_each_program_as_its_cargo_run_will_and_servers_last() {
        let chapter = parse(
            std::path::Path::new("book/observe/ch07.toml"),
            r#"
[[step]]
start = "grpc-server"
[[step]]
run = "cargo run -p proto --bin grpc_frame -- --name Ada | curl -sS --data-binary @- https://x"
file = "ch07-a.txt"
[[step]]
run = "cargo run --release --example latency_compare -- --calls 2 && REST_ADDR=1 cargo run -p stack"
file = "ch07-b.txt"
[[step]]
run = "cargo run -p grpc-server -- --certs-dir /nowhere"
file = "ch07-c.txt"
[[step]]
run = "cargo run -p proto --bin grpc_frame -- --name Bob"
file = "ch07-d.txt"
[[step]]
stop = "grpc-server"
"#,
        )
        .unwrap();
        let builds: Vec<String> = plan(&[&chapter])
            .unwrap()
            .iter()
            .map(|b| b.join(" "))
            .collect();
        assert_eq!(
            builds,
            [
                "build -q -p proto --bin grpc_frame",
                "build -q --release -p workshop --example latency_compare",
                "build -q -p stack",
                "build -q -p grpc-server",
                "build -q -p grpc-server --bin grpc-server",
            ]
        );
    }
}
