//! What an observed file holds, and how a run's raw output becomes one:
//!
//! - [`command_output`]: `$ COMMAND`, stdout and stderr as they interleaved,
//!   then `(exit status N)` when N is not 0;
//! - [`Normalise`]: this workspace's root (and a step's temporary folder)
//!   written as relative paths, as the reader's own run prints them from the
//!   root; CRLF line ends as LF where a chapter asks;
//! - [`quiet_cargo`]: `cargo run` runs as `cargo run -q`, so cargo's build
//!   chatter stays out of the file;
//! - [`complete_lines`]: how much of a growing log can be taken without
//!   cutting a line in two.

use std::{os::unix::process::ExitStatusExt, path::Path, process::ExitStatus};

#[derive(Clone, Debug, Default)]
pub struct Normalise {
    /// `/abs/path/` prefixes to remove, longest first.
    prefixes: Vec<String>,
    strip_cr: bool,
}

impl Normalise {
    /// Paths under `root` become relative to it (its canonical spelling too,
    /// which is what programs that canonicalize print).
    pub fn new(root: &Path) -> Normalise {
        Normalise::default().with_prefix(root)
    }

    /// Paths under `dir` become relative to it as well.
    pub fn with_prefix(mut self, dir: &Path) -> Normalise {
        let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        for d in [dir, canonical.as_path()] {
            let prefix = format!("{}/", d.display().to_string().trim_end_matches('/'));
            if !self.prefixes.contains(&prefix) {
                self.prefixes.push(prefix);
            }
        }
        self.prefixes.sort_by_key(|p| std::cmp::Reverse(p.len()));
        self
    }

    pub fn strip_cr(mut self, yes: bool) -> Normalise {
        self.strip_cr = yes;
        self
    }

    pub fn apply(&self, text: &str) -> String {
        let mut text = text.to_string();
        for prefix in &self.prefixes {
            text = text.replace(prefix.as_str(), "");
        }
        if self.strip_cr {
            text = text.replace("\r\n", "\n");
            if text.ends_with('\r') {
                text.pop();
            }
        }
        text
    }
}

/// An observed command's file, before normalising.
pub fn command_output(command: &str, output: &str, status: ExitStatus) -> String {
    let mut text = format!("$ {command}\n{output}");
    let code = exit_code(status);
    if code != 0 {
        text.push_str(&format!("(exit status {code})\n"));
    }
    text
}

/// The status as a shell's `$?` says it: the exit code, or 128 + the signal
/// that ended the process.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1)
}

/// `cargo run` as `cargo run -q`, wherever it appears in a pipeline.
pub fn quiet_cargo(command: &str) -> String {
    let mut quiet = command.replace("cargo run ", "cargo run -q ");
    if quiet.ends_with("cargo run") {
        quiet.push_str(" -q");
    }
    quiet
}

/// The length of the longest prefix of `text` that ends a line.
pub fn complete_lines(text: &[u8]) -> usize {
    text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_and_a_temporary_folder_become_relative() {
        let n = Normalise::new(Path::new("/work/wt")).with_prefix(Path::new("/tmp/.tmpX1"));
        assert_eq!(
            n.apply("error: /work/wt/certs/ca.pem and /tmp/.tmpX1/certs, not /work/wtx/a\n"),
            "error: certs/ca.pem and certs, not /work/wtx/a\n"
        );
    }

    #[test]
    fn crlf_becomes_lf_only_where_asked() {
        let text = "HTTP/2 200\r\ncontent-type: application/grpc\r\n\r\nbody\r";
        assert_eq!(Normalise::default().apply(text), text);
        assert_eq!(
            Normalise::default().strip_cr(true).apply(text),
            "HTTP/2 200\ncontent-type: application/grpc\n\nbody"
        );
    }

    #[test]
    fn a_failure_ends_with_its_exit_status_and_a_success_does_not() {
        let failed = ExitStatus::from_raw(7 << 8);
        assert_eq!(
            command_output("curl -sS x", "curl: (7) refused\n", failed),
            "$ curl -sS x\ncurl: (7) refused\n(exit status 7)\n"
        );
        assert_eq!(
            command_output("true", "", ExitStatus::from_raw(0)),
            "$ true\n"
        );
        // Killed by SIGINT (2), as bash reports it.
        assert_eq!(exit_code(ExitStatus::from_raw(2)), 130);
    }

    #[test]
    fn cargo_run_is_quiet_everywhere_in_a_pipeline() {
        assert_eq!(
            quiet_cargo("cargo run -p proto --bin grpc_frame | od -An -c"),
            "cargo run -q -p proto --bin grpc_frame | od -An -c"
        );
        assert_eq!(
            quiet_cargo("REST_ADDR=127.0.0.1:8444 cargo run"),
            "REST_ADDR=127.0.0.1:8444 cargo run -q"
        );
        assert_eq!(
            quiet_cargo("cargo test -q -p streaming"),
            "cargo test -q -p streaming"
        );
    }

    #[test]
    fn a_partial_last_line_is_left_for_later() {
        assert_eq!(complete_lines(b"one\ntwo\nthr"), 8);
        assert_eq!(complete_lines(b"one\n"), 4);
        assert_eq!(complete_lines(b"partial"), 0);
    }
}
