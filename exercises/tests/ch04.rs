//! Chapter 4's exercise, `exercises::ch04::parse`: header values as a client
//! writes them (tonic's own `Request::set_timeout` among them), the 8-digit
//! limit from both sides, and values no client should send.

use std::{panic, time::Duration};

use exercises::ch04::{TimeoutError, parse};

/// `parse(value)`, with a panic turned into a failed assertion: a header
/// value is chosen by the client, and must never crash the server.
fn parsed(value: &str) -> Result<Duration, TimeoutError> {
    match panic::catch_unwind(|| parse(value)) {
        Ok(result) => result,
        Err(_) => panic!(
            "still to do (ch04): parse({value:?}) panicked; a value the client \
             chose must give an error, never a crash (keep to 8 digits, and the \
             arithmetic cannot overflow)"
        ),
    }
}

const HOUR: u64 = 3600;

#[test]
fn every_unit_is_understood() {
    let cases = [
        ("2H", Duration::from_secs(2 * HOUR)),
        ("3M", Duration::from_secs(180)),
        ("10S", Duration::from_secs(10)),
        ("300m", Duration::from_millis(300)),
        ("250u", Duration::from_micros(250)),
        ("7n", Duration::from_nanos(7)),
    ];
    for (value, expected) in cases {
        assert_eq!(
            parsed(value),
            Ok(expected),
            "still to do (ch04): {value:?} is {expected:?}; the unit is the last \
             letter, one of H M S m u n (hours, minutes, seconds, milli-, micro-, \
             nanoseconds), and case matters (M is minutes, m milliseconds)"
        );
    }
}

#[test]
fn every_value_a_tonic_client_sends_is_understood() {
    // tonic writes a deadline in the finest unit whose value fits 8 digits.
    let cases = [
        (Duration::from_nanos(50), "50n"),
        (Duration::from_millis(500), "500000u"),
        (Duration::from_secs(HOUR), "3600000m"),
        (Duration::from_secs(48 * HOUR), "172800S"),
        (Duration::from_secs(10 * 365 * 24 * HOUR), "5256000M"),
        (Duration::from_secs(1000 * 365 * 24 * HOUR), "8760000H"),
    ];
    for (deadline, header) in cases {
        let mut request = tonic::Request::new(());
        request.set_timeout(deadline);
        let value = request.metadata().get("grpc-timeout").unwrap();
        let value = value.to_str().unwrap();
        assert_eq!(value, header, "what tonic sends for {deadline:?}");
        assert_eq!(
            parsed(value),
            Ok(deadline),
            "still to do (ch04): a tonic client with a deadline of {deadline:?} \
             sends `grpc-timeout: {value}`, which parse should read back as that \
             deadline"
        );
    }
}

#[test]
fn eight_digits_is_the_longest_value() {
    assert_eq!(
        parsed("99999999H"),
        Ok(Duration::from_secs(99_999_999 * HOUR)),
        "still to do (ch04): 8 digits of hours is the longest deadline a client \
         can send, and it is valid"
    );
    assert_eq!(
        parsed("00000001m"),
        Ok(Duration::from_millis(1)),
        "leading zeros count as digits, and 8 are allowed"
    );
    for (value, digits) in [
        ("123456789m", 9),
        ("000000001m", 9),
        ("18446744073709551615m", 20),
        ("18446744073709551615H", 20),
    ] {
        assert_eq!(
            parsed(value),
            Err(TimeoutError::TooManyDigits(digits)),
            "still to do (ch04): {value:?} has {digits} digits; the protocol allows \
             at most 8, whatever fits in a u64"
        );
    }
}

#[test]
fn a_value_that_is_not_plain_digits_is_refused() {
    for (value, culprit) in [
        ("+5m", '+'),
        ("-5m", '-'),
        (" 5m", ' '),
        ("5 m", ' '),
        ("1.5S", '.'),
        ("5_000m", '_'),
        ("0x10m", 'x'),
    ] {
        assert_eq!(
            parsed(value),
            Err(TimeoutError::NotADigit(culprit)),
            "still to do (ch04): {value:?} must be refused for its {culprit:?}: the \
             value is ASCII digits only (u64's parser accepts a leading '+')"
        );
    }
}

#[test]
fn an_unknown_or_missing_unit_is_refused() {
    for (value, unit) in [
        ("5x", 'x'),
        ("5", '5'),
        ("5h", 'h'),
        ("5s", 's'),
        ("5ms", 's'),
        ("5m ", ' '),
        ("5µ", 'µ'),
    ] {
        assert_eq!(
            parsed(value),
            Err(TimeoutError::UnknownUnit(unit)),
            "{value:?} ends in {unit:?}, which is no unit"
        );
    }
}

#[test]
fn an_empty_value_or_a_bare_unit_is_refused_with_a_clear_error() {
    assert_eq!(parsed(""), Err(TimeoutError::Empty));
    assert_eq!(parsed("m"), Err(TimeoutError::NoDigits));
    assert_eq!(
        parsed("S"),
        Err(TimeoutError::NoDigits),
        "still to do (ch04): `S` is a unit (seconds) with no value before it"
    );
    assert_eq!(
        TimeoutError::TooManyDigits(9).to_string(),
        "grpc-timeout value has 9 digits; at most 8 are allowed"
    );
}
