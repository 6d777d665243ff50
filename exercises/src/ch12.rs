//! Chapter 12: the controller's streaks.
//!
//! Part 2's controller judges each tick by an estimated queue delay, `Q` times
//! a smoothed service time, but it acts only when two eligible ticks in a row
//! agree: one noisy interval must not move the budget. This version acts on
//! every tick that crosses a threshold. Give it the two streaks: count
//! consecutive high and low ticks, act when one reaches the rule's `streak`,
//! and start both again after a change or a tick with too few completions.
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch12`.

use admission::controller::{Decision, Reason, SeedRule, Tick, near_budget};

/// The controller's state between ticks.
#[derive(Debug, Clone)]
pub struct SeedController {
    pub rule: SeedRule,
    /// The smoothed service time (ms), once there is one.
    ewma: Option<f64>,
}

impl SeedController {
    pub fn new(rule: SeedRule) -> SeedController {
        SeedController { rule, ewma: None }
    }

    // ANCHOR: decide
    /// One tick of Part 2's rule.
    pub fn decide(&mut self, t: Tick) -> Decision {
        let r = self.rule;
        if t.completions < r.min_completions {
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
        let high = delay > r.high_ms;
        let low = delay < r.low_ms && near_budget(t.pending, t.budget);
        let (budget, reason) = if high {
            // Halve, rounding up; a decrease is checked first, so it wins.
            (t.budget.div_ceil(2).max(r.min_budget), Reason::Decrease)
        } else if low {
            ((t.budget + 1).min(r.max_budget), Reason::Increase)
        } else {
            (t.budget, Reason::Hold)
        };
        Decision {
            budget,
            reason,
            estimate_ms: Some(ewma),
            delay_ms: Some(delay),
        }
    }
    // ANCHOR_END: decide
}
