//! Chapter 3: development TLS.
//!
//! - [`pki`] makes the development CA and its two leaf certificates with rcgen.
//! - [`config`] turns those files into rustls server and client configurations,
//!   and [`TlsArgs`] is the flags and env vars every server takes to find them.
//! - [`listener`] accepts TCP connections and completes their TLS handshakes,
//!   logging why a handshake failed; both greeter servers use it.
//! - [`inspect`] prints what a certificate says, so the files are not a black box.

pub mod cli;
pub mod config;
pub mod inspect;
pub mod listener;
pub mod pki;

pub use config::{TlsArgs, client_config, server_config};
pub use listener::TlsListener;
pub use pki::Pki;

use std::{path::PathBuf, process::ExitCode};

/// Every program's last line: success exits 0; an error is printed once, with
/// its chain of causes on one line (`error: cannot read certs/ca.pem: No such
/// file or directory`), and exits 1. Lives here because this is the first
/// crate with a program that can fail.
pub fn exit_code(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The PKI folder used when neither `--certs-dir` nor `CERTS_DIR` says otherwise:
/// `certs/` at the root of this workspace, wherever `cargo run` was started from.
pub fn default_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../certs"))
        .canonicalize()
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../certs")))
}
