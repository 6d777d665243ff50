//! The budget controllers: Part 2's feedback rule, and a delay-target rule
//! of our own. Each is a pure decision function over one tick's observations
//! (so a test can script any sequence of ticks), plus [`drive`], the task
//! that feeds it real observations from a running server every tick.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use ingest::service::Ingestor;
use serde::{Deserialize, Serialize};

/// What the controller sees at the end of one interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tick {
    /// Service completions during the interval.
    pub completions: usize,
    /// Their mean service time (ms); meaningless when `completions` is 0.
    pub mean_service_ms: f64,
    /// Messages in the queue now (`Q`).
    pub queued: usize,
    /// Queued plus reserved now (`Q + R`).
    pub pending: usize,
    /// The budget in force (`B`).
    pub budget: usize,
}

/// Why a tick ended as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Too few completions to judge: budget held, streaks reset.
    FewCompletions,
    Hold,
    Decrease,
    Increase,
    /// The delay-target rule set the budget from its estimate.
    Target,
}

/// One tick's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Decision {
    pub budget: usize,
    pub reason: Reason,
    /// The service-time estimate after this tick (ms), once there is one.
    pub estimate_ms: Option<f64>,
    /// The estimated queue delay `Q x estimate` (ms), on eligible ticks.
    pub delay_ms: Option<f64>,
}

impl Decision {
    /// Too little evidence this tick: keep the budget, report the old estimate.
    fn few_completions(budget: usize, estimate_ms: Option<f64>) -> Decision {
        Decision {
            budget,
            reason: Reason::FewCompletions,
            estimate_ms,
            delay_ms: None,
        }
    }
}

/// Part 2's rule, with its numbers (milliseconds). A time-scaled run
/// (`--scale`) multiplies every time in it, so the rule sees the same
/// situation in proportion: as many completions per tick, the same delays
/// relative to the service time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SeedRule {
    pub tick_ms: f64,
    pub min_completions: usize,
    /// Weight of the newest interval in the EWMA.
    pub alpha: f64,
    pub high_ms: f64,
    pub low_ms: f64,
    /// Consecutive eligible ticks needed to act.
    pub streak: u32,
    pub min_budget: usize,
    pub max_budget: usize,
    pub start_budget: usize,
}

impl SeedRule {
    pub fn seed(scale: f64) -> SeedRule {
        SeedRule {
            tick_ms: 500.0 * scale,
            min_completions: 5,
            alpha: 0.2,
            high_ms: 125.0 * scale,
            low_ms: 75.0 * scale,
            streak: 2,
            min_budget: 1,
            max_budget: 32,
            start_budget: 16,
        }
    }
}

// ANCHOR: near
/// "Occupancy near B", which Part 2's text leaves to its source: here, pending
/// work `Q + R` is within one message of the budget. While the handler waits
/// for the stream's next message it already holds that message's reservation,
/// so a budget that limits anything shows `Q + R = B` or `B - 1`.
pub fn near_budget(pending: usize, budget: usize) -> bool {
    pending + 1 >= budget
}
// ANCHOR_END: near

/// An exponentially weighted moving average: it starts at the first sample,
/// then gives each new one the weight `alpha`.
fn blend(old: Option<f64>, new: f64, alpha: f64) -> f64 {
    match old {
        None => new,
        Some(old) => alpha * new + (1.0 - alpha) * old,
    }
}

/// Part 2's controller: state between ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedController {
    pub rule: SeedRule,
    ewma: Option<f64>,
    high: u32,
    low: u32,
}

impl SeedController {
    pub fn new(rule: SeedRule) -> SeedController {
        SeedController {
            rule,
            ewma: None,
            high: 0,
            low: 0,
        }
    }

    // ANCHOR: decide
    /// One tick of Part 2's rule. The first eligible tick starts the EWMA
    /// at that interval's mean; later ones blend 20% new, 80% old.
    pub fn decide(&mut self, t: Tick) -> Decision {
        let r = self.rule;
        if t.completions < r.min_completions {
            // Too little evidence: hold, and forget any half-built streak.
            self.high = 0;
            self.low = 0;
            return Decision::few_completions(t.budget, self.ewma);
        }
        let ewma = blend(self.ewma, t.mean_service_ms, r.alpha);
        self.ewma = Some(ewma);
        let delay = t.queued as f64 * ewma;
        self.high = if delay > r.high_ms { self.high + 1 } else { 0 };
        self.low = if delay < r.low_ms && near_budget(t.pending, t.budget) {
            self.low + 1
        } else {
            0
        };
        let (budget, reason) = if self.high >= r.streak {
            // Halve, rounding up; a decrease is checked first, so it wins.
            (t.budget.div_ceil(2).max(r.min_budget), Reason::Decrease)
        } else if self.low >= r.streak {
            ((t.budget + 1).min(r.max_budget), Reason::Increase)
        } else {
            (t.budget, Reason::Hold)
        };
        if reason != Reason::Hold {
            self.high = 0;
            self.low = 0;
        }
        Decision {
            budget,
            reason,
            estimate_ms: Some(ewma),
            delay_ms: Some(delay),
        }
    }
    // ANCHOR_END: decide
}

/// Our rule: set `B` from a delay target and the service time directly,
/// `B = clamp(floor(target / estimate), 1, 32)`, on a shorter tick. The
/// estimate is the larger of the newest interval's mean and an EWMA of it:
/// it rises as soon as service slows and falls back only gradually.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TargetRule {
    pub tick_ms: f64,
    pub target_ms: f64,
    pub alpha: f64,
    pub min_budget: usize,
    pub max_budget: usize,
    pub start_budget: usize,
}

impl TargetRule {
    pub fn new(target_ms: f64, scale: f64) -> TargetRule {
        TargetRule {
            tick_ms: 100.0 * scale,
            target_ms: target_ms * scale,
            alpha: 0.2,
            min_budget: 1,
            max_budget: 32,
            start_budget: 16,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TargetController {
    pub rule: TargetRule,
    ewma: Option<f64>,
}

impl TargetController {
    pub fn new(rule: TargetRule) -> TargetController {
        TargetController { rule, ewma: None }
    }

    // ANCHOR: target
    /// One tick: hold without a completion; otherwise budget = target / estimate.
    pub fn decide(&mut self, t: Tick) -> Decision {
        let r = self.rule;
        if t.completions == 0 {
            return Decision::few_completions(t.budget, self.ewma);
        }
        let ewma = blend(self.ewma, t.mean_service_ms, r.alpha);
        self.ewma = Some(ewma);
        // Fast up, slow down: a slowdown shows at once, a recovery must last.
        let estimate = ewma.max(t.mean_service_ms).max(1e-6);
        let budget = ((r.target_ms / estimate).floor() as usize).clamp(r.min_budget, r.max_budget);
        Decision {
            budget,
            reason: Reason::Target,
            estimate_ms: Some(estimate),
            delay_ms: Some(t.queued as f64 * estimate),
        }
    }
    // ANCHOR_END: target
}

/// Either controller, as the server runs it.
#[derive(Debug, Clone)]
pub enum Controller {
    Seed(SeedController),
    Target(TargetController),
}

impl Controller {
    pub fn tick(&self) -> Duration {
        Duration::from_secs_f64(
            match self {
                Controller::Seed(c) => c.rule.tick_ms,
                Controller::Target(c) => c.rule.tick_ms,
            } / 1e3,
        )
    }

    pub fn decide(&mut self, t: Tick) -> Decision {
        match self {
            Controller::Seed(c) => c.decide(t),
            Controller::Target(c) => c.decide(t),
        }
    }
}

/// One row of `controller.csv`: the tick's time since the plan's zero, what
/// the controller saw, what it decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogRow {
    pub at_ms: f64,
    /// Messages completed since the last tick, and their mean service time.
    pub completions: usize,
    pub mean_service_ms: f64,
    /// The gate at the tick: queued Q and pending Q + R.
    pub queued: usize,
    pub pending: usize,
    pub budget_before: usize,
    pub budget_after: usize,
    /// Why the budget moved or stayed.
    pub reason: Reason,
    /// The controller's service-time estimate and, for `target`, the queue
    /// delay it predicted; `None` where the policy keeps none.
    pub estimate_ms: Option<f64>,
    pub delay_ms: Option<f64>,
}

// ANCHOR: drive
/// Runs `controller` against a live server: ticks at the plan's zero plus
/// whole multiples of the tick, each fed the service times completed since
/// the last, and the gate's `Q`, `Q + R` and `B` at that instant. A new budget
/// only affects future reservations; the gate revokes nothing.
pub async fn drive(
    ingestor: Arc<Ingestor>,
    mut controller: Controller,
    log: Arc<Mutex<Vec<LogRow>>>,
) {
    let Some(gate) = ingestor.gate().cloned() else {
        return;
    };
    let epoch = loop {
        if let Some(epoch) = ingestor.epoch() {
            break epoch;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let every = controller.tick();
    let mut seen = 0;
    let mut n = 1u32;
    loop {
        tokio::time::sleep_until(epoch + every * n).await;
        n += 1;
        let messages = ingestor.recorder().messages();
        let fresh = &messages[seen.min(messages.len())..];
        seen = messages.len();
        let completions = fresh.len();
        let mean_service_ms = if completions == 0 {
            0.0
        } else {
            fresh
                .iter()
                .map(|m| (m.service_end - m.dequeued).as_secs_f64() * 1e3)
                .sum::<f64>()
                / completions as f64
        };
        let sample = ingestor.sample_now();
        let tick = Tick {
            completions,
            mean_service_ms,
            queued: sample.queued,
            pending: gate.pending(),
            budget: gate.budget(),
        };
        let decision = controller.decide(tick);
        if decision.budget != tick.budget {
            gate.set_budget(
                decision.budget,
                &format!("{:?}", decision.reason).to_lowercase(),
            );
        }
        log.lock().expect("log lock").push(LogRow {
            at_ms: (tokio::time::Instant::now() - epoch).as_secs_f64() * 1e3,
            completions: tick.completions,
            mean_service_ms: tick.mean_service_ms,
            queued: tick.queued,
            pending: tick.pending,
            budget_before: tick.budget,
            budget_after: decision.budget,
            reason: decision.reason,
            estimate_ms: decision.estimate_ms,
            delay_ms: decision.delay_ms,
        });
    }
}
// ANCHOR_END: drive

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(
        completions: usize,
        service: f64,
        queued: usize,
        pending: usize,
        budget: usize,
    ) -> Tick {
        Tick {
            completions,
            mean_service_ms: service,
            queued,
            pending,
            budget,
        }
    }

    fn seed() -> SeedController {
        SeedController::new(SeedRule::seed(1.0))
    }

    #[test]
    fn two_high_ticks_halve_the_budget_rounding_up() {
        let mut c = seed();
        // 16 queued x 10 ms = 160 ms > 125: first high tick holds.
        let d = c.decide(tick(12, 10.0, 16, 16, 15));
        assert_eq!((d.budget, d.reason), (15, Reason::Hold));
        assert_eq!(d.delay_ms, Some(160.0));
        // Second consecutive high tick: 15 -> 8 (15 / 2 rounded up).
        let d = c.decide(tick(12, 10.0, 16, 16, 15));
        assert_eq!((d.budget, d.reason), (8, Reason::Decrease));
    }

    #[test]
    fn halving_stops_at_one() {
        let mut c2 = seed();
        c2.decide(tick(10, 200.0, 1, 1, 1));
        let d = c2.decide(tick(10, 200.0, 1, 1, 1));
        assert_eq!((d.budget, d.reason), (1, Reason::Decrease));
    }

    #[test]
    fn the_ewma_weighs_the_newest_interval_at_one_fifth() {
        let mut c = seed();
        assert_eq!(c.decide(tick(20, 10.0, 0, 0, 16)).estimate_ms, Some(10.0));
        // 0.2 x 40 + 0.8 x 10 = 16
        let d = c.decide(tick(12, 40.0, 16, 16, 16));
        assert!((d.estimate_ms.unwrap() - 16.0).abs() < 1e-9);
        assert!((d.delay_ms.unwrap() - 256.0).abs() < 1e-9);
    }

    #[test]
    fn two_low_ticks_near_the_budget_add_one_up_to_32() {
        let mut c = seed();
        // 2 queued x 10 ms = 20 ms < 75, pending 3 of B = 4: near.
        let d = c.decide(tick(10, 10.0, 2, 3, 4));
        assert_eq!(d.reason, Reason::Hold);
        let d = c.decide(tick(10, 10.0, 2, 3, 4));
        assert_eq!((d.budget, d.reason), (5, Reason::Increase));
        // Streaks restart after a change: one more low tick is not enough.
        assert_eq!(c.decide(tick(10, 10.0, 2, 4, 5)).reason, Reason::Hold);
        let mut top = seed();
        top.decide(tick(10, 1.0, 1, 32, 32));
        assert_eq!(top.decide(tick(10, 1.0, 1, 32, 32)).budget, 32);
    }

    #[test]
    fn low_delay_far_below_the_budget_does_not_increase() {
        let mut c = seed();
        for _ in 0..5 {
            // pending 2 of B = 8: not near, so the low streak never builds.
            let d = c.decide(tick(10, 10.0, 1, 2, 8));
            assert_eq!((d.budget, d.reason), (8, Reason::Hold));
        }
        assert!(near_budget(7, 8) && near_budget(8, 8) && !near_budget(6, 8));
    }

    #[test]
    fn fewer_than_five_completions_hold_and_reset_the_streaks() {
        let mut c = seed();
        c.decide(tick(10, 40.0, 8, 8, 8)); // high streak 1
        let d = c.decide(tick(4, 40.0, 8, 8, 8));
        assert_eq!(
            (d.budget, d.reason, d.delay_ms),
            (8, Reason::FewCompletions, None)
        );
        // Streak was reset: this high tick is the first again, not the second.
        assert_eq!(c.decide(tick(10, 40.0, 8, 8, 8)).reason, Reason::Hold);
        assert_eq!(c.decide(tick(10, 40.0, 8, 8, 8)).reason, Reason::Decrease);
        // The ineligible tick did not move the EWMA either.
        let mut e = seed();
        e.decide(tick(10, 10.0, 0, 0, 16));
        e.decide(tick(1, 500.0, 0, 0, 16));
        assert_eq!(e.decide(tick(0, 0.0, 0, 0, 16)).estimate_ms, Some(10.0));
    }

    #[test]
    fn a_decrease_wins_over_an_increase_due_on_the_same_tick() {
        // The delay can be both > 125 and < 75 only with different thresholds,
        // so use a rule whose bands overlap: both streaks build together.
        let mut rule = SeedRule::seed(1.0);
        rule.high_ms = 50.0;
        rule.low_ms = 100.0;
        let mut c = SeedController::new(rule);
        c.decide(tick(10, 10.0, 8, 8, 8)); // 80 ms: high and low, streaks 1/1
        let d = c.decide(tick(10, 10.0, 8, 8, 8));
        assert_eq!((d.budget, d.reason), (4, Reason::Decrease));
        // And both streaks were reset by the change.
        assert_eq!(c.decide(tick(10, 10.0, 8, 4, 4)).reason, Reason::Hold);
    }

    #[test]
    fn a_single_high_tick_between_normal_ones_changes_nothing() {
        let mut c = seed();
        let ticks = [(16, 10.0), (2, 10.0), (16, 10.0), (2, 10.0)];
        for (q, s) in ticks {
            assert_eq!(c.decide(tick(10, s, q, q, 16)).reason, Reason::Hold);
        }
    }

    #[test]
    fn the_target_rule_sets_the_budget_from_the_estimate() {
        let mut c = TargetController::new(TargetRule::new(100.0, 1.0));
        assert_eq!(c.decide(tick(9, 10.0, 1, 2, 16)).budget, 10);
        // Service slows to 40 ms: the estimate jumps to 40 at once -> B = 2.
        let d = c.decide(tick(2, 40.0, 6, 8, 10));
        assert_eq!((d.budget, d.estimate_ms), (2, Some(40.0)));
        // Back at 10 ms: the EWMA (16 ms after one tick, then lower) decides.
        let d = c.decide(tick(9, 10.0, 1, 2, 2));
        assert!((d.estimate_ms.unwrap() - (0.2 * 10.0 + 0.8 * 16.0)).abs() < 1e-9);
        assert_eq!(d.budget, 6);
        // No completion: hold.
        assert_eq!(
            c.decide(tick(0, 0.0, 3, 3, 6)).reason,
            Reason::FewCompletions
        );
        // Clamped to 1..=32.
        let mut fast = TargetController::new(TargetRule::new(100.0, 1.0));
        assert_eq!(fast.decide(tick(50, 0.5, 0, 0, 16)).budget, 32);
        let mut slow = TargetController::new(TargetRule::new(100.0, 1.0));
        assert_eq!(slow.decide(tick(1, 500.0, 0, 0, 16)).budget, 1);
    }

    #[test]
    fn rules_scale_with_the_run() {
        let r = SeedRule::seed(0.25);
        assert_eq!((r.tick_ms, r.high_ms, r.low_ms), (125.0, 31.25, 18.75));
        let t = TargetRule::new(100.0, 0.5);
        assert_eq!((t.tick_ms, t.target_ms), (50.0, 50.0));
    }
}
