//! Chapter 12's exercise, `exercises::ch12::SeedController`: scripted ticks,
//! then a long seeded sequence checked against the chapter's own controller.

use admission::controller::{self as chapter, Reason, SeedRule, Tick};
use exercises::ch12::SeedController;

fn seed() -> SeedController {
    SeedController::new(SeedRule::seed(1.0))
}

/// A tick with enough completions, a 10 ms service time and `queued`
/// messages waiting; pending work is at the budget.
fn at(queued: usize, budget: usize) -> Tick {
    Tick {
        completions: 10,
        mean_service_ms: 10.0,
        queued,
        pending: budget,
        budget,
    }
}

#[test]
fn one_high_tick_between_normal_ones_changes_nothing() {
    let mut c = seed();
    // 16 queued x 10 ms = 160 ms, over the 125 ms line; 4 x 10 ms is between.
    for (i, queued) in [16, 4, 16, 4, 16, 4].into_iter().enumerate() {
        let d = c.decide(at(queued, 16));
        assert_eq!(
            (d.budget, d.reason),
            (16, Reason::Hold),
            "still to do (ch12): tick {i} had {queued} queued; every other tick \
             is high and none follows another, yet the budget moved to {}. \
             Act only when `rule.streak` eligible ticks in a row agree.",
            d.budget
        );
    }
}

#[test]
fn two_high_ticks_in_a_row_halve_the_budget() {
    let mut c = seed();
    let first = c.decide(at(16, 15));
    assert_eq!(
        first.reason,
        Reason::Hold,
        "still to do (ch12): the first high tick already changed the budget \
         (to {}); it should only start the high streak.",
        first.budget
    );
    let second = c.decide(at(16, 15));
    assert_eq!((second.budget, second.reason), (8, Reason::Decrease));
}

#[test]
fn two_low_ticks_near_the_budget_add_one() {
    let mut c = seed();
    // 2 queued x 10 ms = 20 ms, under 75 ms, with pending at the budget.
    let first = c.decide(at(2, 4));
    assert_eq!(
        first.reason,
        Reason::Hold,
        "still to do (ch12): the first low tick already raised the budget to \
         {}; it should only start the low streak.",
        first.budget
    );
    assert_eq!(c.decide(at(2, 4)).budget, 5);
    // Far below the budget the low streak never builds.
    let mut idle = seed();
    for _ in 0..4 {
        let mut t = at(1, 8);
        t.pending = 2;
        assert_eq!(idle.decide(t).reason, Reason::Hold);
    }
}

#[test]
fn a_change_starts_both_streaks_again() {
    let mut c = seed();
    c.decide(at(16, 16));
    assert_eq!(c.decide(at(16, 16)).budget, 8);
    let after = c.decide(at(16, 8));
    assert_eq!(
        (after.budget, after.reason),
        (8, Reason::Hold),
        "still to do (ch12): the tick right after a decrease changed the \
         budget again (to {}). The evidence was spent on the change: both \
         streaks start again from zero.",
        after.budget
    );
    assert_eq!(c.decide(at(16, 8)).budget, 4);
}

#[test]
fn a_tick_with_too_few_completions_breaks_a_streak() {
    let mut c = seed();
    c.decide(at(16, 16)); // high streak 1
    let mut quiet = at(16, 16);
    quiet.completions = 4;
    let d = c.decide(quiet);
    assert_eq!(
        (d.budget, d.reason, d.delay_ms),
        (16, Reason::FewCompletions, None)
    );
    let next = c.decide(at(16, 16));
    assert_eq!(
        (next.budget, next.reason),
        (16, Reason::Hold),
        "still to do (ch12): a high tick, a tick with too few completions, \
         then a high tick moved the budget to {}. Those two high ticks are \
         not consecutive: a tick without a verdict resets both streaks.",
        next.budget
    );
}

/// A small deterministic generator (64-bit LCG), so the sequence is the
/// same on every run and needs no crate.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn it_decides_as_the_chapters_controller_over_a_long_run() {
    let rule = SeedRule::seed(1.0);
    let mut yours = SeedController::new(rule);
    let mut theirs = chapter::SeedController::new(rule);
    let mut rng = Lcg(12);
    let mut budget = rule.start_budget;
    for i in 0..2_000 {
        // Service from 2 to 40 ms, a queue up to the budget, sometimes a
        // quiet interval: a run that crosses both thresholds often.
        let queued = rng.below(budget as u64 + 1) as usize;
        let tick = Tick {
            completions: 3 + rng.below(10) as usize,
            mean_service_ms: 2.0 + rng.below(39) as f64,
            queued,
            pending: (queued + rng.below(3) as usize).min(budget),
            budget,
        };
        let (a, b) = (yours.decide(tick), theirs.decide(tick));
        assert_eq!(
            a, b,
            "still to do (ch12): at tick {i} ({tick:?}) your controller \
             decided {a:?}, the chapter's decided {b:?}."
        );
        budget = b.budget;
    }
}
