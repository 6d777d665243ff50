//! Chapter 4's exercise, the part it gives: the errors `parse` answers with.

use std::fmt;

/// Why a `grpc-timeout` value was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutError {
    /// The header is there, but empty.
    Empty,
    /// The last character, which must be the unit, is not one of
    /// `H M S m u n` (a digit there means the unit is missing).
    UnknownUnit(char),
    /// The unit has no value before it.
    NoDigits,
    /// A character of the value is not an ASCII digit: a sign, a space, a
    /// decimal point, an underscore.
    NotADigit(char),
    /// The value has this many digits, more than the 8 allowed.
    TooManyDigits(usize),
}

impl fmt::Display for TimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeoutError::Empty => write!(f, "empty grpc-timeout"),
            TimeoutError::UnknownUnit(c) => write!(
                f,
                "grpc-timeout ends in {c:?}, which is not a unit (H, M, S, m, u or n)"
            ),
            TimeoutError::NoDigits => write!(f, "grpc-timeout has a unit but no value"),
            TimeoutError::NotADigit(c) => {
                write!(
                    f,
                    "grpc-timeout value contains {c:?}; only digits 0-9 are allowed"
                )
            }
            TimeoutError::TooManyDigits(n) => {
                write!(
                    f,
                    "grpc-timeout value has {n} digits; at most 8 are allowed"
                )
            }
        }
    }
}

impl std::error::Error for TimeoutError {}
