//! Chapter 19's exercise, `exercises::ch19::Sre`: a client's requests at
//! times a test picks (offsets from the client's start, no clock), with the
//! draws passed in, against a backend whose every answer the test decides.

use std::time::Duration;

use exercises::ch19::{Settings, Sre};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Requests 100 ms apart from `start`, one for each of `answers`: each asks
/// the throttle with `draw` and, if it goes, the backend answers it at once
/// with that answer (`true`: accepted). Returns the probability before each
/// request and whether it went.
fn send(
    throttle: &mut Sre,
    start: Duration,
    draw: f64,
    answers: impl IntoIterator<Item = bool>,
) -> Vec<(f64, bool)> {
    answers
        .into_iter()
        .enumerate()
        .map(|(i, accepted)| {
            let now = start + ms(100) * i as u32;
            let p = throttle.reject_probability(now);
            let went = throttle.admit(now, draw);
            if went {
                throttle.record(now, accepted);
            }
            (p, went)
        })
        .collect()
}

/// The largest draw below 1: it sends every request, since n / (n + 1)
/// stays below it for any count a test makes.
const HIGHEST_DRAW: f64 = 1.0 - f64::EPSILON;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn a_healthy_backend_is_sent_everything() {
    // Five minutes, so the window slides over accepted requests too.
    let mut throttle = Sre::new(Settings::BOOK);
    let sent = send(&mut throttle, secs(0), 0.0, [true; 3000]);
    assert!(
        sent.iter().all(|&(p, went)| p == 0.0 && went),
        "a backend that accepts everything is never throttled, not even with \
         a draw of 0 (first refusal: {:?})",
        sent.iter().position(|&(p, went)| p != 0.0 || !went)
    );
    let counts = throttle.counts(ms(299_950));
    assert_eq!(
        counts,
        (1200, 1200),
        "still to do (ch19): 3000 requests 100 ms apart, all accepted, \
         counted {counts:?} at 299.95 s; only the last two minutes' requests \
         and accepts count"
    );
}

#[test]
fn an_outage_drives_the_probability_towards_one() {
    let mut throttle = Sre::new(Settings::BOOK);
    let sent = send(&mut throttle, secs(0), 0.5, [false; 100]);
    let p: Vec<f64> = sent.iter().map(|&(p, _)| p).collect();
    assert!(
        close(p[1], 0.5) && close(p[9], 0.9) && close(p[99], 0.99),
        "still to do (ch19): with the backend accepting nothing, the \
         probability before the 2nd, 10th and 100th request was {:?}; with n \
         requests and no accepts in the window it is n / (n + 1)",
        [p[1], p[9], p[99]]
    );
    assert!(
        p.windows(2).all(|w| w[0] < w[1]) && p[99] < 1.0,
        "it climbs with every request and never reaches 1: {p:?}"
    );
    let went = sent.iter().filter(|&&(_, went)| went).count();
    assert_eq!(
        went, 2,
        "with draws of 0.5 only the first two requests go (p = 0, then 0.5)"
    );
    assert_eq!(
        throttle.counts(secs(10)),
        (100, 0),
        "the requests turned away here count as requests"
    );
}

/// 10 requests the backend accepts, then requests it fails, each asked with
/// a draw of 0 (turned away as soon as the probability is above 0): the
/// number (from 1) of the first request turned away.
fn first_turned_away(settings: Settings) -> Option<usize> {
    let mut throttle = Sre::new(settings);
    let answers = [true; 10].into_iter().chain([false; 100]);
    let sent = send(&mut throttle, secs(0), 0.0, answers);
    sent.iter().position(|&(_, went)| !went).map(|i| i + 1)
}

/// 100 requests that the backend accepts and fails in turn, then one more
/// that it fails, all sent (asked with the highest draw): the probability
/// after the 100 and after the one more.
fn half_failed(settings: Settings) -> (f64, f64) {
    let mut throttle = Sre::new(settings);
    let answers = [true, false].into_iter().cycle().take(100);
    send(&mut throttle, secs(0), HIGHEST_DRAW, answers);
    let after_100 = throttle.reject_probability(secs(10));
    send(&mut throttle, secs(10), HIGHEST_DRAW, [false]);
    (after_100, throttle.reject_probability(ms(10_100)))
}

#[test]
fn k_2_sends_freely_until_requests_reach_twice_the_accepts() {
    let first = first_turned_away(Settings::BOOK);
    assert_eq!(
        first,
        Some(22),
        "still to do (ch19): after 10 accepted requests and then failures, \
         the first request turned away was number {first:?}; with K = 2 the \
         10 accepts cover 20 requests, so the 22nd, the first asked with 21 \
         counted, is the first whose probability is above 0"
    );
    let (after_100, after_101) = half_failed(Settings::BOOK);
    assert_eq!(
        after_100, 0.0,
        "a backend that accepts exactly half is sent everything with K = 2"
    );
    assert!(
        close(after_101, 1.0 / 102.0),
        "one failure more (101 requests, 50 accepts) starts the throttle: \
         (101 - 100) / 102, not {after_101}"
    );
}

#[test]
fn k_1_1_throttles_sooner_than_k_2() {
    let book = first_turned_away(Settings::BOOK);
    let aggressive = first_turned_away(Settings::AGGRESSIVE);
    assert_eq!(
        (aggressive, book),
        (Some(13), Some(22)),
        "still to do (ch19): after 10 accepted requests and then failures, \
         the first request turned away with K = 1.1 and with K = 2 was \
         number {aggressive:?} and {book:?}; 10 accepts cover 11 requests at \
         K = 1.1 and 20 at K = 2"
    );
    let (aggressive, _) = half_failed(Settings::AGGRESSIVE);
    assert!(
        close(aggressive, 45.0 / 101.0),
        "with K = 1.1 a backend that accepts half of 100 requests is already \
         throttled: (100 - 55) / 101, not {aggressive}"
    );
    // For one history, a smaller K never throttles less.
    let mut book = Sre::new(Settings::BOOK);
    let mut aggressive = Sre::new(Settings::AGGRESSIVE);
    for i in 0..300u32 {
        let now = ms(100) * i;
        let (pb, pa) = (
            book.reject_probability(now),
            aggressive.reject_probability(now),
        );
        assert!(pa >= pb, "at {now:?}: K = 1.1 gave {pa}, K = 2 gave {pb}");
        // The same requests to both, one in three accepted, all sent.
        for throttle in [&mut book, &mut aggressive] {
            throttle.admit(now, HIGHEST_DRAW);
            throttle.record(now, i % 3 == 0);
        }
    }
}

#[test]
fn what_left_the_window_is_forgotten() {
    // An outage 0-10 s into the client's life, the window two minutes.
    let mut throttle = Sre::new(Settings::BOOK);
    send(&mut throttle, secs(0), 0.5, [false; 100]);
    assert_eq!(throttle.counts(secs(119)), (100, 0));
    let later = throttle.counts(ms(125_050));
    assert_eq!(
        later,
        (49, 0),
        "still to do (ch19): at 125.05 s, 100 requests asked 0 to 9.9 s into \
         the client's life counted as {later:?}; the 51 asked at 5 s or before \
         are over two minutes old and have left the window"
    );
    assert_eq!(throttle.counts(secs(130)), (0, 0));
    assert_eq!(
        throttle.reject_probability(secs(130)),
        0.0,
        "an outage that has left the window is forgotten"
    );

    // Accepts leave too: old successes do not cover a new outage.
    let mut throttle = Sre::new(Settings::BOOK);
    send(&mut throttle, secs(0), 0.0, [true; 100]);
    let sent = send(&mut throttle, secs(200), 0.0, [false; 10]);
    let went: Vec<bool> = sent.iter().map(|&(_, went)| went).collect();
    assert_eq!(
        went,
        [
            true, false, false, false, false, false, false, false, false, false
        ],
        "still to do (ch19): 100 accepts 0 to 9.9 s into the client's life, \
         then at 200 s an outage: of 10 requests asked with a draw of 0, these \
         went: {went:?}; the accepts left the window long ago, so after the \
         first failure the probability is above 0"
    );
}

#[test]
fn the_draw_decides_against_the_probability() {
    // Three requests and no accepts: the fourth is asked at p = 3/4.
    let mut throttle = Sre::new(Settings::BOOK);
    send(&mut throttle, secs(0), 0.0, [false; 3]);
    let p = throttle.reject_probability(ms(300));
    assert_eq!(
        p, 0.75,
        "still to do (ch19): after 3 requests and no accepts the probability \
         was {p}; (3 - 2 * 0) / (3 + 1) is 0.75"
    );
    for (draw, goes) in [(0.0, false), (0.7499, false), (0.75, true), (0.9, true)] {
        let mut throttle = throttle.clone();
        assert_eq!(
            throttle.admit(ms(300), draw),
            goes,
            "a draw of {draw} against a probability of 0.75"
        );
        if goes {
            // Sent: counted when it ends, here refused.
            throttle.record(ms(300), false);
        }
        assert_eq!(
            throttle.counts(ms(300)),
            (4, 0),
            "turned away or sent and ended, it is counted"
        );
    }
}

#[test]
fn the_probability_falls_back_once_accepts_resume() {
    // 10 requests a second with draws spread evenly over [0, 1); the backend
    // fails everything for 10 s, then accepts everything it is sent.
    let golden = (5f64.sqrt() - 1.0) / 2.0;
    let mut throttle = Sre::new(Settings::BOOK);
    let mut at = Vec::new();
    for i in 0..4000u32 {
        let now = ms(100) * i;
        if i % 150 == 100 {
            at.push((now.as_secs(), throttle.reject_probability(now)));
        }
        let draw = (f64::from(i) * golden).fract();
        if throttle.admit(now, draw) {
            throttle.record(now, now >= secs(10));
        }
    }
    let p = |secs: u64| at.iter().find(|&&(s, _)| s == secs).unwrap().1;
    assert!(
        p(10) > 0.95,
        "still to do (ch19): after 10 s of failures at 10 requests a second \
         the probability was {}; it should be near 100 / 101",
        p(10)
    );
    let falling = at.windows(2).all(|w| w[1].1 < w[0].1 || w[1].1 == 0.0);
    assert!(
        falling,
        "once the backend accepts again the probability falls, every 15 s, \
         until it is 0: {at:?}"
    );
    assert!(
        p(130) > 0.5,
        "the requests turned away during recovery count as requests too, so a \
         window after the outage the probability is still high: {at:?}"
    );
    assert!(
        at.iter().all(|&(s, p)| s < 340 || p == 0.0),
        "by 340 s the client sends everything again: {at:?}"
    );
}
