//! The book's figures against its runs (see `xtask/figures`): every
//! `{{#fig}}` is found in the file its run wrote, every figure defined is used,
//! and no sentence states a measured number typed by hand.

use std::{collections::BTreeSet, path::Path};

use crate::{check::Book, markdown::Page};

/// Folders whose pages a run writes whole (reports, generated tables): their
/// numbers are the run's output itself.
const WRITTEN_BY_RUNS: [&str; 3] = ["results", "generated", "observed"];

pub fn check(book: &Book, pages: &[Page], problems: &mut Vec<String>) -> anyhow::Result<()> {
    let figures = mdbook_figures::Figures::load(&book.root.join("book"))?;
    if let Err(e) = figures.resolve() {
        problems.push(format!("book/figures: {e:#}"));
    }
    let mut used = BTreeSet::new();
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
        for (line, figure) in mdbook_figures::unmarked(&page.text) {
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
    Ok(())
}

/// Prints every hand-typed figure on the named pages (all pages when none),
/// with its line, so that a page can be converted figure by figure.
pub fn list_hand_typed(book: &Book, names: &[String]) -> anyhow::Result<()> {
    let src = book.src();
    let pages = book.pages()?;
    let relative = |page: &Page| {
        page.path
            .strip_prefix(&src)
            .unwrap_or(&page.path)
            .to_owned()
    };
    for name in names {
        anyhow::ensure!(
            pages.iter().any(|p| relative(p) == Path::new(name)),
            "no page {name} under {}",
            src.display()
        );
    }
    let mut total = 0;
    for page in &pages {
        if !names.is_empty() && !names.iter().any(|n| relative(page) == Path::new(n)) {
            continue;
        }
        for (line, figure) in mdbook_figures::unmarked(&page.text) {
            println!("{}: {figure}", crate::check::at(page, line));
            total += 1;
        }
    }
    println!("{total} hand-typed figure(s)");
    Ok(())
}
