//! Chapter 4: reading a caller's deadline from `grpc-timeout` (the solution).
//!
//! Every unit has its conversion, and the value is checked against the
//! protocol's own rule, 1 to 8 ASCII digits, before any number is made of it.
//! Eight digits also keep the arithmetic safe: `99999999H` is about 3.6e11
//! seconds, far inside a `u64`, so the multiplication for hours and minutes
//! cannot overflow.

use std::time::Duration;

pub use crate::given::ch04::TimeoutError;

// ANCHOR: parse
/// The time a caller allows, from its `grpc-timeout` value. The unit is
/// checked first, then the value, so `5x` is an unknown unit and `+5m` a
/// value that is not all digits.
pub fn parse(value: &str) -> Result<Duration, TimeoutError> {
    let unit = value.chars().next_back().ok_or(TimeoutError::Empty)?;
    let digits = &value[..value.len() - unit.len_utf8()];
    let per_unit: fn(u64) -> Duration = match unit {
        'H' => |n| Duration::from_secs(n * 3600),
        'M' => |n| Duration::from_secs(n * 60),
        'S' => Duration::from_secs,
        'm' => Duration::from_millis,
        'u' => Duration::from_micros,
        'n' => Duration::from_nanos,
        other => return Err(TimeoutError::UnknownUnit(other)),
    };
    // The protocol's rule, not u64's: u64 would also take a `+`, and 20 digits.
    if let Some(c) = digits.chars().find(|c| !c.is_ascii_digit()) {
        return Err(TimeoutError::NotADigit(c));
    }
    match digits.len() {
        0 => Err(TimeoutError::NoDigits),
        1..=8 => Ok(per_unit(digits.parse().expect("1 to 8 digits fit a u64"))),
        n => Err(TimeoutError::TooManyDigits(n)),
    }
}
// ANCHOR_END: parse
