//! Durations as every command line of the workshop writes them: `36s`, `1.5s`,
//! `500ms`. A unit is required, so `10` cannot mean ten of the wrong thing.

use std::{fmt, time::Duration};

/// The longest duration any flag takes: a day. Longer is a typo.
pub const LONGEST: Duration = Duration::from_secs(24 * 3600);

/// Parses `36s`, `1.5s` or `500ms`.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let bad = || format!("`{text}` is not a duration; write e.g. 36s, 1.5s or 500ms");
    let (number, unit) = match text.strip_suffix("ms") {
        Some(n) => (n, 1e-3),
        None => (text.strip_suffix('s').ok_or_else(bad)?, 1.0),
    };
    let value: f64 = number.trim().parse().map_err(|_| bad())?;
    let secs = value * unit;
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(bad());
    }
    if secs > LONGEST.as_secs_f64() {
        return Err(format!("`{text}` is longer than a day"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Prints a duration the way [`parse`] reads it: `500ms` below a second,
/// `1.5s` from there on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Show(pub Duration);

impl fmt::Display for Show {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_secs_f64() * 1e3;
        if ms > 0.0 && ms < 1000.0 {
            write!(f, "{}ms", (ms * 1000.0).round() / 1000.0)
        } else {
            write!(f, "{}s", self.0.as_secs_f64())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit_and_a_sane_size() {
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse(" 3s "), Ok(Duration::from_secs(3)));
        for bad in ["10", "-1s", "ten", "10m", "NaNs", "1e9s", ""] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_print_as_they_parse() {
        for text in ["36s", "500ms", "1.5s", "12.5ms", "0s"] {
            assert_eq!(Show(parse(text).unwrap()).to_string(), text);
        }
    }
}
