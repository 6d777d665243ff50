//! The three throttles, each against its source's numbers, on a paused clock.

use std::time::Duration;

use chain::throttle::{A6, DepositOn, Sre, Throttle, TowerBudget};
use tokio::time::{Instant, advance};

/// The draw that rejects whenever the rejection probability is above 0.
const MOST_REJECTING: f64 = 0.0;

/// `n` requests at `now`, each accepted or not, all let through whatever the
/// probability (a draw of 1 is never below it).
fn requests(sre: &mut Sre, now: Instant, n: usize, accepted: impl Fn(usize) -> bool) {
    for i in 0..n {
        assert!(sre.admit(now, false, 1.0));
        sre.record(now, accepted(i));
    }
}

#[tokio::test(start_paused = true)]
async fn sre_rejects_nothing_while_all_is_accepted() {
    let mut sre = Sre::book();
    let now = Instant::now();
    requests(&mut sre, now, 1000, |_| true);
    assert_eq!(sre.rejection_probability(now), 0.0);
    // Not even the draw most inclined to reject.
    assert!(sre.admit(now, false, MOST_REJECTING));
    assert!(sre.admit(now, true, MOST_REJECTING));
}

#[tokio::test(start_paused = true)]
async fn sre_rejection_climbs_towards_one_with_no_accepts() {
    let mut sre = Sre::book();
    let now = Instant::now();
    let mut last = 0.0;
    for n in [1, 10, 100, 1000] {
        let (asked, _) = sre.counts(now);
        requests(&mut sre, now, n - asked, |_| false);
        let p = sre.rejection_probability(now);
        // n / (n + 1): 0.5, 0.909, 0.990, 0.999.
        assert!((p - n as f64 / (n as f64 + 1.0)).abs() < 1e-12, "{n}: {p}");
        assert!(p > last);
        last = p;
    }
    // Locally rejected requests count too: that is what keeps the climb going.
    assert!(!sre.admit(now, false, 0.5));
    assert_eq!(sre.counts(now), (1001, 0));
}

#[tokio::test(start_paused = true)]
async fn sre_calls_in_flight_are_not_failures() {
    // A burst of 100 let through, none ended yet: nothing to hold back for.
    let mut sre = Sre::new(1.1, Duration::from_secs(10));
    let now = Instant::now();
    for _ in 0..100 {
        assert!(sre.admit(now, false, MOST_REJECTING));
    }
    assert_eq!(sre.counts(now), (0, 0));
    // They end, all accepted: still nothing rejected.
    for _ in 0..100 {
        sre.record(now, true);
    }
    assert_eq!(sre.counts(now), (100, 100));
    assert!(sre.admit(now, false, MOST_REJECTING));
}

#[tokio::test(start_paused = true)]
async fn sre_k2_tolerates_half_failing_and_k1_1_rejects_sooner() {
    let now = Instant::now();
    // Half accepted: requests = 2 * accepts, right at K = 2's edge.
    let mut k2 = Sre::new(2.0, Duration::from_secs(120));
    requests(&mut k2, now, 1000, |i| i % 2 == 0);
    assert_eq!(k2.rejection_probability(now), 0.0);
    // One more failure tips it over.
    requests(&mut k2, now, 1, |_| false);
    assert!(k2.rejection_probability(now) > 0.0);

    // A third accepted: (3n - 2n) / (3n + 1), about a third rejected.
    let mut k2 = Sre::book();
    requests(&mut k2, now, 3000, |i| i % 3 == 0);
    assert!((k2.rejection_probability(now) - 1000.0 / 3001.0).abs() < 1e-12);

    // 10 % failing: nothing for K = 2, already something for K = 1.1, whose
    // edge is 1 - 1/1.1, about 9 % failing.
    let mut k2 = Sre::book();
    let mut k11 = Sre::new(1.1, Duration::from_secs(120));
    for sre in [&mut k2, &mut k11] {
        requests(sre, now, 1000, |i| i % 10 != 0);
    }
    assert_eq!(k2.rejection_probability(now), 0.0);
    let p = k11.rejection_probability(now);
    assert!((p - (1000.0 - 1.1 * 900.0) / 1001.0).abs() < 1e-12, "{p}");
    // 5 % failing is within K = 1.1's edge too.
    let mut k11 = Sre::new(1.1, Duration::from_secs(120));
    requests(&mut k11, now, 1000, |i| i % 20 != 0);
    assert_eq!(k11.rejection_probability(now), 0.0);
}

#[tokio::test(start_paused = true)]
async fn sre_window_forgets_old_counts() {
    let mut sre = Sre::book();
    requests(&mut sre, Instant::now(), 100, |_| false);
    advance(Duration::from_secs(60)).await;
    requests(&mut sre, Instant::now(), 100, |_| true);
    // Both halves count: (200 - 200) / 201.
    assert_eq!(sre.counts(Instant::now()), (200, 100));
    assert_eq!(sre.rejection_probability(Instant::now()), 0.0);

    // Two minutes after the failures, only the accepted half is left.
    advance(Duration::from_secs(60)).await;
    assert_eq!(sre.counts(Instant::now()), (100, 100));
    // Two minutes after everything, nothing is left.
    advance(Duration::from_secs(60)).await;
    assert_eq!(sre.counts(Instant::now()), (0, 0));

    // And an outage is forgotten the same way: after a window with no
    // request, the first one goes through whatever the draw.
    requests(&mut sre, Instant::now(), 1000, |_| false);
    assert!(sre.rejection_probability(Instant::now()) > 0.99);
    advance(Duration::from_secs(120)).await;
    assert!(sre.admit(Instant::now(), false, MOST_REJECTING));
}

/// Attempts that all fail, retried while the bucket allows, as one long call
/// (no `maxAttempts`): how many retries it gets.
fn retries_while_failing(a6: &mut A6) -> u32 {
    let now = Instant::now();
    let mut retries = 0;
    a6.record(now, false);
    while a6.admit(now, true, 0.0) {
        retries += 1;
        a6.record(now, false);
    }
    retries
}

#[tokio::test(start_paused = true)]
async fn a6_full_bucket_under_total_failure_allows_ceil_half_minus_one_retries() {
    // A retry needs the count, after the failure's token, above max / 2: the
    // k-th failure leaves max - k, so retries follow k = 1 .. ceil(max/2) - 1.
    for (max, retries) in [
        (10.0, 4),
        (11.0, 5),
        (100.0, 49),
        (1000.0, 499),
        (1.0, 0),
        (3.0, 1),
    ] {
        let mut a6 = A6::new(max, 0.1);
        assert_eq!(retries_while_failing(&mut a6), retries, "maxTokens {max}");
        // The last failure left exactly half (or half rounded down, odd max).
        assert!(!a6.above_threshold());
        // First attempts still go; retries do not, however many fail.
        for _ in 0..=max as usize {
            assert!(a6.admit(Instant::now(), false, 0.0));
            a6.record(Instant::now(), false);
            assert!(!a6.admit(Instant::now(), true, 0.0));
        }
        assert_eq!(a6.tokens(), 0.0, "floored at 0");
    }
}

#[tokio::test(start_paused = true)]
async fn a6_successes_refill_at_token_ratio() {
    let now = Instant::now();
    let mut a6 = A6::new(10.0, 0.1);
    for _ in 0..20 {
        a6.record(now, false);
    }
    assert_eq!(a6.tokens(), 0.0);
    // 50 successes make exactly 5.0: not above the threshold of 5...
    for _ in 0..50 {
        a6.record(now, true);
    }
    assert_eq!(a6.tokens(), 5.0);
    assert!(!a6.admit(now, true, 0.0));
    // ...the 51st does.
    a6.record(now, true);
    assert!(a6.admit(now, true, 0.0));
    // Capped at maxTokens.
    for _ in 0..1000 {
        a6.record(now, true);
    }
    assert_eq!(a6.tokens(), 10.0);

    // One failure costs 1 / tokenRatio successes: at 0.1, ten.
    a6.record(now, false);
    assert_eq!(a6.tokens(), 9.0);
    for _ in 0..10 {
        a6.record(now, true);
    }
    assert_eq!(a6.tokens(), 10.0);

    // The ratio is kept to 3 decimals, as the spec supports.
    let a6 = A6::new(10.0, 0.12345);
    assert_eq!(a6.token_ratio(), 0.123);
}

#[tokio::test(start_paused = true)]
async fn tower_reserve_is_min_per_sec_times_ttl_at_once() {
    // 1 per second over 10 s: 10 retries, all available at once, with no
    // deposit at all.
    let mut budget = TowerBudget::new(Duration::from_secs(10), 1, 0.2, DepositOn::FirstAttempt);
    let now = Instant::now();
    let allowed = (0..100).filter(|_| budget.admit(now, true, 0.0)).count();
    assert_eq!(allowed, 10);
    // Still spent 9 s later...
    advance(Duration::from_secs(9)).await;
    assert!(!budget.admit(Instant::now(), true, 0.0));
    // ...and back once the withdrawals have expired.
    advance(Duration::from_secs(11)).await;
    let allowed = (0..100)
        .filter(|_| budget.admit(Instant::now(), true, 0.0))
        .count();
    assert_eq!(allowed, 10);
}

#[tokio::test(start_paused = true)]
async fn tower_deposits_allow_retry_percent_more_and_expire_after_ttl() {
    // No reserve: only deposits allow retries, 20 % of them (one per 5).
    let mut budget = TowerBudget::new(Duration::from_secs(10), 0, 0.2, DepositOn::FirstAttempt);
    let now = Instant::now();
    assert!(!budget.admit(now, true, 0.0), "nothing deposited yet");
    for _ in 0..100 {
        assert!(budget.admit(now, false, 0.0), "first attempts always go");
    }
    let allowed = (0..100).filter(|_| budget.admit(now, true, 0.0)).count();
    assert_eq!(allowed, 20);

    // Deposits count for the ttl: 9 s later they still do...
    for _ in 0..100 {
        budget.admit(now, false, 0.0);
    }
    advance(Duration::from_secs(9)).await;
    assert!(budget.admit(Instant::now(), true, 0.0));
    // ...twice the ttl later they are gone.
    advance(Duration::from_secs(11)).await;
    assert!(!budget.admit(Instant::now(), true, 0.0));

    // Depositing on accepted attempts only: failures earn nothing.
    let mut budget = TowerBudget::new(Duration::from_secs(10), 0, 0.2, DepositOn::Accepted);
    let now = Instant::now();
    for _ in 0..100 {
        budget.admit(now, false, 0.0);
        budget.record(now, false);
    }
    assert!(!budget.admit(now, true, 0.0));
    for _ in 0..10 {
        budget.record(now, true);
    }
    assert_eq!((0..10).filter(|_| budget.admit(now, true, 0.0)).count(), 2);
}

#[tokio::test(start_paused = true)]
async fn tower_truncates_the_withdrawal_cost() {
    // 0.3 costs (1 / 0.3) as isize = 3 per retry: one per 3 deposits, 33 %.
    let mut budget = TowerBudget::new(Duration::from_secs(10), 0, 0.3, DepositOn::FirstAttempt);
    let now = Instant::now();
    for _ in 0..300 {
        budget.admit(now, false, 0.0);
    }
    assert_eq!(
        (0..300).filter(|_| budget.admit(now, true, 0.0)).count(),
        100
    );
}
