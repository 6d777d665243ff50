//! Chapter 12: the controller's streaks (solution).
//!
//! Part 2's controller judges each tick by an estimated queue delay, `Q` times
//! a smoothed service time, but it acts only when two eligible ticks in a row
//! agree: one noisy interval must not move the budget.

use admission::controller::{Decision, Reason, SeedRule, Tick, near_budget};

/// The controller's state between ticks.
#[derive(Debug, Clone)]
pub struct SeedController {
    pub rule: SeedRule,
    /// The smoothed service time (ms), once there is one.
    ewma: Option<f64>,
    /// Consecutive eligible ticks above the high and below the low threshold.
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
    /// One tick of Part 2's rule.
    pub fn decide(&mut self, t: Tick) -> Decision {
        let r = self.rule;
        if t.completions < r.min_completions {
            // No verdict this tick, so the next one cannot be "the second".
            self.high = 0;
            self.low = 0;
            return Decision {
                budget: t.budget,
                reason: Reason::FewCompletions,
                estimate_ms: self.ewma,
                delay_ms: None,
            };
        }
        // The first eligible interval starts the average; later ones weigh alpha.
        let ewma = match self.ewma {
            None => t.mean_service_ms,
            Some(old) => r.alpha * t.mean_service_ms + (1.0 - r.alpha) * old,
        };
        self.ewma = Some(ewma);
        let delay = t.queued as f64 * ewma;
        // A tick that does not continue a streak breaks it.
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
            // The budget just changed: the evidence for the old one is spent.
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
