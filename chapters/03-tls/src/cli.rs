//! The command line of `cargo run -p certs`, in the library so the book's checks
//! can parse the book's commands against it.

use std::path::PathBuf;

/// Creates the workshop's development CA and its server and client certificates.
///
/// Existing files are kept unless --force is given. Keys are written with mode
/// 0600 and are git-ignored.
#[derive(clap::Parser, Debug)]
#[command(name = "certs", version)]
pub struct Args {
    /// Folder to write the PKI to
    #[arg(long, env = "CERTS_DIR", default_value_os_t = program::certs_dir())]
    pub dir: PathBuf,
    /// Replace all five files even if they exist (every client must then reload ca.pem)
    #[arg(long)]
    pub force: bool,
    /// Print what each certificate says instead of creating anything
    #[arg(long, conflicts_with = "force")]
    pub show: bool,
}
