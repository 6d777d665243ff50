//! The book's figures against its runs (see `xtask/figures`): every
//! `{{#fig}}` is found in the file its run wrote, every figure defined is used,
//! and no sentence states a measured number typed by hand.

use std::collections::BTreeSet;

use crate::{check::Book, markdown::Page};

/// Pages whose numbers are not drawn from runs yet. They are listed, not
/// exempted silently: check-book prints how many hand-typed figures each still
/// has, and a page leaves this list once it has none.
pub const NOT_YET_DRAWN: [&str; 18] = [
    "answers.md",
    "ch02-protobuf.md",
    "ch03-tls.md",
    "ch04-grpc-greeter.md",
    "ch05-rest-greeter.md",
    "ch06-clients.md",
    "ch07-status-codes.md",
    "ch08-streaming.md",
    "ch09-stack.md",
    "ch10-performance.md",
    "ch11-backpressure.md",
    "ch12-admission.md",
    "ch13-overload.md",
    "ch14-per-call.md",
    "glossary.md",
    "parts/ch10-deadlines-exercise.md",
    "parts/ch10-retry-failure.md",
    "sources.md",
];

/// Folders whose pages a run writes whole (reports, generated tables): their
/// numbers are the run's output itself.
const WRITTEN_BY_RUNS: [&str; 3] = ["results", "generated", "observed"];

pub fn check(book: &Book, pages: &[Page], problems: &mut Vec<String>) -> anyhow::Result<()> {
    let figures = mdbook_figures::Figures::load(&book.root.join("book"))?;
    if let Err(e) = figures.resolve() {
        problems.push(format!("book/figures: {e:#}"));
    }
    let mut used = BTreeSet::new();
    let mut pending = Vec::new();
    for page in pages {
        for (line, key) in mdbook_figures::used(&page.text) {
            if !figures.sources.contains_key(&key) {
                problems.push(format!(
                    "{}: no figure {key} in book/figures/",
                    crate::check::at(page, line)
                ));
            }
            used.insert(key);
        }
        let relative = page.path.strip_prefix(book.src()).unwrap_or(&page.path);
        if relative
            .components()
            .next()
            .is_some_and(|c| WRITTEN_BY_RUNS.iter().any(|d| c.as_os_str() == *d))
        {
            continue;
        }
        let unmarked = mdbook_figures::unmarked(&page.text);
        let name = relative.to_string_lossy();
        if NOT_YET_DRAWN.contains(&name.as_ref()) {
            if !unmarked.is_empty() {
                pending.push(format!("{name} ({})", unmarked.len()));
            }
            continue;
        }
        for (line, figure) in unmarked {
            problems.push(format!(
                "{}: \"{figure}\" is typed by hand; draw it from a run ({{{{#fig chNN.name}}}}, \
                 defined in book/figures/) or mark it ({{{{#quote ...}}}}, {{{{#param ...}}}}, {{{{#calc ...}}}})",
                crate::check::at(page, line)
            ));
        }
    }
    for key in figures.sources.keys().filter(|k| !used.contains(*k)) {
        problems.push(format!(
            "book/figures: figure {key} is defined but no page uses it"
        ));
    }
    if !pending.is_empty() {
        println!(
            "figures not yet drawn from runs (hand-typed count): {}",
            pending.join(", ")
        );
    }
    Ok(())
}
