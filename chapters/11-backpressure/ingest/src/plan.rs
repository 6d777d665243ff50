//! How long the worker takes per message, by phase: `10ms@0s,40ms@12s,10ms@24s`
//! means 10 ms from the start, 40 ms from second 12, 10 ms again from second 24.

use std::{fmt, str::FromStr, time::Duration};

use program::duration::{self, Show};
use rand::{Rng, SeedableRng, rngs::StdRng};

/// Service time by phase. The time is chosen when service of a message starts:
/// a message that starts at 11.99 s takes 10 ms even though it ends in the slow phase.
///
/// Written with an `exp(SEED):` prefix (chapter 12's knob), each service time
/// is instead drawn from an exponential distribution whose mean is the phase's
/// time, reproducibly: the draw depends only on the seed and the message's
/// dequeue number.
#[derive(Debug, Clone, PartialEq)]
pub struct ServicePlan {
    /// (from, service time), sorted by `from`, the first one from zero.
    phases: Vec<(Duration, Duration)>,
    /// `Some(seed)`: exponential service times around each phase's mean.
    exponential: Option<u64>,
    /// Wait out service times on a blocking thread (see [`ServicePlan::wait`]).
    precise: bool,
}

impl ServicePlan {
    pub fn constant(service: Duration) -> ServicePlan {
        ServicePlan {
            phases: vec![(Duration::ZERO, service)],
            exponential: None,
            precise: false,
        }
    }

    /// The same plan, waited out precisely (written with a `precise:` prefix).
    pub fn with_precise_wait(mut self) -> ServicePlan {
        self.precise = true;
        self
    }

    /// Waits out one service time. Tokio's timer rounds a sleep up to the next
    /// whole millisecond, so a 10 ms sleep takes about 11 ms: harmless at the
    /// seed's scale, a 40% error for a time-scaled run's 2.5 ms. A precise
    /// plan sleeps on a blocking thread instead (tens of microseconds late).
    pub async fn wait(&self, service: Duration) {
        if self.precise {
            let _ = tokio::task::spawn_blocking(move || std::thread::sleep(service)).await;
        } else {
            tokio::time::sleep(service).await;
        }
    }

    /// The same plan with exponential service times (mean: the phase's time).
    pub fn with_exponential(mut self, seed: u64) -> ServicePlan {
        self.exponential = Some(seed);
        self
    }

    /// The service time of the `n`th message dequeued, starting `at` after the
    /// epoch: the phase's time, or an exponential draw around it.
    pub fn service_time(&self, at: Duration, n: u64) -> Duration {
        let mean = self.at(at);
        match self.exponential {
            None => mean,
            Some(seed) => {
                // A generator per message, seeded from (seed, n): the draw does
                // not depend on which worker serves the message, or when.
                let mut rng = StdRng::seed_from_u64(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let u: f64 = rng.random(); // in [0, 1)
                mean.mul_f64(-(1.0 - u).ln())
            }
        }
    }

    /// The service time for a message whose service starts `at` after the epoch.
    pub fn at(&self, at: Duration) -> Duration {
        self.phases
            .iter()
            .rev()
            .find(|(from, _)| *from <= at)
            .map_or(self.phases[0].1, |(_, service)| *service)
    }

    pub fn phases(&self) -> &[(Duration, Duration)] {
        &self.phases
    }

    /// The same plan with every time (phase starts and service times) multiplied
    /// by `factor`: a shorter run with the same shape and the same ratios.
    pub fn scaled(&self, factor: f64) -> ServicePlan {
        ServicePlan {
            phases: self
                .phases
                .iter()
                .map(|(from, service)| (from.mul_f64(factor), service.mul_f64(factor)))
                .collect(),
            exponential: self.exponential,
            precise: self.precise,
        }
    }
}

impl FromStr for ServicePlan {
    type Err = String;

    fn from_str(text: &str) -> Result<ServicePlan, String> {
        if let Some(rest) = text.strip_prefix("precise:") {
            return Ok(rest.parse::<ServicePlan>()?.with_precise_wait());
        }
        if let Some(rest) = text.strip_prefix("exp(") {
            let (seed, plan) = rest
                .split_once("):")
                .ok_or_else(|| format!("`{text}`: write exp(SEED):SERVICE@FROM,..."))?;
            let seed = seed
                .parse()
                .map_err(|_| format!("`{seed}` in `{text}` is not a seed (an integer)"))?;
            return Ok(plan.parse::<ServicePlan>()?.with_exponential(seed));
        }
        let mut phases = Vec::new();
        for part in text.split(',') {
            let (service, from) = part.split_once('@').ok_or_else(|| {
                format!("`{part}` is not a phase; write SERVICE@FROM, e.g. 40ms@12s")
            })?;
            phases.push((duration::parse(from)?, duration::parse(service)?));
        }
        if phases.first().map(|p| p.0) != Some(Duration::ZERO) {
            return Err(format!("`{text}`: the first phase must start at 0s"));
        }
        if phases.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(format!("`{text}`: phases must start in increasing order"));
        }
        Ok(ServicePlan {
            phases,
            exponential: None,
            precise: false,
        })
    }
}

// On disk (a configuration, a contract) a plan is written as it is typed:
// `10ms@0s,40ms@12s,10ms@24s`.
harness::text_serde!(ServicePlan);

impl fmt::Display for ServicePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .phases
            .iter()
            .map(|(from, service)| format!("{}@{}", Show(*service), Show(*from)))
            .collect();
        if self.precise {
            write!(f, "precise:")?;
        }
        if let Some(seed) = self.exponential {
            write!(f, "exp({seed}):")?;
        }
        write!(f, "{}", parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_time_is_the_phase_in_force_when_service_starts() {
        let plan: ServicePlan = "10ms@0s,40ms@12s,10ms@24s".parse().unwrap();
        let ms = Duration::from_millis;
        assert_eq!(plan.at(ms(0)), ms(10));
        assert_eq!(plan.at(ms(11_999)), ms(10));
        assert_eq!(plan.at(ms(12_000)), ms(40));
        assert_eq!(plan.at(ms(30_000)), ms(10));
        assert_eq!(plan.to_string(), "10ms@0s,40ms@12s,10ms@24s");
        assert_eq!(plan.scaled(0.5).at(ms(6_000)), ms(20));
    }

    #[test]
    fn exponential_plans_are_reproducible_and_keep_the_phase_mean() {
        let plan: ServicePlan = "exp(7):10ms@0s,40ms@12s".parse().unwrap();
        assert_eq!(plan.to_string(), "exp(7):10ms@0s,40ms@12s");
        let ms = Duration::from_millis;
        assert_eq!(plan.service_time(ms(0), 3), plan.service_time(ms(0), 3));
        let mean = |at| {
            (0..20_000)
                .map(|n| plan.service_time(at, n).as_secs_f64())
                .sum::<f64>()
                / 20_000.0
        };
        assert!((mean(ms(0)) - 0.010).abs() < 0.0005);
        assert!((mean(ms(12_000)) - 0.040).abs() < 0.002);
        assert_eq!(
            "10ms@0s"
                .parse::<ServicePlan>()
                .unwrap()
                .service_time(ms(5), 9),
            ms(10)
        );
        assert!("exp(x):10ms@0s".parse::<ServicePlan>().is_err());
        let precise: ServicePlan = "precise:exp(7):10ms@0s".parse().unwrap();
        assert_eq!(precise.to_string(), "precise:exp(7):10ms@0s");
    }

    #[test]
    fn bad_plans_are_refused_with_a_reason() {
        for bad in ["40ms@12s", "10ms", "10ms@0s,40ms@12s,10ms@6s", "ten@0s"] {
            assert!(bad.parse::<ServicePlan>().is_err(), "{bad}");
        }
    }
}
