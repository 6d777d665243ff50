//! When each send is due: absolute times fixed before the run starts.
//!
//! An open-loop generator decides *when* to send from the clock alone, never
//! from how fast the server answered. A closed loop ("send, wait for the
//! answer, send again") slows down exactly when the server does and so hides
//! the delay it should be measuring (coordinated omission).

use std::{fmt, str::FromStr, time::Duration};

use program::duration::Show;

/// `rate` sends per second for `duration`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub rate: f64,
    pub duration: Duration,
}

/// One send opportunity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slot {
    /// Position in the whole schedule, from 0.
    pub index: u64,
    /// Which step it belongs to.
    pub step: usize,
    /// When it is due, from the start of the run.
    pub due: Duration,
}

/// Steps run one after the other: one step is a constant rate, several are a ramp.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub steps: Vec<Step>,
}

impl Schedule {
    pub fn constant(rate: f64, duration: Duration) -> Schedule {
        Schedule {
            steps: vec![Step { rate, duration }],
        }
    }

    // ANCHOR: slots
    /// Every slot of the run. Step `k` starting at `T` has slots at
    /// `T + i / rate` for `i = 0, 1, ...` while that is before the step ends:
    /// computed from the index, not by adding intervals, so rounding never
    /// accumulates into drift over a long run.
    pub fn slots(&self) -> Vec<Slot> {
        let mut slots = Vec::new();
        let mut start = Duration::ZERO;
        for (step, s) in self.steps.iter().enumerate() {
            let count = (s.rate * s.duration.as_secs_f64()).round() as u64;
            for i in 0..count {
                slots.push(Slot {
                    index: slots.len() as u64,
                    step,
                    due: start + Duration::from_secs_f64(i as f64 / s.rate),
                });
            }
            start += s.duration;
        }
        slots
    }
    // ANCHOR_END: slots

    pub fn duration(&self) -> Duration {
        self.steps.iter().map(|s| s.duration).sum()
    }

    /// Multiplies every rate by `factor` (a ramp expressed in units of capacity).
    pub fn scaled(&self, factor: f64) -> Schedule {
        Schedule {
            steps: self
                .steps
                .iter()
                .map(|s| Step {
                    rate: s.rate * factor,
                    duration: s.duration,
                })
                .collect(),
        }
    }
}

impl FromStr for Step {
    type Err = String;

    /// `80/s:36s`, `2.5/s:500ms`.
    fn from_str(text: &str) -> Result<Step, String> {
        let usage = || format!("`{text}` is not a step; write RATE/s:DURATION, e.g. 80/s:36s");
        let (rate, duration) = text.split_once(':').ok_or_else(usage)?;
        let rate: f64 = rate
            .trim()
            .strip_suffix("/s")
            .ok_or_else(usage)?
            .parse()
            .map_err(|_| usage())?;
        if !(rate.is_finite() && rate > 0.0) {
            return Err(format!("rate in `{text}` must be above 0"));
        }
        let duration =
            program::duration::parse(duration).map_err(|e| format!("in `{text}`: {e}"))?;
        Ok(Step { rate, duration })
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/s:{}", self.rate, Show(self.duration))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_rate_of_each_step() {
        let schedule = Schedule {
            steps: vec!["10/s:1s".parse().unwrap(), "20/s:500ms".parse().unwrap()],
        };
        let slots = schedule.slots();
        assert_eq!(slots.len(), 20);
        assert_eq!(slots[1].due, Duration::from_millis(100));
        assert_eq!(slots[10].step, 1);
        assert_eq!(slots[10].due, Duration::from_secs(1));
        assert_eq!(slots[11].due, Duration::from_millis(1050));
        assert_eq!(slots[19].index, 19);
        assert_eq!(schedule.duration(), Duration::from_millis(1500));
    }

    #[test]
    fn the_seed_schedule_has_2880_slots() {
        let slots = Schedule::constant(80.0, Duration::from_secs(36)).slots();
        assert_eq!(slots.len(), 2880);
        assert!(slots.last().unwrap().due < Duration::from_secs(36));
    }

    #[test]
    fn bad_steps_say_what_is_wrong() {
        for bad in [
            "80:36s", "80/s", "0/s:1s", "-5/s:1s", "80/s:ten", "80/s:10m",
        ] {
            let error = bad.parse::<Step>().unwrap_err();
            assert!(
                error.contains(bad) || error.contains("must be"),
                "{bad}: {error}"
            );
        }
    }
}
