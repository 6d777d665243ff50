//! README.md's table of chapters, drawn from the book: a row per chapter of
//! `book/src/SUMMARY.md`, in its order, with the title it gives and the
//! cells the chapter's page names in one line of its own,
//!
//! `<!-- README: `crate` (`chapters/NN-name`) | `cargo run ...` -->`
//!
//! which mdBook does not show. `cargo xtask readme` writes the table;
//! `check-book` fails when README.md's differs, so a new chapter's row comes
//! with its page, not from a hand-edited list.

use std::path::Path;

use anyhow::Context;

/// The lines README.md's table sits between.
const BEGIN: &str = "<!-- chapters: `cargo xtask readme` draws this table from the book; edit the pages' README lines -->";
const END: &str = "<!-- end of chapters -->";
const ROW: &str = "<!-- README: ";

/// The table, from SUMMARY.md and the pages it links.
pub fn table(root: &Path) -> anyhow::Result<String> {
    let src = root.join("book/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md"))?;
    let mut table = String::from("| # | chapter | crate (folder) | run |\n|---|---|---|---|\n");
    for line in summary.lines() {
        // `- [Title](chNN-name.md)`
        let Some((title, file)) = line
            .trim_start()
            .strip_prefix("- [")
            .and_then(|rest| rest.split_once("]("))
            .and_then(|(title, rest)| Some((title, rest.strip_suffix(')')?)))
        else {
            continue;
        };
        if !file.starts_with("ch") {
            continue;
        }
        let page = std::fs::read_to_string(src.join(file))
            .with_context(|| format!("cannot read book/src/{file}"))?;
        // "10" for "# Chapter 10: ...", "10.1" for a page of chapter 10's own.
        let number = page
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# Chapter ")?.split_once(':'))
            .map(|(number, _)| number)
            .with_context(|| format!("book/src/{file} does not start with `# Chapter N: `"))?;
        let cells = page
            .lines()
            .find_map(|l| l.strip_prefix(ROW)?.strip_suffix(" -->"))
            .with_context(|| {
                format!(
                    "book/src/{file} has no `{ROW}... -->` line for README.md's table of chapters"
                )
            })?;
        table.push_str(&format!("| {number} | {title} | {cells} |\n"));
    }
    Ok(table)
}

/// README.md with its table as the book draws it now.
fn drawn(root: &Path) -> anyhow::Result<(String, String)> {
    let readme = std::fs::read_to_string(root.join("README.md"))?;
    let (before, rest) = readme
        .split_once(&format!("{BEGIN}\n"))
        .with_context(|| format!("README.md has no line `{BEGIN}`"))?;
    let (_, after) = rest
        .split_once(&format!("{END}\n"))
        .with_context(|| format!("README.md has no line `{END}` after the table"))?;
    let fresh = format!("{before}{BEGIN}\n{}{END}\n{after}", table(root)?);
    Ok((readme, fresh))
}

/// `cargo xtask readme`.
pub fn write(root: &Path) -> anyhow::Result<()> {
    let (_, fresh) = drawn(root)?;
    std::fs::write(root.join("README.md"), fresh)?;
    println!("wrote README.md's table of chapters");
    Ok(())
}

/// For check-book: README.md's table is the one the book draws.
pub fn check(root: &Path, problems: &mut Vec<String>) {
    match drawn(root) {
        Ok((current, fresh)) if current != fresh => problems.push(
            "README.md: its table of chapters is out of date with the book; run `cargo xtask readme`"
                .into(),
        ),
        Ok(_) => {}
        Err(e) => problems.push(format!("README.md: {e:#}")),
    }
}
