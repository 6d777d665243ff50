//! `cargo run -p proto --bin status_table`: writes the book's table of gRPC
//! status codes from `proto::status::TABLE`, so the book cannot drift from the
//! code (a test fails when the committed file differs from this output).

use std::{fs, process::ExitCode};

use clap::Parser;
use proto::{cli::StatusTableArgs as Args, status};

fn main() -> ExitCode {
    let args = Args::parse();
    let table = status::markdown_table();
    if args.stdout {
        print!("{table}");
        return ExitCode::SUCCESS;
    }
    let path = status::book_table_path();
    let written = path
        .parent()
        .map_or(Ok(()), fs::create_dir_all)
        .and_then(|()| fs::write(&path, &table));
    match written {
        Ok(()) => {
            let shown = path.canonicalize().unwrap_or(path);
            println!("wrote {} ({} codes)", shown.display(), status::TABLE.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot write {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}
