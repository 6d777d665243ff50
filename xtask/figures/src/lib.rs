//! The book's measured figures come from the files its runs wrote.
//!
//! A sentence that states a measured number writes `{{#fig ch08.stall-ms}} ms`
//! instead of the number. `book/figures/ch08.toml` says where that figure is:
//! a file under `book/src/` (an observed output or a results file) and either a
//! regular expression whose first group is the number, or a JSON pointer. The
//! preprocessor (`src/main.rs`) puts the number in when mdBook builds the book,
//! so re-observing a chapter updates its prose and its outputs together.
//!
//! Numbers that are not measured here are marked for what they are, and render
//! as their text: `{{#quote 5.72 ms}}` (from a source: a seed, a specification,
//! a library's code), `{{#param 10 ms}}` (a value the workshop chose: a flag, a
//! limit, a configured delay) and `{{#calc 4×}}` (arithmetic on figures the page
//! shows). [`unmarked`] finds a number that is none of these and reads as a
//! measurement (it has a unit, a decimal point or a thousands separator), which
//! is how `cargo xtask check-book` catches a figure typed by hand.

use std::{
    collections::{BTreeMap, HashMap},
    path::{Path, PathBuf},
    sync::LazyLock,
};

use anyhow::{Context, bail};

pub mod times;
use regex::Regex;
use serde::Deserialize;

/// Where one figure is found, as `book/figures/chNN.toml` writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// A file under `book/src/`.
    pub file: String,
    /// A regular expression; its first group is the figure (first match).
    pub find: Option<String>,
    /// A JSON pointer into the file (`/arms/0/p99_ms`).
    pub json: Option<String>,
    /// Multiply by this before printing (seconds to milliseconds: 1000).
    pub scale: Option<f64>,
    /// Print with this many decimals.
    pub digits: Option<usize>,
    /// Group thousands with commas (1,056.7).
    #[serde(default)]
    pub thousands: bool,
}

/// Every figure the book defines, by `chapter.name`.
pub struct Figures {
    /// `book/src/`, where the files the figures come from live.
    src: PathBuf,
    pub sources: BTreeMap<String, Source>,
}

impl Figures {
    /// Reads every `book/figures/*.toml` of the book in `book_dir`.
    pub fn load(book_dir: &Path) -> anyhow::Result<Figures> {
        let mut sources = BTreeMap::new();
        let dir = book_dir.join("figures");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        files.retain(|p| p.extension().is_some_and(|e| e == "toml"));
        files.sort();
        for path in files {
            let chapter = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            let text = std::fs::read_to_string(&path)?;
            let table: BTreeMap<String, Source> =
                toml::from_str(&text).with_context(|| format!("in {}", path.display()))?;
            for (name, source) in table {
                if source.find.is_some() == source.json.is_some() {
                    bail!(
                        "{}: figure {name} needs exactly one of `find` and `json`",
                        path.display()
                    );
                }
                sources.insert(format!("{chapter}.{name}"), source);
            }
        }
        Ok(Figures {
            src: book_dir.join("src"),
            sources,
        })
    }

    /// Every figure's value, or the first one that cannot be found.
    pub fn resolve(&self) -> anyhow::Result<HashMap<String, String>> {
        let mut files: HashMap<&str, String> = HashMap::new();
        let mut values = HashMap::new();
        for (key, source) in &self.sources {
            if !files.contains_key(source.file.as_str()) {
                let path = self.src.join(&source.file);
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("figure {key}: cannot read {}", path.display()))?;
                files.insert(&source.file, text);
            }
            let value = source
                .value(&files[source.file.as_str()])
                .with_context(|| format!("figure {key} (in {})", source.file))?;
            values.insert(key.clone(), value);
        }
        Ok(values)
    }
}

impl Source {
    fn value(&self, text: &str) -> anyhow::Result<String> {
        let raw = if let Some(find) = &self.find {
            let re = Regex::new(find).with_context(|| format!("bad pattern {find:?}"))?;
            let captures = re
                .captures(text)
                .with_context(|| format!("{find:?} matches nothing"))?;
            captures
                .get(1)
                .with_context(|| format!("{find:?} has no group"))?
                .as_str()
                .to_string()
        } else {
            let pointer = self.json.as_deref().unwrap_or_default();
            let json: serde_json::Value = serde_json::from_str(text)?;
            match json.pointer(pointer) {
                Some(serde_json::Value::Number(n)) => n.to_string(),
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(other) => bail!("{pointer} is {other}, not a number"),
                None => bail!("no {pointer} in the file"),
            }
        };
        if self.scale.is_none() && self.digits.is_none() && !self.thousands {
            return Ok(raw);
        }
        let number: f64 = raw
            .replace(',', "")
            .parse()
            .with_context(|| format!("{raw:?} is not a number"))?;
        let number = number * self.scale.unwrap_or(1.0);
        let digits = match self.digits {
            Some(d) => d,
            None if self.scale.is_some() => bail!("a scaled figure needs `digits`"),
            None => raw.split_once('.').map_or(0, |(_, frac)| frac.len()),
        };
        let printed = format!("{number:.digits$}");
        Ok(if self.thousands {
            group_thousands(&printed)
        } else {
            printed
        })
    }
}

fn group_thousands(number: &str) -> String {
    let (sign, rest) = number.strip_prefix('-').map_or(("", number), |r| ("-", r));
    let (int, frac) = rest
        .split_once('.')
        .map_or((rest, None), |(i, f)| (i, Some(f)));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// `{{#fig key}}`, `{{#quote text}}`, `{{#param text}}` and `{{#calc text}}`.
static MARKER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\{\{#(fig|quote|param|calc) ([^}]*)\}\}").unwrap());

/// The text with every marker replaced: a figure by its value, the others by
/// their own text. An unknown figure is an error, never left in the page.
pub fn expand(text: &str, values: &HashMap<String, String>) -> anyhow::Result<String> {
    let mut missing = Vec::new();
    let out = MARKER.replace_all(text, |c: &regex::Captures| {
        let arg = c[2].trim();
        if &c[1] == "fig" {
            values.get(arg).cloned().unwrap_or_else(|| {
                missing.push(arg.to_string());
                String::new()
            })
        } else {
            arg.to_string()
        }
    });
    if !missing.is_empty() {
        bail!("no such figure: {}", missing.join(", "));
    }
    Ok(out.into_owned())
}

/// The figure keys a text uses, with their line numbers.
pub fn used(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .flat_map(|(i, line)| {
            MARKER
                .captures_iter(line)
                .filter(|c| &c[1] == "fig")
                .map(move |c| (i + 1, c[2].trim().to_string()))
        })
        .collect()
}

/// What is not prose: inline code, other directives, link targets, HTML tags
/// and comments.
static NOT_PROSE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"`[^`]*`|\{\{#[^}]*\}\}|\]\([^)]*\)|<!--.*?-->|<[^>]*>").unwrap());

/// A number with a unit of time, size, rate or ratio. The character before it
/// may not be part of a word or a number, so `p99`, `HTTP/2` and `0.14.6` are
/// not figures; `x` counts as a unit only when it touches the number (`4x`).
static MEASURE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:^|[^\w.,/#-])((?:\d[\d,]*(?:\.\d+)?)(?:[ \u{a0}]?(?:ms|µs|us|ns|s|min|KiB|MiB|GiB|kB|KB|MB|GB|B|bytes|%|×|/s|rps)|x))(?:$|[^\w])",
    )
    .unwrap()
});

/// A number with no unit that still reads as a measurement: it has a decimal
/// point or a thousands separator (`0.94 of its core`, `1,347 messages`).
/// Small whole numbers ("two streams", "step 3") are left alone.
static BARE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^\w.,/#:-])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+)(?:$|[^\w.,])").unwrap()
});

/// What makes the number after it a version or a section, not a result:
/// `TLS 1.3`, `tonic 0.14`, `curl 7.88`, `section 8.1`.
static VERSIONED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:tls|curl|tonic|hyper|h2|rustc|toolchain|section|rfc|mdbook|rust)\W{0,3}$")
        .unwrap()
});

/// Every figure in the prose of a Markdown text (fenced blocks left out)
/// that is not drawn from a run or marked: a number with a unit, or one
/// without a unit that has a decimal point or a thousands separator and is
/// not a version. `(line, the figure)`. Headings are left out too: they name
/// a step ("a 1 MiB window") rather than report a result, and a marker in one
/// would change its anchor.
pub fn unmarked(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut in_fence = false;
    let mut previous = String::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || line.starts_with('#') {
            continue;
        }
        let prose = NOT_PROSE.replace_all(line, " ");
        for c in MEASURE.captures_iter(&prose) {
            found.push((i + 1, c[1].to_string()));
        }
        // A comma or full stop that ends a clause is punctuation, not part of
        // the number before it ("1,324.535, 332.431.").
        let rest = MEASURE.replace_all(&prose, " ");
        let rest = format!("{} ", rest.trim_end())
            .replace(", ", "  ")
            .replace(". ", "  ");
        for c in BARE.captures_iter(&rest) {
            let number = c.get(1).expect("group 1");
            // A version's name may end the line before ("... in tonic\n0.14").
            let before = format!("{previous} {}", &rest[..number.start()]);
            if !VERSIONED.is_match(&before) {
                found.push((i + 1, number.as_str().to_string()));
            }
        }
        previous = prose
            .split_whitespace()
            .last()
            .unwrap_or_default()
            .to_string();
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(find: &str) -> Source {
        Source {
            file: String::new(),
            find: Some(find.into()),
            json: None,
            scale: None,
            digits: None,
            thousands: false,
        }
    }

    #[test]
    fn a_figure_typed_by_hand_is_found_and_a_drawn_or_marked_one_is_not() {
        let page = "The stream resumed 2.5 ms later.\n\
                    The stream resumed {{#fig ch08.resume-ms}} ms later.\n\
                    The Python run took {{#quote 5.72 ms}}; we waited {{#param 10 ms}}, {{#calc 4×}} more.\n\
                    ```text\nresumed after 2.3 ms\n```\n\
                    Run `--step 80/s:10s`, see [p99](ch10.md#p-99-9-ms), HTTP/2, p99, tonic 0.14.6.\n\
                    A 4x gap, 1,056.7 KiB, 12% and 30,000/s.\n\
                    ### 8. The same with a 64 KiB window\n\
                    Its core was at 0.94; 1,347 messages in two streams, over TLS 1.3 and tonic\n\
                    0.14, at 12:00:00.500 (RFC 9113, section 8.1); 1,324.535, 332.431.\n";
        let found: Vec<String> = unmarked(page).into_iter().map(|(_, f)| f).collect();
        assert_eq!(
            found,
            [
                "2.5 ms",
                "4x",
                "1,056.7 KiB",
                "12%",
                "30,000/s",
                "0.94",
                "1,347",
                "1,324.535",
                "332.431"
            ]
        );
        assert_eq!(unmarked(page)[0].0, 1);
    }

    #[test]
    fn markers_expand_to_values_and_text_and_an_unknown_figure_is_an_error() {
        let values = HashMap::from([("ch08.resume-ms".to_string(), "2.3".to_string())]);
        let page = "resumed {{#fig ch08.resume-ms}} ms later, not {{#quote 5.72 ms}}";
        assert_eq!(
            expand(page, &values).unwrap(),
            "resumed 2.3 ms later, not 5.72 ms"
        );
        let err = expand("{{#fig ch08.nope}}", &values).unwrap_err();
        assert!(err.to_string().contains("ch08.nope"), "{err}");
        assert_eq!(used(page), [(1, "ch08.resume-ms".to_string())]);
    }

    #[test]
    fn a_figure_is_read_by_pattern_or_pointer_and_printed_as_asked() {
        let out = "window 1056.73 KiB\nresumed after 2.31 ms\n";
        assert_eq!(source(r"after ([\d.]+) ms").value(out).unwrap(), "2.31");
        let mut s = source(r"window ([\d.]+) KiB");
        s.digits = Some(1);
        s.thousands = true;
        assert_eq!(s.value(out).unwrap(), "1,056.7");
        let mut s = source(r"after ([\d.]+) ms");
        s.scale = Some(1000.0);
        assert!(s.value(out).is_err(), "a scaled figure without digits");
        s.digits = Some(0);
        assert_eq!(s.value(out).unwrap(), "2310");
        assert!(source("absent (\\d)").value(out).is_err());

        let json = r#"{"arms": [{"p99_ms": 0.4123}], "name": "x", "list": []}"#;
        let mut s = source("");
        s.find = None;
        s.json = Some("/arms/0/p99_ms".into());
        assert_eq!(s.value(json).unwrap(), "0.4123");
        s.digits = Some(2);
        assert_eq!(s.value(json).unwrap(), "0.41");
        s.json = Some("/list".into());
        assert!(s.value(json).is_err(), "not a number");
        s.json = Some("/missing".into());
        assert!(s.value(json).is_err());
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group_thousands("1056.7"), "1,056.7");
        assert_eq!(group_thousands("999"), "999");
        assert_eq!(group_thousands("1234567"), "1,234,567");
        assert_eq!(group_thousands("-30000"), "-30,000");
    }
}
