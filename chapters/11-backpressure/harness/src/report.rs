//! What every experiment's report is written with.

use std::fmt::Write;

/// A Markdown table: a header row, then one row per entry; every column but
/// the first (the row's name) is right-aligned, as numbers read best.
pub fn table(out: &mut String, header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) {
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let align: Vec<&str> = (0..header.len())
        .map(|i| if i == 0 { "---" } else { "---:" })
        .collect();
    let _ = writeln!(out, "|{}|", align.join("|"));
    for row in rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_table_has_its_header_its_alignment_and_its_rows() {
        let mut out = String::new();
        super::table(
            &mut out,
            &["arm", "p99 ms"],
            [
                vec!["ct".into(), "1.5".into()],
                vec!["mt2".into(), "40".into()],
            ],
        );
        assert_eq!(
            out,
            "| arm | p99 ms |\n|---|---:|\n| ct | 1.5 |\n| mt2 | 40 |\n\n"
        );
    }
}
