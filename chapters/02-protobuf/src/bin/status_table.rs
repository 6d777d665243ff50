//! `cargo run -p proto --bin status_table`: prints the table of gRPC status
//! codes from `proto::status::TABLE`, the same table the client's `meaning:`
//! line and the REST server's problems are read from. The book's copy is
//! written by `cargo xtask status-table`.

use proto::{cli::StatusTableArgs, status};

fn main() {
    program::args::<StatusTableArgs>();
    print!("{}", status::markdown_table());
}
