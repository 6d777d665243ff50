//! Reading steps: good files parse into what they say, bad ones fail with an
//! error that names the file, the step and its line; and the book's own
//! step files are all good.

use std::path::Path;

use super::steps::{self, Action, Signal};

fn parse(text: &str) -> anyhow::Result<steps::Chapter> {
    steps::parse(Path::new("book/observe/ch04.toml"), text)
}

fn error(text: &str) -> String {
    format!("{:#}", parse(text).unwrap_err())
}

#[test]
fn a_chapter_reads_as_its_steps() {
    let chapter = parse(
        r#"
strip_cr = true

[[step]]
start = "grpc-server"
args = ["--mtls"]
file = "ch04-mtls.txt"

[[step]]
run = '''
printf '\0' | curl -sS https://localhost:50051/ -o - | od -An -c
'''
file = "ch04-call.txt"
background = true

[[step]]
wait_for_connection = 50051

[[step]]
stop = "grpc-server"
signal = "SIGTERM"
file = "ch04-stop.txt"

[[step]]
wait = "ch04-call.txt"
"#,
    )
    .unwrap();
    assert_eq!(chapter.name, "ch04");
    assert!(chapter.strip_cr);
    assert_eq!(chapter.steps.len(), 5);
    assert_eq!(chapter.steps[1].line, 9);
    let Action::Start(start) = &chapter.steps[0].action else {
        panic!("{:?}", chapter.steps[0])
    };
    assert_eq!(start.command_line(), "cargo run -p grpc-server -- --mtls");
    let Action::Run(run) = &chapter.steps[1].action else {
        panic!("{:?}", chapter.steps[1])
    };
    // The block's line breaks are not part of the command.
    assert_eq!(
        run.run,
        r"printf '\0' | curl -sS https://localhost:50051/ -o - | od -An -c"
    );
    assert!(run.background);
    assert!(matches!(
        &chapter.steps[3].action,
        Action::Stop(s) if s.signal == Signal::Terminate
    ));
}

#[test]
fn a_log_step_reads_the_only_server_or_the_one_named() {
    let chapter = parse(
        r#"
[[step]]
start = "grpc-server"
[[step]]
run = "cargo run -p grpc-client -- hello"
log = "ch04-a.txt"
[[step]]
start = "frontend"
[[step]]
server_log = "ch04-b.txt"
of = "frontend"
[[step]]
stop = "frontend"
[[step]]
stop = "grpc-server"
"#,
    )
    .unwrap();
    assert!(
        matches!(&chapter.steps[1].action, Action::Run(r) if r.of.as_deref() == Some("grpc-server"))
    );
    let Action::Start(frontend) = &chapter.steps[2].action else {
        panic!()
    };
    assert_eq!(frontend.command_line(), "cargo run -p perf --bin frontend");

    let ambiguous = error(
        "[[step]]\nstart = \"grpc-server\"\n[[step]]\nstart = \"frontend\"\n[[step]]\nserver_log = \"ch04-x.txt\"\n",
    );
    assert!(
        ambiguous.contains("step 3") && ambiguous.contains("say whose log with `of`"),
        "{ambiguous}"
    );
}

#[test]
fn a_bad_step_is_an_error_naming_the_file_step_and_line() {
    let cases = [
        // an unknown key, as a typo makes one
        (
            "[[step]]\nrun = \"ls\"\nfile = \"ch04-ls.txt\"\nbackgroud = true\n",
            "unknown field `backgroud`",
        ),
        // no kind, or two
        (
            "[[step]]\nfile = \"ch04-ls.txt\"\n",
            "one of the keys run, start",
        ),
        (
            "[[step]]\nrun = \"ls\"\ncopy = \"x\"\nto = \"ch04-x.txt\"\n",
            "has run and copy",
        ),
        // a value of the wrong type
        (
            "[[step]]\nwait_for_connection = \"50051\"\n",
            "invalid type",
        ),
        // another chapter's file, or one written twice
        (
            "[[step]]\nrun = \"ls\"\nfile = \"ch05-ls.txt\"\n",
            "no file of this chapter",
        ),
        (
            "[[step]]\nrun = \"ls\"\nfile = \"ch04-ls.txt\"\n[[step]]\nrun = \"ls -l\"\nfile = \"ch04-ls.txt\"\n",
            "which step 1 writes too",
        ),
        // servers: unknown, started twice, stopped when not running
        ("[[step]]\nstart = \"nginx\"\n", "no server `nginx`"),
        (
            "[[step]]\nstart = \"grpc-server\"\n[[step]]\nstart = \"grpc-server\"\n",
            "runs already (started by step 1)",
        ),
        (
            "[[step]]\nstop = \"rest-server\"\n",
            "rest-server is not running here",
        ),
        (
            "[[step]]\nstart = \"grpc-server\"\nargs = [\"--ready-file\", \"x\"]\n[[step]]\nstop = \"grpc-server\"\n",
            "gets --ready-file from the runner",
        ),
        // waits for nothing; logs of no server
        ("[[step]]\nwait = \"ch04-x.txt\"\n", "nothing to wait for"),
        (
            "[[step]]\nserver_log = \"ch04-x.txt\"\n",
            "no server runs here",
        ),
        (
            "[[step]]\nsignal = \"SIGHUP\"\nstop = \"x\"\n",
            "unknown variant `SIGHUP`",
        ),
        // a command is one line
        (
            "[[step]]\nrun = \"ls\\nls\"\nfile = \"ch04-x.txt\"\n",
            "one line",
        ),
        (
            "[[step]]\ncopy = \"../secrets\"\nto = \"ch04-x.txt\"\n",
            "inside the workspace",
        ),
    ];
    for (text, expected) in cases {
        let e = error(text);
        assert!(
            e.starts_with("book/observe/ch04.toml:") && e.contains("step "),
            "{e}"
        );
        assert!(e.contains(expected), "expected {expected:?} in: {e}");
    }
    // Line numbers point at the bad step.
    let e = error("[[step]]\nrun = \"ls\"\n\n[[step]]\nrun = \"\"\n");
    assert!(e.starts_with("book/observe/ch04.toml:4: step 2:"), "{e}");
}

#[test]
fn what_was_started_must_end() {
    let e = error("[[step]]\nstart = \"grpc-server\"\n");
    assert!(
        e.contains("grpc-server, started by step 1, is never stopped"),
        "{e}"
    );
    let e = error("[[step]]\nrun = \"sleep 1\"\nfile = \"ch04-s.txt\"\nbackground = true\n");
    assert!(e.contains("never waited for"), "{e}");
}

#[test]
fn malformed_toml_and_bad_names_are_errors_too() {
    assert!(error("[[step]\nrun = \"ls\"\n").starts_with("book/observe/ch04.toml"));
    let e = format!(
        "{:#}",
        steps::parse(Path::new("book/observe/chapter4.toml"), "").unwrap_err()
    );
    assert!(e.contains("named chNN.toml"), "{e}");
}

#[test]
fn an_unknown_chapter_is_an_error_that_lists_the_known_ones() {
    let chapters = vec![parse("").unwrap()];
    let e = steps::select(&chapters, &["ch99".into()])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no book/observe/ch99.toml") && e.contains("ch04"),
        "{e}"
    );
    assert_eq!(steps::select(&chapters, &[]).unwrap().len(), 1);
}

/// Every chapter of the book's outline has its observations, and they read.
/// (`cargo xtask check-book` checks their commands against the book's files.)
#[test]
fn the_books_steps_read() {
    let root = crate::check::workspace_root();
    let chapters = steps::read_all(&root).unwrap();
    let names: Vec<&str> = chapters.iter().map(|c| c.name.as_str()).collect();
    let summary = std::fs::read_to_string(root.join("book/src/SUMMARY.md")).unwrap();
    let mut outline: Vec<&str> = summary
        .split(['(', ')'])
        .filter(|link| link.starts_with("ch") && link.ends_with(".md"))
        .map(|page| &page[..4])
        .collect();
    // A chapter of more than one page (chapter 10) has one file of steps.
    outline.dedup();
    assert!(!outline.is_empty());
    assert_eq!(names, outline);
}
