//! Sizes and durations as people write them: [`parse_size`] reads the
//! command line's `64KiB`, [`size`] and [`kib`] print bytes, and the report's
//! durations are printed in µs or ms, whichever reads better.

use std::time::Duration;

/// `1234.5 KiB`.
pub fn kib(bytes: u64) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

/// `512 B`, `64.0 KiB` or `5.28 MiB`.
pub fn size(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => kib(bytes),
        _ => format!("{:.2} MiB", bytes as f64 / 1_048_576.0),
    }
}

/// `-12.5 KiB`: a difference, which may be either way.
pub(super) fn signed_kib(bytes: i64) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

/// `150 µs` below a millisecond, `12.5 ms` from there on.
pub(super) fn ms(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{} µs", d.as_micros())
    } else {
        format!("{:.1} ms", d.as_secs_f64() * 1000.0)
    }
}

/// Parses `65536`, `64KiB`, `64k`, `1MiB` or `1m` (binary units).
pub fn parse_size(text: &str) -> Result<u32, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, unit) = match lower.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => lower.split_at(i),
        None => (lower.as_str(), ""),
    };
    if digits.is_empty() {
        return Err(format!(
            "{text:?} is not a size such as 65536, 64KiB or 1MiB"
        ));
    }
    let factor: u64 = match unit.trim() {
        "" | "b" => 1,
        "k" | "kib" => 1024,
        "m" | "mib" => 1024 * 1024,
        other => return Err(format!("unknown unit {other:?} (use KiB or MiB)")),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size such as 65536, 64KiB or 1MiB"))?;
    u32::try_from(n * factor).map_err(|_| format!("{text} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("64k"), Ok(65536));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert!(parse_size("1GiB").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("8192MiB").is_err());
    }
}
