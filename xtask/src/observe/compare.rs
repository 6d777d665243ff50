//! `observe --check`: does a rerun behave as the book shows? What matters is
//! that the same commands ran and each one succeeded or failed as before;
//! timings, timestamps and ports are allowed to differ.

use std::path::Path;

/// curl's exit status for a refused TLS handshake depends on a race (whether
/// the alert or the closed socket reaches it first, chapter 3), so for curl a
/// failure is a failure; our own programs' statuses must match exactly.
fn same_curl_failure(old: &str, new: &str) -> bool {
    let failed = |text: &str| text.lines().any(|l| l.starts_with("(exit status"));
    old.lines().next().is_some_and(|l| l.contains("curl ")) && failed(old) && failed(new)
}

fn command(text: &str) -> Option<&str> {
    text.lines().next().filter(|l| l.starts_with("$ "))
}

fn status(text: &str) -> Option<&str> {
    text.lines().rev().find(|l| l.starts_with("(exit status"))
}

/// Compares the book's observed files with a rerun's. With `chapters`
/// (`["ch12"]`), only the files of those chapters (`ch12-*`) are compared.
pub fn compare(book: &Path, fresh: &Path, chapters: &[String]) -> anyhow::Result<Vec<String>> {
    let mut drift = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(book)?
        .map(|e| Ok(e?.file_name().to_string_lossy().to_string()))
        .collect::<std::io::Result<_>>()?;
    names.sort();
    for name in names {
        if !chapters.is_empty() && !chapters.iter().any(|c| name.starts_with(&format!("{c}-"))) {
            continue;
        }
        // SVGs and other files that are not text have no command to compare.
        let Ok(old) = std::fs::read_to_string(book.join(&name)) else {
            continue;
        };
        let Ok(new) = std::fs::read_to_string(fresh.join(&name)) else {
            drift.push(format!(
                "{name}: the book has it, but the rerun did not write it"
            ));
            continue;
        };
        if command(&old) != command(&new) {
            drift.push(format!(
                "{name}: the command changed: {:?} -> {:?}",
                command(&old),
                command(&new)
            ));
        } else if command(&old).is_some()
            && status(&old) != status(&new)
            && !same_curl_failure(&old, &new)
        {
            let show = |s: Option<&str>| s.unwrap_or("success").to_string();
            drift.push(format!(
                "{name}: `{}` was {} and is now {}",
                command(&old).unwrap_or_default(),
                show(status(&old)),
                show(status(&new))
            ));
        }
    }
    Ok(drift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn timings_may_differ_but_commands_and_outcomes_may_not() {
        let book = folder(&[
            ("ch02-a.txt", "$ cargo run -p proto\n8 bytes in 3 ms\n"),
            ("ch02-b.txt", "$ cargo run -p certs\nok\n"),
            ("ch02-c.txt", "$ ls certs/\n"),
            ("ch02-d.txt", "$ cargo run -p x -- --bad\n(exit status 2)\n"),
            ("ch02-gone.txt", "$ true\n"),
            ("ch02-log.txt", "2026-11-30T03:54:20Z INFO listening\n"),
        ]);
        let fresh = folder(&[
            ("ch02-a.txt", "$ cargo run -p proto\n8 bytes in 5 ms\n"),
            (
                "ch02-b.txt",
                "$ cargo run -p certs\nerror\n(exit status 1)\n",
            ),
            ("ch02-c.txt", "$ ls -l certs/\n"),
            ("ch02-d.txt", "$ cargo run -p x -- --bad\n(exit status 1)\n"),
            ("ch02-log.txt", "2026-12-01T09:00:00Z INFO listening\n"),
        ]);
        let drift = compare(book.path(), fresh.path(), &[]).unwrap();
        assert_eq!(drift.len(), 4, "{drift:#?}");
        assert!(drift[0].contains("ch02-b.txt") && drift[0].contains("was success"));
        assert!(drift[1].contains("ch02-c.txt") && drift[1].contains("command changed"));
        assert!(drift[2].contains("(exit status 2) and is now (exit status 1)"));
        assert!(drift[3].contains("ch02-gone.txt") && drift[3].contains("did not write it"));
    }

    #[test]
    fn a_refused_curl_may_fail_with_either_code() {
        let book = folder(&[("ch03-x.txt", "$ curl -sS https://x\n(exit status 35)\n")]);
        let fresh = folder(&[("ch03-x.txt", "$ curl -sS https://x\n(exit status 56)\n")]);
        assert!(compare(book.path(), fresh.path(), &[]).unwrap().is_empty());
        let ok = folder(&[("ch03-x.txt", "$ curl -sS https://x\nok\n")]);
        assert_eq!(compare(book.path(), ok.path(), &[]).unwrap().len(), 1);
    }

    #[test]
    fn a_chapter_rerun_compares_only_that_chapter() {
        let book = folder(&[
            ("ch12-quick.txt", "$ cargo run -p admission\n"),
            ("ch13-quick.txt", "$ cargo run -p overload\n"),
            ("ch13-machine.txt", "Debian\n"),
        ]);
        let fresh = folder(&[("ch12-quick.txt", "$ cargo run -p admission\n")]);
        assert!(
            compare(book.path(), fresh.path(), &["ch12".into()])
                .unwrap()
                .is_empty()
        );
        let all = compare(book.path(), fresh.path(), &[]).unwrap();
        assert_eq!(all.len(), 2, "{all:#?}");
    }
}
