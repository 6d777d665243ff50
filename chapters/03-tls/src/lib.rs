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

use std::path::PathBuf;

/// The PKI folder used when neither `--certs-dir` nor `CERTS_DIR` says otherwise:
/// `certs/` at the root of this workspace, wherever `cargo run` was started from.
pub fn default_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../certs"))
        .canonicalize()
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../certs")))
}
