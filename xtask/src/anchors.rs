//! Listings that tell the truth, for `cargo xtask check-book`:
//!
//! - **dead anchors**: every `ANCHOR: name` region in the sources the book
//!   includes from is included by some page. A region nobody shows is markup
//!   kept in step with the code for nothing, and it suggests a listing that
//!   was meant to be there;
//! - **open blocks**: a region that ends inside a block it opened (a `{` with
//!   no `}` in the region, braces in strings, chars and comments aside) says so
//!   with a visible last line such as `// ...` or `// --snip--`, as the Rust
//!   book's listings do. Otherwise the page shows a function that seems to end
//!   where it does not.
//!
//! Regions are read as mdBook reads them: from the line after `ANCHOR: name`
//! to the line before `ANCHOR_END: name`, leaving out other anchors' lines.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

use crate::markdown::Page;

/// What the book includes listings from, relative to the workspace root.
pub const SOURCES: [&str; 6] = [
    "chapters",
    "support",
    "examples",
    "exercises",
    "proto",
    "Cargo.toml",
];

/// One `ANCHOR` region of a file.
#[derive(Debug, PartialEq)]
pub struct Region {
    pub name: String,
    /// 1-based line of its `ANCHOR:` line.
    pub line: usize,
    /// Its lines, as the page shows them.
    pub lines: Vec<String>,
}

/// The regions of a file's text, in the order they start.
pub fn regions(text: &str) -> Vec<Region> {
    let lines: Vec<&str> = text.lines().collect();
    let mut regions = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = marker(line, "ANCHOR:") else {
            continue;
        };
        let end = lines[i + 1..]
            .iter()
            .position(|l| marker(l, "ANCHOR_END:") == Some(name))
            .map_or(lines.len(), |p| i + 1 + p);
        let body = lines[i + 1..end]
            .iter()
            .filter(|l| marker(l, "ANCHOR:").is_none() && marker(l, "ANCHOR_END:").is_none())
            .map(|l| l.to_string())
            .collect();
        regions.push(Region {
            name: name.to_string(),
            line: i + 1,
            lines: body,
        });
    }
    regions
}

/// The anchor name after `keyword` on this line, if it is a marker line.
pub fn marker<'a>(line: &'a str, keyword: &str) -> Option<&'a str> {
    let after = line.split_once(keyword)?.1.trim();
    let name = after.split_whitespace().next()?;
    name.chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
        .then_some(name)
}

/// Whether a region ends inside a block it opened: its depth at the end is
/// above the lowest it reached (a region may start inside a block and close it).
pub fn ends_inside_a_block(lines: &[String]) -> bool {
    let (mut depth, mut lowest) = (0i64, 0i64);
    for c in code_chars(&lines.join("\n")) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                lowest = lowest.min(depth);
            }
            _ => {}
        }
    }
    depth > lowest
}

/// A last line that tells the reader the listing goes on.
pub fn shows_a_cut(lines: &[String]) -> bool {
    lines
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| !l.is_empty())
        .is_some_and(|l| l.starts_with("// ...") || l.starts_with("// --snip--"))
}

/// The characters of Rust (or protobuf) source that are code: strings, char
/// literals and comments are left out; lifetimes (`'a`) are code.
fn code_chars(text: &str) -> Vec<char> {
    let s: Vec<char> = text.chars().collect();
    let at = |i: usize| s.get(i).copied().unwrap_or('\0');
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut code = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == '/' && at(i + 1) == '/' {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == 'r'
            && (i == 0 || !ident(s[i - 1]) || (s[i - 1] == 'b' && (i < 2 || !ident(s[i - 2]))))
            && matches!(at(i + 1), '"' | '#')
        {
            // r"..." or r#"..."#: no escapes, ends at a quote and as many #.
            let hashes = s[i + 1..].iter().take_while(|&&c| c == '#').count();
            if at(i + 1 + hashes) != '"' {
                code.push(c);
                i += 1;
                continue;
            }
            i += hashes + 2;
            while i < s.len() && !(s[i] == '"' && (1..=hashes).all(|h| at(i + h) == '#')) {
                i += 1;
            }
            i += hashes + 1;
        } else if c == '"' {
            i += 1;
            while i < s.len() && s[i] != '"' {
                i += if s[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' && at(i + 1) == '\\' {
            // '\n', '\'', '\u{7b}'
            i += 2;
            while i < s.len() && s[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c == '\'' && at(i + 2) == '\'' {
            i += 3; // '{'
        } else {
            code.push(c);
            i += 1;
        }
    }
    code
}

/// (file, anchor) of every anchored include on these pages, the file
/// canonical so that `../../chapters/x.rs` and `../../../chapters/x.rs` match.
pub fn included(pages: &[Page]) -> BTreeSet<(PathBuf, String)> {
    let mut used = BTreeSet::new();
    for page in pages {
        for (_, argument) in page.directives("include") {
            if let Some((file, anchor)) = argument.split_once(':')
                && !anchor.starts_with(|c: char| c.is_ascii_digit())
                && let Ok(path) = page.dir().join(file).canonicalize()
            {
                used.insert((path, anchor.to_string()));
            }
        }
    }
    used
}

/// Both checks over every source file the book includes from.
pub fn check(root: &Path, pages: &[Page], problems: &mut Vec<String>) -> anyhow::Result<()> {
    let used = included(pages);
    for file in source_files(root)? {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let shown = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        let canonical = file.canonicalize()?;
        let braces = file.extension().is_some_and(|e| e == "rs" || e == "proto");
        for region in regions(&text) {
            let is_used = used.contains(&(canonical.clone(), region.name.clone()));
            let problem = if !is_used {
                Some(
                    "is included by no page (include it where the prose needs it, or remove its ANCHOR lines)",
                )
            } else if braces && ends_inside_a_block(&region.lines) && !shows_a_cut(&region.lines) {
                Some(
                    "ends inside a block it opened; end it at the block's end, or make its last line `// ...`",
                )
            } else {
                None
            };
            if let Some(problem) = problem {
                let message = format!(
                    "{shown}:{}: region `{}` {problem}",
                    region.line, region.name
                );
                problems.push(message);
            }
        }
    }
    Ok(())
}

/// Every file under [`SOURCES`] that has an anchor, sorted.
fn source_files(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut todo: Vec<PathBuf> = SOURCES.iter().map(|s| root.join(s)).collect();
    while let Some(path) = todo.pop() {
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            for entry in std::fs::read_dir(&path)? {
                todo.push(entry?.path());
            }
        } else if std::fs::read_to_string(&path).is_ok_and(|t| t.contains("ANCHOR:")) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(String::from).collect()
    }

    #[test]
    fn regions_are_read_as_mdbook_reads_them() {
        let text = "a\n// ANCHOR: outer\nb\n// ANCHOR: inner\nc\n// ANCHOR_END: inner\nd\n// ANCHOR_END: outer\n";
        let found = regions(text);
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].name.as_str(), found[0].line), ("outer", 2));
        assert_eq!(found[0].lines, ["b", "c", "d"]);
        assert_eq!(found[1].lines, ["c"]);
        // A TOML file's anchors are comments too.
        assert_eq!(
            regions("# ANCHOR: workspace\n[workspace]\n# ANCHOR_END: workspace\n")[0].lines,
            ["[workspace]"]
        );
    }

    #[test]
    fn a_region_open_at_its_end_is_found_and_braces_in_strings_and_comments_are_not() {
        let open = |t: &str| ends_inside_a_block(&lines(t));
        assert!(!open("fn f() {\n    g();\n}"));
        assert!(open("fn f() {\n    let x = 1;"));
        assert!(open("impl A {\n    fn f() {}\n"));
        // Braces that are not code.
        assert!(!open("let s = \"{\";\nlet c = '{';\n// {\n/* { /* { */ */"));
        assert!(!open(
            "let r = r#\"{\"#;\nlet b = br\"{\";\nlet e = \"\\\"{\";"
        ));
        // A lifetime is not a char literal: the block after it counts.
        assert!(open("fn f<'a>(x: &'a str) {"));
        assert!(!open("fn f<'a>(x: &'a str) {}\nlet q = '\\'';"));
        // Starting inside a block and closing it is fine; opening another is not.
        assert!(!open("    g();\n}"));
        assert!(open("    g();\n}\nfn h() {"));
    }

    #[test]
    fn a_visible_cut_is_a_last_line_that_says_so() {
        assert!(shows_a_cut(&lines("fn f() {\n    // ...\n")));
        assert!(shows_a_cut(&lines("fn f() {\n    // --snip--")));
        assert!(shows_a_cut(&lines(
            "fn f() {\n    // ... the rest sends the reply"
        )));
        assert!(!shows_a_cut(&lines("fn f() {\n    g(); // ...\n    h();")));
    }

    #[test]
    fn dead_and_open_regions_are_reported_with_their_file_and_line() {
        let root = tempfile::tempdir().unwrap();
        let src = root.path().join("chapters/04-x/src");
        let book = root.path().join("book/src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::create_dir_all(&book).unwrap();
        std::fs::write(
            src.join("lib.rs"),
            "// ANCHOR: shown\nfn a() {}\n// ANCHOR_END: shown\n\
             // ANCHOR: dead\nfn b() {}\n// ANCHOR_END: dead\n\
             // ANCHOR: open\nfn c() {\n    let x = 1;\n// ANCHOR_END: open\n}\n\
             // ANCHOR: cut\nfn d() {\n    // ...\n// ANCHOR_END: cut\n}\n",
        )
        .unwrap();
        let page_path = book.join("ch04.md");
        std::fs::write(
            &page_path,
            "{{#include ../../chapters/04-x/src/lib.rs:shown}}\n{{#include ../../chapters/04-x/src/lib.rs:open}}\n{{#include ../../chapters/04-x/src/lib.rs:cut}}\n",
        )
        .unwrap();
        let pages = [Page::read(&page_path).unwrap()];
        let mut problems = Vec::new();
        check(root.path(), &pages, &mut problems).unwrap();
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert!(
            problems[0]
                .starts_with("chapters/04-x/src/lib.rs:4: region `dead` is included by no page"),
            "{problems:#?}"
        );
        assert!(
            problems[1]
                .starts_with("chapters/04-x/src/lib.rs:7: region `open` ends inside a block"),
            "{problems:#?}"
        );
    }
}
