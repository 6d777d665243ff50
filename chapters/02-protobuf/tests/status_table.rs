//! The book's status-code table is generated from `proto::status`; this test
//! fails when the committed file no longer matches the code.

use std::fs;

use proto::status;

#[test]
fn book_table_matches_the_generator() {
    let path = status::book_table_path();
    let committed = fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run `cargo run -p proto --bin status_table`",
            path.display()
        )
    });
    assert!(
        committed == status::markdown_table(),
        "{} is out of date; run `cargo run -p proto --bin status_table`",
        path.display()
    );
}
