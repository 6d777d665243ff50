//! `cargo run -p proto --bin status_table`: writes the book's table of gRPC
//! status codes from `proto::status::TABLE`, so the book cannot drift from the
//! code (a test fails when the committed file differs from this output).

use std::{fs, process::ExitCode};

use anyhow::Context;
use clap::Parser;
use proto::{cli::StatusTableArgs as Args, status};

fn main() -> ExitCode {
    program::exit_code(status_table(Args::parse()))
}

fn status_table(args: Args) -> anyhow::Result<()> {
    let table = status::markdown_table();
    if args.stdout {
        print!("{table}");
        return Ok(());
    }
    let path = status::book_table_path();
    path.parent()
        .map_or(Ok(()), fs::create_dir_all)
        .and_then(|()| fs::write(&path, &table))
        .with_context(|| format!("cannot write {}", path.display()))?;
    let shown = path.canonicalize().unwrap_or(path);
    println!("wrote {} ({} codes)", shown.display(), status::TABLE.len());
    Ok(())
}
