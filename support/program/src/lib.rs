//! What every program of the workshop does the same way, and which no chapter
//! is about. It sits outside the chapter sequence (`support/`), so that the
//! crate graph of `chapters/` stays the book's prerequisite graph.
//!
//! - [`exit_code`]: how every program ends;
//! - [`init_tracing`]: where logs go;
//! - [`shutdown_signal`]: when a server starts to drain;
//! - [`certs_dir`] and [`default_ca`]: where the development PKI lives;
//! - [`ready_file`]: how a server tells a script or a harness it is listening;
//! - [`duration`]: how durations are written on every command line;
//! - [`proc`]: what programs read about themselves and the machine from `/proc`.

pub mod duration;
pub mod proc;
pub mod ready_file;

use std::{path::PathBuf, process::ExitCode};

/// Every program's last line: success exits 0; an error is printed once, with
/// its chain of causes on one line (`error: cannot read certs/ca.pem: No such
/// file or directory`), and exits 1.
pub fn exit_code(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr, `info` and up unless `RUST_LOG` says otherwise. Stderr, so
/// that a program's stdout carries only what it was asked to print.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

// ANCHOR: shutdown_signal
/// Resolves on Ctrl-C or, on Unix, SIGTERM (what `docker stop` and most process
/// managers send). Servers start draining when it resolves.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}
// ANCHOR_END: shutdown_signal

/// The root of this workspace, wherever `cargo run` was started from.
pub fn workspace_root() -> PathBuf {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    root.canonicalize().unwrap_or(root)
}

/// The PKI folder used when neither `--certs-dir` nor `CERTS_DIR` says otherwise:
/// `certs/` at the root of this workspace.
pub fn certs_dir() -> PathBuf {
    workspace_root().join("certs")
}

/// The CA certificate that signed the development certificates (chapter 3).
pub fn default_ca() -> PathBuf {
    certs_dir().join("ca.pem")
}
