//! Chapter 4: reading a caller's deadline from `grpc-timeout`.
//!
//! A gRPC client sends the time it will wait as `grpc-timeout: <value><unit>`,
//! where the value is 1 to 8 ASCII digits and the unit one letter: `H` hours,
//! `M` minutes, `S` seconds, `m` milliseconds, `u` microseconds, `n`
//! nanoseconds. `parse` turns such a header value into a `Duration`, or into a
//! [`TimeoutError`] that says what is wrong with it. This version knows only
//! milliseconds, and lets `u64`'s own parser decide what a number is: that
//! parser takes a leading `+` and any digits whose value fits in a `u64`,
//! where the protocol allows digits only, and at most 8 of them. Make it read every unit and keep to the
//! protocol's rule for the value.
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch04`.

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
        'm' => Duration::from_millis,
        other => return Err(TimeoutError::UnknownUnit(other)),
    };
    if digits.is_empty() {
        return Err(TimeoutError::NoDigits);
    }
    // u64's parser refuses what is not a number, and says when a number is
    // too long by overflowing.
    match digits.parse::<u64>() {
        Ok(n) => Ok(per_unit(n)),
        Err(_) => match digits.chars().find(|c| !c.is_ascii_digit()) {
            Some(c) => Err(TimeoutError::NotADigit(c)),
            None => Err(TimeoutError::TooManyDigits(digits.len())),
        },
    }
}
// ANCHOR_END: parse
