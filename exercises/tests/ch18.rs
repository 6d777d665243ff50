//! Chapter 18's exercise, `exercises::ch18::Strikes`: a client's pings at
//! instants a test picks (offsets from one `Instant::now()`, no sleeping),
//! against a server that bears 2 strikes and asks for 1 s between pings.

use std::time::Duration;

use exercises::ch18::{PingPolicy, Strikes, Verdict};
use tokio::time::Instant;

use Verdict::{GoAway, Pong};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A min_time of 1 s and 2 strikes borne; idle pings as `permit_without_calls`.
fn policy(permit_without_calls: bool) -> PingPolicy {
    PingPolicy {
        min_time: ms(1000),
        permit_without_calls,
        max_strikes: 2,
    }
}

/// `n` pings `every` apart, with `open_calls` calls open: each ping's
/// verdict, and the strikes counted after it.
fn pings(
    policy: PingPolicy,
    every: Duration,
    n: u32,
    open_calls: usize,
) -> (Vec<Verdict>, Vec<u32>) {
    let start = Instant::now();
    let mut strikes = Strikes::new(policy);
    (0..n)
        .map(|i| {
            let verdict = strikes.on_ping(start + every * i, open_calls);
            (verdict, strikes.strikes())
        })
        .unzip()
}

#[test]
fn pings_closer_than_min_time_are_struck_out() {
    let (verdicts, strikes) = pings(policy(false), ms(200), 4, 1);
    assert_eq!(
        verdicts,
        [Pong, Pong, Pong, GoAway],
        "still to do (ch18): four pings 200 ms apart, with a call open and a \
         min_time of 1 s, were answered {verdicts:?} (strikes after each: \
         {strikes:?}); a ping less than min_time after the last one is a strike, \
         and the third is one more than the 2 the server bears: GOAWAY"
    );
    assert_eq!(strikes, [0, 1, 2, 3]);
}

#[test]
fn pings_min_time_apart_with_a_call_open_are_answered() {
    for every in [ms(1500), ms(1000)] {
        let (verdicts, strikes) = pings(policy(false), every, 20, 1);
        assert_eq!(verdicts, [Pong; 20], "pings {every:?} apart");
        assert_eq!(strikes, [0; 20], "pings {every:?} apart are no strikes");
    }
}

#[test]
fn idle_pings_are_held_to_two_hours_unless_permitted() {
    let (verdicts, strikes) = pings(policy(false), ms(1500), 4, 0);
    assert_eq!(
        verdicts,
        [Pong, Pong, Pong, GoAway],
        "still to do (ch18): four pings 1.5 s apart with no call open, to a \
         server that does not permit them, were answered {verdicts:?} (strikes \
         after each: {strikes:?}); with no call open and `permit_without_calls` \
         false, a ping less than two hours after the last one is a strike"
    );
    assert_eq!(strikes, [0, 1, 2, 3]);
    let (verdicts, _) = pings(policy(false), Duration::from_secs(2 * 60 * 60), 4, 0);
    assert_eq!(
        verdicts, [Pong; 4],
        "idle pings two hours apart are no strikes"
    );
}

#[test]
fn permitted_idle_pings_are_held_to_min_time() {
    let (verdicts, strikes) = pings(policy(true), ms(1500), 20, 0);
    assert_eq!(verdicts, [Pong; 20], "permitted idle pings 1.5 s apart");
    assert_eq!(strikes, [0; 20]);
    let (verdicts, strikes) = pings(policy(true), ms(200), 4, 0);
    assert_eq!(
        verdicts,
        [Pong, Pong, Pong, GoAway],
        "still to do (ch18): four idle pings 200 ms apart, to a server that \
         permits idle pings, were answered {verdicts:?} (strikes after each: \
         {strikes:?}); `permit_without_calls` holds idle pings to min_time, \
         it does not let them through"
    );
}

#[test]
fn headers_or_data_between_pings_forgive_them() {
    let start = Instant::now();
    let mut strikes = Strikes::new(policy(false));
    let mut verdicts = Vec::new();
    let mut counts = Vec::new();
    for i in 0..20 {
        if i % 2 == 1 {
            strikes.on_headers_or_data();
        }
        verdicts.push(strikes.on_ping(start + ms(200) * i, 1));
        counts.push(strikes.strikes());
    }
    let expected: Vec<u32> = (0..20).map(|i| u32::from(i > 0 && i % 2 == 0)).collect();
    assert_eq!(
        counts, expected,
        "still to do (ch18): pings 200 ms apart, with HEADERS or DATA sent \
         before every second one, left these strikes after each: {counts:?}; \
         the ping after HEADERS or DATA is forgiven and clears the count, the \
         one after it is a strike again"
    );
    assert_eq!(
        verdicts, [Pong; 20],
        "a server that is answering is being used"
    );
}

#[test]
fn a_response_clears_every_strike_before_it() {
    let start = Instant::now();
    let mut strikes = Strikes::new(policy(false));
    let ping = |at: u64, strikes: &mut Strikes| {
        let verdict = strikes.on_ping(start + ms(at), 1);
        (verdict, strikes.strikes())
    };
    let before: Vec<_> = [0, 200, 400].map(|at| ping(at, &mut strikes)).into();
    assert_eq!(
        before,
        [(Pong, 0), (Pong, 1), (Pong, 2)],
        "still to do (ch18): three pings 200 ms apart (min_time 1 s) were \
         answered, with the strikes after each, {before:?}; the second and \
         the third are strikes"
    );
    strikes.on_headers_or_data();
    assert_eq!(
        ping(600, &mut strikes),
        (Pong, 0),
        "the ping after HEADERS or DATA clears the strikes"
    );
    let after: Vec<_> = [800, 1000, 1200].map(|at| ping(at, &mut strikes)).into();
    assert_eq!(
        after,
        [(Pong, 1), (Pong, 2), (GoAway, 3)],
        "forgiveness is for one ping: the strikes start again after it"
    );
}

#[test]
fn the_first_ping_is_never_a_strike() {
    let strict = PingPolicy {
        min_time: Duration::from_secs(3600),
        permit_without_calls: false,
        max_strikes: 0,
    };
    for open_calls in [0, 1] {
        let mut strikes = Strikes::new(strict);
        assert_eq!(
            strikes.on_ping(Instant::now(), open_calls),
            Pong,
            "the first ping, with {open_calls} call(s) open, has no last ping to be close to"
        );
        assert_eq!(strikes.strikes(), 0);
    }
}
