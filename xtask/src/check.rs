//! `cargo xtask check-book`: the book against the code.
//!
//! - every `{{#include}}` names a file that exists and, if it names an anchor,
//!   an anchor that exists in that file;
//! - what a page includes from a run's output (`results/`, `observed/`) adds
//!   no heading to the page: mdBook files the page's own sections under it in
//!   the sidebar and the outline (reports caption their tables in bold);
//! - every relative link leads to a page (and heading) that exists, and every
//!   SVG a page shows is well-formed XML; every diagram in
//!   `book/src/diagrams/` is shown by some page;
//! - every anchored region of the sources is included somewhere, and one that
//!   ends inside a block says so (`anchors.rs`);
//! - every chapter has the workshop's shape and a quiz of at least four
//!   explained questions: no placeholder pages;
//! - every command in a ```console block is either parsed by the real program's
//!   parser (`cargo run ...`) or run by a step of `book/observe/*.toml`
//!   (everything else), which `cargo xtask observe --check` reruns in CI, and
//!   every observed file a page shows is one a step writes (`commands.rs`);
//! - every measured figure in a sentence is drawn from a run's output or
//!   marked for what it is (`figures.rs`);
//! - every step of an Exercise that shows commands has a measured time;
//! - the answers appendix is what `cargo xtask answers` would write.

use std::{
    collections::{BTreeSet, HashMap},
    path::{Path, PathBuf},
};

use mdbook_figures::times;

use crate::{
    anchors,
    commands::{check_commands, check_observed},
    figures,
    markdown::{self, Page},
    observe, quiz,
};

/// The sections every chapter has, in this order (CONTRIBUTING.md, "Adding a
/// chapter").
pub const CHAPTER_SECTIONS: [&str; 8] = [
    "Learning objectives",
    "Prerequisites",
    "Concept",
    "Exercise",
    "What just happened",
    "Common failure",
    "Knowledge check",
    "Done when",
];

pub struct Book {
    pub root: PathBuf,
}

impl Book {
    pub fn src(&self) -> PathBuf {
        self.root.join("book/src")
    }

    /// Every Markdown page of the book's source, skipping what tools generate.
    pub fn pages(&self) -> anyhow::Result<Vec<Page>> {
        let mut pages = Vec::new();
        let mut dirs = vec![self.src()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir)? {
                let path = entry?.path();
                if path.is_dir() {
                    if path
                        .file_name()
                        .is_some_and(|n| n != "mdbook-quiz" && n != "observed")
                    {
                        dirs.push(path);
                    }
                } else if path.extension().is_some_and(|e| e == "md") {
                    pages.push(Page::read(&path)?);
                }
            }
        }
        pages.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(pages)
    }

    /// The chapter pages in SUMMARY.md order: `chNN-*.md`.
    pub fn chapters(&self) -> anyhow::Result<Vec<Page>> {
        let summary = Page::read(&self.src().join("SUMMARY.md"))?;
        summary
            .links()
            .into_iter()
            .map(|(_, target)| target)
            .filter(|t| is_chapter_file(t))
            .map(|t| Page::read(&self.src().join(t)))
            .collect()
    }

    /// The commands the observations run: every `run` of book/observe/*.toml.
    pub fn observed_commands(&self) -> anyhow::Result<BTreeSet<String>> {
        Ok(observe::steps::read_all(&self.root)?
            .iter()
            .flat_map(|c| &c.steps)
            .filter_map(|s| match &s.action {
                observe::steps::Action::Run(run) => Some(run.run.clone()),
                _ => None,
            })
            .collect())
    }

    /// Each chapter page's title, its quizzes (where they sit) and the code
    /// exercise it sets (the one whose solution it links), in book order.
    pub fn quizzes(&self) -> anyhow::Result<Vec<quiz::PageQuizzes>> {
        let mut out = Vec::new();
        for page in self.chapters()? {
            let title = page
                .text
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("# ")
                .trim()
                .to_string();
            let exercise = page
                .text
                .split("solutions.md#ch")
                .nth(1)
                .and_then(|rest| rest.get(..2)?.parse().ok());
            let mut quizzes = Vec::new();
            for place in quiz::Place::ALL {
                if let Some(path) = quiz_in(&page, place) {
                    quizzes.push((place, quiz::read(&path, place)?));
                }
            }
            out.push(quiz::PageQuizzes {
                title,
                quizzes,
                exercise,
            });
        }
        Ok(out)
    }

    pub fn answers_path(&self) -> PathBuf {
        self.src().join("answers.md")
    }

    pub fn instructors_path(&self) -> PathBuf {
        self.src().join("instructors.md")
    }
}

fn is_chapter_file(name: &str) -> bool {
    let b = name.as_bytes();
    name.ends_with(".md")
        && b.len() > 4
        && name.starts_with("ch")
        && b[2].is_ascii_digit()
        && b[3].is_ascii_digit()
}

/// The quiz in the page's section for `place`, if it has one.
fn quiz_in(page: &Page, place: quiz::Place) -> Option<PathBuf> {
    let section = page.section(place.section())?;
    let path = section.split("{{#quiz ").nth(1)?.split("}}").next()?;
    Some(page.dir().join(path.trim()))
}

/// Runs every check; returns the problems found, each naming a file and line.
pub fn check(book: &Book) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    let pages = book.pages()?;
    let bases = link_bases(&pages);
    for page in &pages {
        let base = link_base(&bases, page);
        check_includes(page, &mut problems);
        check_included_headings(page, &mut problems);
        check_links(page, base, &mut problems);
        check_images(page, base, &mut problems);
    }
    check_diagrams_shown(book, &pages, &bases, &mut problems)?;
    for chapter in book.chapters()? {
        check_shape(&chapter, &mut problems);
    }
    check_part_reviews(book, &mut problems)?;
    let observed = book.observed_commands()?;
    let readme = Page::read(&book.root.join("README.md"))?;
    for page in pages.iter().chain(std::iter::once(&readme)) {
        check_commands(page, &observed, &mut problems);
    }
    check_observed(book, &pages, &mut problems)?;
    crate::readme::check(&book.root, &mut problems);
    anchors::check(&book.root, &pages, &mut problems)?;
    figures::check(book, &pages, &mut problems)?;
    match book.quizzes() {
        Ok(quizzes) => {
            for (path, text) in [
                (book.answers_path(), quiz::appendix(&quizzes)),
                (book.instructors_path(), quiz::instructor_notes(&quizzes)),
            ] {
                if std::fs::read_to_string(&path).unwrap_or_default() != text {
                    problems.push(format!(
                        "{}: out of date with book/quizzes; run `cargo xtask answers`",
                        path.display()
                    ));
                }
            }
        }
        Err(e) => problems.push(format!("{e:#}")),
    }
    Ok(problems)
}

pub fn at(page: &Page, line: usize) -> String {
    format!("{}:{line}", page.path.display())
}

pub fn check_includes(page: &Page, problems: &mut Vec<String>) {
    for (line, argument) in page.directives("include") {
        let (file, anchor) = match argument.split_once(':') {
            Some((file, anchor)) => (file, Some(anchor)),
            None => (argument.as_str(), None),
        };
        let path = page.dir().join(file);
        let Ok(text) = std::fs::read_to_string(&path) else {
            problems.push(format!(
                "{}: includes {file}, which does not exist",
                at(page, line)
            ));
            continue;
        };
        // Line ranges (`file:10:20`) are numbers; anchors are names.
        if let Some(anchor) = anchor.filter(|a| !a.starts_with(|c: char| c.is_ascii_digit())) {
            // As mdBook reads them: the name is the word after the keyword,
            // whatever follows it (`<!-- ANCHOR: name -->` in Markdown).
            let has = |keyword: &str| {
                text.lines()
                    .any(|l| crate::anchors::marker(l, keyword) == Some(anchor))
            };
            if !has("ANCHOR:") || !has("ANCHOR_END:") {
                problems.push(format!(
                    "{}: {file} has no anchor `{anchor}`",
                    at(page, line)
                ));
            }
        }
    }
    for (line, file) in page.directives("quiz") {
        if !page.dir().join(&file).exists() {
            problems.push(format!("{}: quiz {file} does not exist", at(page, line)));
        }
    }
}

/// The folders whose files a run writes: a page includes its reports and
/// transcripts from there.
const RUN_OUTPUT: [&str; 2] = ["results", "observed"];

/// Included reports contribute no headings to the outline: a Markdown heading
/// in what a page includes from `results/` or `observed/` (outside a code
/// fence, on the page or in the file) becomes a heading of the page, and
/// mdBook's sidebar then files the page's next sections under it.
pub fn check_included_headings(page: &Page, problems: &mut Vec<String>) {
    let prose: BTreeSet<usize> = page.prose_lines().iter().map(|(n, _)| *n).collect();
    for (line, argument) in page.directives("include") {
        // An include inside a fence is code, whatever its lines look like.
        if !prose.contains(&line) {
            continue;
        }
        let file = argument
            .split_once(':')
            .map_or(argument.as_str(), |(f, _)| f);
        // The include's own path names the folder (`results/ch16/x.md`,
        // `../results/...` from a part), whatever the checkout's path holds.
        let from_a_run = Path::new(file)
            .components()
            .any(|c| RUN_OUTPUT.iter().any(|d| c.as_os_str() == *d));
        if !from_a_run {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(page.dir().join(file)) else {
            continue; // check_includes reports it
        };
        for (number, heading) in markdown::headings(&included_region(&text, &argument)) {
            problems.push(format!(
                "{}: includes {argument}, whose line {number} is a heading (`{heading}`): \
                 it joins the page's outline and sidebar; write it as a bold line in the \
                 program that writes the file",
                at(page, line)
            ));
        }
    }
}

/// The lines an `{{#include}}` argument shows, with their 1-based numbers in
/// the file, as mdBook cuts them: `file` (all), `file:name` (an anchor's
/// region, other anchors' marker lines left out), `file:N`, `file:N:M`,
/// `file:N:` and `file::M` (lines N to M).
fn included_region(text: &str, argument: &str) -> Vec<(usize, String)> {
    let lines: Vec<(usize, &str)> = text.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
    let is_marker = |l: &str| {
        anchors::marker(l, "ANCHOR:").is_some() || anchors::marker(l, "ANCHOR_END:").is_some()
    };
    let keep = |range: &[(usize, &str)]| {
        range
            .iter()
            .filter(|(_, l)| !is_marker(l))
            .map(|(n, l)| (*n, l.to_string()))
            .collect()
    };
    let Some((_, spec)) = argument.split_once(':') else {
        return keep(&lines);
    };
    if spec.starts_with(|c: char| c.is_ascii_digit() || c == ':') {
        let (from, to) = spec.split_once(':').unwrap_or((spec, ""));
        let from = from.trim().parse::<usize>().unwrap_or(1).max(1);
        let to = to
            .trim()
            .parse::<usize>()
            .unwrap_or(lines.len())
            .min(lines.len());
        return if from > to {
            Vec::new()
        } else {
            keep(&lines[from - 1..to])
        };
    }
    let Some(start) = lines
        .iter()
        .position(|(_, l)| anchors::marker(l, "ANCHOR:") == Some(spec))
    else {
        return Vec::new(); // check_includes reports it
    };
    let end = lines[start + 1..]
        .iter()
        .position(|(_, l)| anchors::marker(l, "ANCHOR_END:") == Some(spec))
        .map_or(lines.len(), |p| start + 1 + p);
    keep(&lines[start + 1..end])
}

/// The folder `page`'s relative links lead from (see [`link_bases`]).
fn link_base<'a>(bases: &'a HashMap<PathBuf, PathBuf>, page: &'a Page) -> &'a Path {
    bases.get(&page.path).map_or(page.dir(), PathBuf::as_path)
}

/// The folder each page's relative links lead from: its own, except for a
/// Markdown part, which mdBook pastes into the page that includes it
/// (`{{#include parts/ch10-deadlines-concept.md}}`), so that its links and
/// images lead from that page.
fn link_bases(pages: &[Page]) -> HashMap<PathBuf, PathBuf> {
    let mut bases = HashMap::new();
    for page in pages {
        for (_, argument) in page.directives("include") {
            let path = page.dir().join(argument.trim());
            if path.extension().is_some_and(|e| e == "md") {
                bases.insert(path, page.dir().to_path_buf());
            }
        }
    }
    bases
}

pub fn check_links(page: &Page, base: &Path, problems: &mut Vec<String>) {
    for (line, target) in page.links() {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, fragment) = match target.split_once('#') {
            Some((file, fragment)) => (file, Some(fragment)),
            None => (target.as_str(), None),
        };
        let linked = if file.is_empty() {
            Some(Page {
                path: page.path.clone(),
                text: page.text.clone(),
            })
        } else {
            let path = base.join(file.replace(".html", ".md"));
            if !path.exists() {
                problems.push(format!(
                    "{}: links to {file}, which does not exist",
                    at(page, line)
                ));
                continue;
            }
            if path.extension().is_some_and(|e| e == "md") {
                Page::read(&path).ok()
            } else {
                None
            }
        };
        if let (Some(fragment), Some(linked)) = (fragment, linked)
            && !headings_with_parts(&linked).iter().any(|id| id == fragment)
        {
            problems.push(format!(
                "{}: links to #{fragment}, which is no heading of {}",
                at(page, line),
                linked.path.display()
            ));
        }
    }
}

/// Every SVG a page shows (`![...](diagrams/x.svg)`) is well-formed XML: a
/// browser shows a malformed one as a broken image, and mdBook builds anyway.
/// (A missing one is a broken link, above.)
pub fn check_images(page: &Page, base: &Path, problems: &mut Vec<String>) {
    for (line, target) in page.links() {
        if target.contains("://") || !target.ends_with(".svg") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(base.join(&target)) else {
            continue;
        };
        if let Err(problem) = roxmltree::Document::parse(&text) {
            problems.push(format!(
                "{}: shows {target}, which is not well-formed XML: {problem}",
                at(page, line)
            ));
        }
    }
}

/// Every drawing in `book/src/diagrams/` is shown by a page: one that none
/// shows has lost its place in the text, or was never given one.
fn check_diagrams_shown(
    book: &Book,
    pages: &[Page],
    bases: &HashMap<PathBuf, PathBuf>,
    problems: &mut Vec<String>,
) -> anyhow::Result<()> {
    let dir = book.src().join("diagrams");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    let shown: BTreeSet<PathBuf> = pages
        .iter()
        .flat_map(|page| {
            let base = link_base(bases, page);
            page.links().into_iter().map(move |(_, t)| base.join(t))
        })
        .collect();
    for entry in entries {
        let path = entry?.path();
        if !shown.contains(&path) {
            problems.push(format!("{}: no page shows it", path.display()));
        }
    }
    Ok(())
}

/// A page's heading ids, with those of the Markdown parts it includes
/// (`{{#include parts/ch10-retry-exercise.md}}`): mdBook gives them ids in
/// the page that includes them.
fn headings_with_parts(page: &Page) -> Vec<String> {
    let mut ids = page.heading_ids();
    for (_, argument) in page.directives("include") {
        let path = page.dir().join(argument.trim());
        if path.extension().is_some_and(|e| e == "md")
            && let Ok(part) = Page::read(&path)
        {
            ids.extend(headings_with_parts(&part));
        }
    }
    ids
}

pub fn check_shape(page: &Page, problems: &mut Vec<String>) {
    let headings = page.level2_headings();
    let mut expected = CHAPTER_SECTIONS.iter().peekable();
    for heading in &headings {
        if expected.peek().is_some_and(|e| heading.starts_with(*e)) {
            expected.next();
        }
    }
    let missing: Vec<&str> = expected.copied().collect();
    if !missing.is_empty() {
        problems.push(format!(
            "{}: missing (or out of order) sections: {}",
            page.path.display(),
            missing.join(", ")
        ));
    }
    // A chapter that shows a kept run says first what the run showed.
    if page.text.contains("results/")
        && let Some(section) = page.section("What just happened")
        && let Err(e) = finding_box(&section)
    {
        problems.push(format!("{}: What just happened: {e}", page.path.display()));
    }
    let (figures, words) = figure_density(page);
    if figures * 1000 > FIGURES_PER_1000_WORDS * words {
        problems.push(format!(
            "{}: {figures} measured numbers ({{{{#fig ...}}}}) in {words} words of prose, more than \
             {FIGURES_PER_1000_WORDS} per 1,000: say what the run showed with the number each point \
             stands on, and point at the table's row for the rest",
            page.path.display()
        ));
    }
    for step in steps_without_a_time(page) {
        problems.push(format!(
            "{}: the step \"{step}\" shows commands but no measured time: observe them \
             (book/observe/), name the full run's kept folder under its block \
             (`<!-- kept run: NAME -->`), or say why it is not timed (`<!-- not timed: WHY -->`)",
            page.path.display()
        ));
    }
    let words = page.text.split_whitespace().count();
    if words < 600 {
        problems.push(format!(
            "{}: only {words} words; a chapter is not a placeholder",
            page.path.display()
        ));
    }
    // A check right after the idea, before the run that shows it, and the
    // chapter's own at the end; a Part's review is checked with the outline.
    for place in [quiz::Place::Concept, quiz::Place::KnowledgeCheck] {
        match quiz_in(page, place) {
            None => problems.push(format!(
                "{}: its {} section has no {{{{#quiz ...}}}}",
                page.path.display(),
                place.section()
            )),
            Some(path) => {
                if let Err(e) = quiz::read(&path, place) {
                    problems.push(format!("{e:#}"));
                }
            }
        }
    }
}

/// Every Part of the outline (a `# ` line of SUMMARY.md) ends with a review:
/// its last chapter page has a `## Part review: which limit?` with a quiz.
pub fn check_part_reviews(book: &Book, problems: &mut Vec<String>) -> anyhow::Result<()> {
    let summary = Page::read(&book.src().join("SUMMARY.md"))?;
    let mut last_of_part: Vec<(String, Option<String>)> = Vec::new();
    for line in summary.text.lines() {
        if let Some(part) = line.strip_prefix("# ").filter(|p| *p != "Summary") {
            last_of_part.push((part.to_string(), None));
        } else if let Some((_, target)) = line.split_once("](")
            && let Some(file) = target.strip_suffix(')').filter(|t| is_chapter_file(t))
            && let Some((_, last)) = last_of_part.last_mut()
        {
            *last = Some(file.to_string());
        }
    }
    for (part, last) in last_of_part {
        let Some(file) = last else { continue };
        let page = Page::read(&book.src().join(&file))?;
        if quiz_in(&page, quiz::Place::PartReview).is_none() {
            problems.push(format!(
                "{}: the Part \"{part}\" ends here without a `## {}` section and its quiz",
                page.path.display(),
                quiz::Place::PartReview.section()
            ));
        }
    }
    Ok(())
}

/// The Exercise's steps (`### ...`) that show console commands of which
/// none has a measured time (`mdbook_figures::times`): a reader should know
/// how long a step takes before starting it.
fn steps_without_a_time(page: &Page) -> Vec<String> {
    let Some(chapter) = page
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.get(..4))
    else {
        return Vec::new();
    };
    let times = times::Times::read(page.dir(), chapter).unwrap_or_default();
    let exercise = page.section("Exercise").unwrap_or_default();
    let mut missing = Vec::new();
    for step in exercise.split("\n### ").skip(1) {
        let blocks = times::console_blocks(step);
        if !blocks.is_empty()
            && blocks
                .iter()
                .all(|block| times::note(page.dir(), &times, block).is_none())
        {
            missing.push(step.lines().next().unwrap_or_default().to_string());
        }
    }
    missing
}

/// How many measured numbers a page's prose may carry per 1,000 words: a
/// reader should find the argument, and a table holds numbers better than a
/// sentence does.
const FIGURES_PER_1000_WORDS: usize = 10;

/// The `{{#fig ...}}` markers in a page's prose and its words, each marker
/// one word; code blocks and table rows are not prose.
fn figure_density(page: &Page) -> (usize, usize) {
    let (mut figures, mut words) = (0, 0);
    for (_, line) in page.prose_lines() {
        if line.trim_start().starts_with('|') {
            continue;
        }
        figures += line.matches("{{#fig ").count();
        // A marker may hold spaces (`{{#param 100 ms}}`): it is one word.
        let mut rest = line;
        let mut text = String::new();
        while let Some(start) = rest.find("{{#") {
            text.push_str(&rest[..start]);
            text.push_str(" N ");
            rest = rest[start..]
                .find("}}")
                .map_or("", |end| &rest[start + end + 2..]);
        }
        text.push_str(rest);
        words += text.split_whitespace().count();
    }
    (figures, words)
}

/// The box an experiment chapter's "What just happened" opens with: a
/// blockquote titled `**What the run showed**` of three to five bullets,
/// each a finding with its measured number (`{{#fig ...}}`); the tables
/// carry the rest.
fn finding_box(section: &str) -> Result<(), String> {
    const TITLE: &str = "> **What the run showed**";
    let mut lines = section.lines().skip_while(|l| l.trim().is_empty());
    if lines.next().map(str::trim_end) != Some(TITLE) {
        return Err(format!(
            "it must open with the finding box, `{TITLE}` and three to five bullets"
        ));
    }
    let mut bullets: Vec<String> = Vec::new();
    for line in lines.take_while(|l| l.starts_with('>')) {
        let text = line.trim_start_matches('>').trim();
        match text.strip_prefix("- ") {
            Some(first) => bullets.push(first.to_string()),
            None => {
                if let Some(last) = bullets.last_mut() {
                    last.push(' ');
                    last.push_str(text);
                }
            }
        }
    }
    if !(3..=5).contains(&bullets.len()) {
        return Err(format!(
            "its finding box has {} bullets; three to five findings, the tables carry the rest",
            bullets.len()
        ));
    }
    if let Some(bullet) = bullets.iter().find(|b| b.matches("{{#fig ").count() != 1) {
        return Err(format!(
            "a finding states one measured number ({{{{#fig ...}}}}), no more, no fewer: \"{bullet}\""
        ));
    }
    Ok(())
}

/// Resolves the workspace root from this crate's location.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_experiment_chapter_opens_with_three_to_five_measured_findings() {
        let good = "\n> **What the run showed**\n>\n> - one {{#fig ch99.a}}\n> - two,\n>   on two lines {{#fig ch99.b}}\n> - three {{#fig ch99.c}}\n\nThen prose.\n";
        assert_eq!(finding_box(good), Ok(()));
        let none = "Prose first.\n";
        assert!(
            finding_box(none)
                .unwrap_err()
                .contains("open with the finding box")
        );
        let two =
            "> **What the run showed**\n>\n> - one {{#fig ch99.a}}\n> - two {{#fig ch99.b}}\n";
        assert!(finding_box(two).unwrap_err().contains("has 2 bullets"));
        let bare = good.replace("three {{#fig ch99.c}}", "three, no number");
        assert!(finding_box(&bare).unwrap_err().contains("three, no number"));
        let two = good.replace(
            "three {{#fig ch99.c}}",
            "three {{#fig ch99.c}} {{#fig ch99.d}}",
        );
        assert!(finding_box(&two).unwrap_err().contains("no more, no fewer"));
    }

    #[test]
    fn figures_are_counted_in_prose_only() {
        let page = Page {
            path: "ch99.md".into(),
            text: "One {{#fig ch99.a}} ms and {{#param 100 ms}} here.\n\
                   | {{#fig ch99.b}} | table |\n\
                   ```text\n{{#fig ch99.c}} in code\n```\n"
                .into(),
        };
        // `One N ms and N here.`: six words, one figure.
        assert_eq!(figure_density(&page), (1, 6));
    }

    struct Scratch(PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("xtask-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn page_in(dir: &Path, name: &str, text: &str) -> Page {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        Page::read(&path).unwrap()
    }

    #[test]
    fn a_broken_anchor_or_include_is_reported() {
        let s = scratch("anchors");
        std::fs::write(
            s.0.join("code.rs"),
            "// ANCHOR: here\nfn f() {}\n// ANCHOR_END: here\n",
        )
        .unwrap();
        let page = page_in(
            &s.0,
            "p.md",
            "{{#include code.rs:here}}\n{{#include code.rs:gone}}\n{{#include nope.rs}}\n",
        );
        let mut problems = Vec::new();
        check_includes(&page, &mut problems);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("no anchor `gone`"));
        assert!(problems[1].contains("nope.rs"));
    }

    #[test]
    fn a_heading_in_an_included_report_is_reported() {
        let s = scratch("included-headings");
        for dir in ["results/ch99", "observed", "parts"] {
            std::fs::create_dir_all(s.0.join(dir)).unwrap();
        }
        std::fs::write(
            s.0.join("results/ch99/summary.md"),
            "**A caption**\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n## Hedging a tail\n\nText\n",
        )
        .unwrap();
        std::fs::write(
            s.0.join("results/ch99/results.md"),
            "### left out\n<!-- ANCHOR: shown -->\n**Caption**\n\n```text\n# a comment\n```\n<!-- ANCHOR_END: shown -->\n<!-- ANCHOR: titled -->\nTitled\n======\n<!-- ANCHOR_END: titled -->\n",
        )
        .unwrap();
        std::fs::write(s.0.join("observed/run.txt"), "# starting\nok\n").unwrap();
        std::fs::write(s.0.join("parts/notes.md"), "## A part's own heading\n").unwrap();
        let page = page_in(
            &s.0,
            "ch99-x.md",
            "# Chapter 99\n\n\
             {{#include results/ch99/summary.md}}\n\n\
             {{#include results/ch99/results.md:shown}}\n\
             {{#include results/ch99/results.md:titled}}\n\
             {{#include results/ch99/results.md:2:3}}\n\n\
             ```text\n{{#include observed/run.txt}}\n```\n\n\
             {{#include observed/run.txt:2}}\n\
             {{#include parts/notes.md}}\n",
        );
        let mut problems = Vec::new();
        check_included_headings(&page, &mut problems);
        assert_eq!(problems.len(), 2, "{problems:?}");
        // The page and line of the include, the include, the heading.
        assert!(
            problems[0].contains("ch99-x.md:3: includes results/ch99/summary.md, whose line 7")
                && problems[0].contains("`## Hedging a tail`"),
            "{problems:?}"
        );
        assert!(
            problems[1].contains("ch99-x.md:6: includes results/ch99/results.md:titled")
                && problems[1].contains("`Titled / ======`"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_broken_link_or_heading_is_reported() {
        let s = scratch("links");
        page_in(&s.0, "other.md", "# Other\n\n## Real heading\n");
        let page = page_in(
            &s.0,
            "p.md",
            "# P\n[ok](other.md#real-heading) [bad](missing.md) [bad heading](other.md#nope) [web](https://x.y/z)\n",
        );
        let mut problems = Vec::new();
        check_links(&page, &s.0, &mut problems);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("missing.md"));
        assert!(problems[1].contains("#nope"));
    }

    #[test]
    fn a_malformed_svg_is_reported_and_a_part_links_from_its_page() {
        let s = scratch("images");
        std::fs::create_dir_all(s.0.join("diagrams")).unwrap();
        std::fs::create_dir_all(s.0.join("parts")).unwrap();
        std::fs::write(
            s.0.join("diagrams/good.svg"),
            "<svg><title>ok</title></svg>",
        )
        .unwrap();
        std::fs::write(s.0.join("diagrams/bad.svg"), "<svg><g></svg>").unwrap();
        let chapter = page_in(&s.0, "p.md", "# P\n{{#include parts/part.md}}\n");
        let part = page_in(
            &s.0.join("parts"),
            "part.md",
            "![good](diagrams/good.svg)\n![bad](diagrams/bad.svg)\n",
        );
        let bases = link_bases(&[chapter]);
        let base = bases.get(&part.path).expect("the part is included");
        let mut problems = Vec::new();
        check_links(&part, base, &mut problems);
        check_images(&part, base, &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("diagrams/bad.svg, which is not well-formed XML"));
    }

    #[test]
    fn a_placeholder_chapter_is_reported() {
        let s = scratch("shape");
        let page = page_in(
            &s.0,
            "ch99-x.md",
            "# Chapter 99: X\n\n## Learning objectives\n\nTODO\n",
        );
        let mut problems = Vec::new();
        check_shape(&page, &mut problems);
        assert!(
            problems.iter().any(|p| p.contains("missing")),
            "{problems:?}"
        );
        assert!(problems.iter().any(|p| p.contains("words")), "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("quiz")), "{problems:?}");
    }

    /// The real book passes every check. (`cargo xtask check-book` says the
    /// same with the full list of problems.)
    #[test]
    fn the_book_passes_its_checks() {
        let problems = check(&Book {
            root: workspace_root(),
        })
        .unwrap();
        assert!(
            problems.is_empty(),
            "the book has problems:\n{}",
            problems.join("\n")
        );
    }
}
