//! Testing a program's command line: run it, expect a refusal and read what
//! it said, and give a run a results folder (and a PKI) of its own.

use std::{
    path::PathBuf,
    process::{Command, Output, Stdio},
};

/// Runs `program ARGS` with nothing on stdin (`env!("CARGO_BIN_EXE_...")`).
pub fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

/// Runs `program ARGS`, expects it to fail, and returns what it said.
pub fn fails(program: &str, args: &[&str]) -> String {
    let output = run(program, args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !output.status.success(),
        "`{program} {}` succeeded; stderr: {stderr}",
        args.join(" ")
    );
    stderr
}

pub fn assert_mentions(text: &str, words: &[&str]) {
    for word in words {
        assert!(text.contains(word), "{word:?} not in: {text}");
    }
}

/// A results folder of the test's own, removed when the test ends.
pub struct OutDir(PathBuf);

impl OutDir {
    /// `program` and `name` make the folder's name unique among tests.
    pub fn new(program: &str, name: &str) -> OutDir {
        let dir = std::env::temp_dir().join(format!("{program}-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        OutDir(dir)
    }

    pub fn arg(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp dir")
    }

    /// A PKI of this test's own, beside the results: tests that run at once
    /// would otherwise race to create the workspace's `certs/` on a fresh clone.
    pub fn certs(&self) -> String {
        format!("{}-certs", self.arg())
    }
}

impl std::ops::Deref for OutDir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl Drop for OutDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        let _ = std::fs::remove_dir_all(self.certs());
    }
}
