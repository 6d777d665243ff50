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
pub use listener::{ListenError, TlsListener};
pub use pki::Pki;
