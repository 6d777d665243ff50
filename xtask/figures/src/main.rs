//! The mdBook preprocessor: `book.toml` runs it after the includes and the
//! quizzes are expanded, so a figure in an included part or a quiz is filled in
//! too. mdBook calls it twice: `supports <renderer>` (every renderer is fine),
//! then with `[context, book]` as JSON on stdin, expecting the book back.
//!
//! The book is edited as JSON rather than through mdBook's own types, which
//! would pull mdBook into the workspace: only each chapter's `content` changes.

use std::{
    collections::HashMap,
    io::Read,
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::Context;
use mdbook_figures::times;
use serde_json::Value;

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("supports") {
        return ExitCode::SUCCESS;
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mdbook-figures: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input)?;
    let [context, mut book]: [Value; 2] =
        serde_json::from_str(&input).context("mdBook sent something other than [context, book]")?;
    let root = context
        .get("root")
        .and_then(Value::as_str)
        .map(PathBuf::from)
        .context("the context names no book root")?;
    let values = mdbook_figures::Figures::load(&root)?.resolve()?;
    fill(&mut book, &values, &root.join("src"))?;
    serde_json::to_writer(std::io::stdout().lock(), &book)?;
    Ok(())
}

/// Every chapter is an object with `content` and `sub_items`, wherever it sits.
/// A chapter page (`chNN-*.md`) also gets its measured times under its commands.
fn fill(node: &mut Value, values: &HashMap<String, String>, src: &Path) -> anyhow::Result<()> {
    match node {
        Value::Object(map) => {
            if map.contains_key("sub_items") {
                let name = map
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string();
                let chapter = map
                    .get("path")
                    .and_then(Value::as_str)
                    .and_then(|p| p.strip_suffix(".md")?.get(..4))
                    .filter(|c| c.starts_with("ch"))
                    .map(str::to_string);
                if let Some(Value::String(content)) = map.get_mut("content") {
                    *content = mdbook_figures::expand(content, values)
                        .with_context(|| format!("in the chapter {name:?}"))?;
                    if let Some(chapter) = chapter {
                        let times = times::Times::read(src, &chapter)?;
                        *content = times::annotate(content, src, &times);
                    }
                    if content.contains(times::SHORT_PATH) {
                        *content = content.replace(times::SHORT_PATH, &times::short_path(src)?);
                    }
                }
            }
            map.values_mut().try_for_each(|v| fill(v, values, src))
        }
        Value::Array(items) => items.iter_mut().try_for_each(|v| fill(v, values, src)),
        _ => Ok(()),
    }
}
