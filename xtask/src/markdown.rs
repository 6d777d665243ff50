//! Just enough Markdown reading for the book's checks: fenced blocks, headings,
//! `{{#include}}`/`{{#quiz}}` directives and links. mdBook's own parser would
//! be the heavier, exact choice; these pages keep to simple, regular Markdown.

use std::path::{Path, PathBuf};

/// One page of the book.
pub struct Page {
    pub path: PathBuf,
    pub text: String,
}

impl Page {
    pub fn read(path: &Path) -> anyhow::Result<Page> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        Ok(Page {
            path: path.to_path_buf(),
            text,
        })
    }

    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// Lines outside fenced code blocks, with their 1-based numbers.
    pub fn prose_lines(&self) -> Vec<(usize, &str)> {
        let mut in_fence = false;
        let mut lines = Vec::new();
        for (i, line) in self.text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
                continue;
            }
            if !in_fence {
                lines.push((i + 1, line));
            }
        }
        lines
    }

    /// The commands of every ```console block, one per line (a trailing `\`
    /// joins lines), with the line number where each starts.
    pub fn console_commands(&self) -> Vec<(usize, String)> {
        let mut commands = Vec::new();
        let mut in_console = false;
        let mut pending: Option<(usize, String)> = None;
        for (i, line) in self.text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.starts_with("```") {
                in_console = !in_console && trimmed == "```console";
                continue;
            }
            if !in_console || trimmed.is_empty() {
                continue;
            }
            let (start, mut command) = pending.take().unwrap_or((i + 1, String::new()));
            if let Some(continued) = trimmed.strip_suffix('\\') {
                command.push_str(continued.trim_end());
                command.push(' ');
                pending = Some((start, command));
            } else {
                command.push_str(trimmed);
                commands.push((start, command));
            }
        }
        commands
    }

    /// Every `{{#name argument}}` directive, anywhere on the page (includes
    /// inside code fences are the common case).
    pub fn directives(&self, name: &str) -> Vec<(usize, String)> {
        let open = format!("{{{{#{name} ");
        let mut found = Vec::new();
        for (i, line) in self.text.lines().enumerate() {
            let mut rest = line;
            while let Some(start) = rest.find(&open) {
                let after = &rest[start + open.len()..];
                let Some(end) = after.find("}}") else { break };
                found.push((i + 1, after[..end].trim().to_string()));
                rest = &after[end..];
            }
        }
        found
    }

    /// The targets of inline links `[text](target)` outside code.
    pub fn links(&self) -> Vec<(usize, String)> {
        let mut links = Vec::new();
        for (number, line) in self.prose_lines() {
            let line = strip_inline_code(line);
            let mut rest = line.as_str();
            while let Some(start) = rest.find("](") {
                let after = &rest[start + 2..];
                let Some(end) = after.find(')') else { break };
                links.push((number, after[..end].trim().to_string()));
                rest = &after[end..];
            }
        }
        links
    }

    /// The ids mdBook gives this page's headings.
    pub fn heading_ids(&self) -> Vec<String> {
        self.prose_lines()
            .into_iter()
            .filter_map(|(_, line)| {
                let hashes = line.chars().take_while(|&c| c == '#').count();
                (1..=6)
                    .contains(&hashes)
                    .then(|| line[hashes..].trim())
                    .filter(|t| !t.is_empty())
            })
            .map(
                |text| match text.strip_suffix('}').and_then(|t| t.rsplit_once("{#")) {
                    // `## Title {#id}`: mdBook's heading attribute sets the id.
                    Some((_, id)) => id.to_string(),
                    None => heading_id(text),
                },
            )
            .collect()
    }

    /// `## Heading` texts, in order.
    pub fn level2_headings(&self) -> Vec<String> {
        self.prose_lines()
            .into_iter()
            .filter_map(|(_, line)| line.strip_prefix("## ").map(|h| h.trim().to_string()))
            .collect()
    }

    /// The text under a `## Heading`, up to the next one.
    pub fn section(&self, heading: &str) -> Option<String> {
        let marker = format!("## {heading}");
        let start = self.text.lines().position(|l| l.trim() == marker)?;
        let body: Vec<&str> = self
            .text
            .lines()
            .skip(start + 1)
            .take_while(|l| !l.starts_with("## "))
            .collect();
        Some(body.join("\n"))
    }
}

/// The Markdown headings among numbered lines (a page, or the part of a file
/// a page includes), outside code fences: `# Title` to `###### Title`, and a
/// paragraph line underlined with `===` or `---`. Each with its number.
pub fn headings(lines: &[(usize, String)]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut fence: Option<&str> = None;
    let mut previous: Option<&str> = None; // the line before, if prose
    for (number, line) in lines {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let trimmed = line.trim();
        if indent <= 3 {
            if let Some(open) = fence {
                if trimmed.starts_with(open)
                    && trimmed
                        .trim_start_matches(open.chars().next().unwrap_or('`'))
                        .is_empty()
                {
                    fence = None;
                }
                continue;
            }
            if let Some(open) = ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f)) {
                fence = Some(open);
                previous = None;
                continue;
            }
        } else if fence.is_some() {
            continue;
        }
        let hashes = trimmed.chars().take_while(|&c| c == '#').count();
        let atx = indent <= 3
            && (1..=6).contains(&hashes)
            && trimmed[hashes..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace);
        let underline = indent <= 3
            && !trimmed.is_empty()
            && (trimmed.chars().all(|c| c == '=') || trimmed.chars().all(|c| c == '-'));
        if atx {
            found.push((*number, trimmed.to_string()));
        } else if underline && let Some(text) = previous {
            found.push((*number - 1, format!("{text} / {trimmed}")));
        }
        // A paragraph line that an underline would make a heading: not a
        // table row, quote, list item, HTML or a heading of its own.
        let paragraph = indent <= 3
            && !trimmed.is_empty()
            && !atx
            && !underline
            && !trimmed.starts_with(['|', '>', '<', '-', '*', '+'])
            && !trimmed
                .split_once(['.', ')'])
                .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        previous = paragraph.then_some(trimmed);
    }
    found
}

/// mdBook's heading ids: lower case, spaces to dashes, other punctuation dropped.
pub fn heading_id(heading: &str) -> String {
    let text = strip_inline_code(heading).replace('`', "");
    text.trim()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() => Some(c.to_lowercase().next().unwrap_or(c)),
            '-' | '_' => Some(c),
            ' ' => Some('-'),
            _ => None,
        })
        .collect()
}

/// Removes the backticks of inline code but keeps its text, except that text
/// inside backticks never counts as a link.
fn strip_inline_code(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            continue;
        }
        // Brackets inside inline code never form a link.
        if !in_code || !matches!(c, '(' | ')' | '[' | ']') {
            out.push(c);
        }
    }
    out
}

/// Splits a shell command line into pipeline segments of words, honouring
/// single and double quotes and backslashes. `|`, `||`, `&&` and `;` separate
/// segments. This is the subset of shell the book's commands use.
pub fn shell_segments(command: &str) -> anyhow::Result<Vec<Vec<String>>> {
    // `word` is None between words; `Some("")` is a word begun by empty quotes.
    let mut segments = vec![Vec::new()];
    let mut word: Option<String> = None;
    let mut chars = command.chars().peekable();
    let mut quote: Option<char> = None;
    let end_word = |segments: &mut Vec<Vec<String>>, word: &mut Option<String>| {
        if let Some(w) = word.take() {
            segments.last_mut().expect("never empty").push(w);
        }
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => {
                if let Some(next) = chars.next() {
                    word.get_or_insert_default().push(next);
                }
            }
            (Some(_), c) => word.get_or_insert_default().push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_default();
            }
            (None, '\\') => {
                if let Some(next) = chars.next() {
                    word.get_or_insert_default().push(next);
                }
            }
            (None, '#') if word.is_none() => break, // a comment
            (None, c) if c.is_whitespace() => end_word(&mut segments, &mut word),
            (None, '|' | ';' | '&') => {
                end_word(&mut segments, &mut word);
                if matches!(chars.peek(), Some('|' | '&')) {
                    chars.next();
                }
                segments.push(Vec::new());
            }
            (None, c) => word.get_or_insert_default().push(c),
        }
    }
    anyhow::ensure!(quote.is_none(), "unterminated quote in `{command}`");
    end_word(&mut segments, &mut word);
    segments.retain(|s| !s.is_empty());
    Ok(segments)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(text: &str) -> Page {
        Page {
            path: PathBuf::from("book/src/x.md"),
            text: text.into(),
        }
    }

    #[test]
    fn reads_console_commands_and_joins_continued_lines() {
        let p =
            page("```console\ncargo run\ncurl a \\\n  -d x\n```\n```text\nnot a command\n```\n");
        assert_eq!(
            p.console_commands(),
            vec![(2, "cargo run".into()), (3, "curl a -d x".into())]
        );
    }

    #[test]
    fn finds_directives_and_links_but_not_links_in_code() {
        let p = page(
            "{{#include ../a.rs:x}} and {{#include b.txt}}\nsee [here](ch01.md#top), `[no](no.md)`\n```\n[no](fenced.md)\n```\n",
        );
        assert_eq!(
            p.directives("include"),
            vec![(1, "../a.rs:x".into()), (1, "b.txt".into())]
        );
        assert_eq!(p.links(), vec![(2, "ch01.md#top".into())]);
    }

    #[test]
    fn heading_ids_follow_mdbook() {
        assert_eq!(
            heading_id("Chapter 2: Protocol Buffers"),
            "chapter-2-protocol-buffers"
        );
        assert_eq!(heading_id("Why `delay_ms`?"), "why-delay_ms");
        assert_eq!(
            page("# Solutions\n\n## Chapter 11: reserve {#ch11}\n").heading_ids(),
            ["solutions", "ch11"]
        );
    }

    #[test]
    fn splits_pipelines_and_respects_quotes() {
        let segments = shell_segments(
            r#"printf '\0\0' | curl -d '{"name":"Ada"}' -H "a b" x || echo "no | pipe" # note"#,
        )
        .unwrap();
        assert_eq!(segments.len(), 3);
        assert_eq!(segments[0], ["printf", r"\0\0"]);
        assert_eq!(
            segments[1],
            ["curl", "-d", r#"{"name":"Ada"}"#, "-H", "a b", "x"]
        );
        assert_eq!(segments[2], ["echo", "no | pipe"]);
        assert!(shell_segments("echo 'open").is_err());
    }
}
