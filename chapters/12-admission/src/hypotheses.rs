//! Part 2's four hypotheses, decided for each policy by the rules the
//! contract froze (`Contract::hypotheses`). Part 2's point was that they are
//! separate questions, not one pass/fail badge: a policy can win the primary
//! endpoint and still lose on the tail, on upstream waiting or on recovery,
//! so each gets its own verdict and the figures that decide it.

use crate::analysis::{Analysis, FIXED8, FIXED32, PolicySummary};

/// How one hypothesis came out for one policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Met,
    NotMet,
    /// The figures do not decide it under the frozen rule.
    Undecided,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::NotMet => "not met",
            Verdict::Undecided => "undecided",
        }
    }
}

/// A verdict and the figures behind it, in words.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub verdict: Verdict,
    pub figures: String,
}

impl Finding {
    pub fn cell(&self) -> String {
        format!("{}: **{}**", self.figures, self.verdict.word())
    }
}

/// 1. Pooled p95 at least 20% lower than fixed-32's, judged on the whole
///    bootstrap interval.
pub fn primary(p: &PolicySummary) -> Option<Finding> {
    let i = p.pooled_vs_fixed32?;
    let verdict = if i.low >= 20.0 {
        Verdict::Met
    } else if i.point < 20.0 {
        Verdict::NotMet
    } else {
        Verdict::Undecided
    };
    Some(Finding {
        verdict,
        figures: format!("{:.1}% [{:.1}, {:.1}] lower", i.point, i.low, i.high),
    })
}

/// 2. Throughput at least 95% of fixed-32's, without materially more idle
///    time with a backlog. "Materially" has no frozen margin, so any increase
///    leaves the hypothesis undecided rather than met.
pub fn throughput(p: &PolicySummary) -> Option<Finding> {
    let ratio = p.throughput_vs_fixed32?;
    let idle = p.idle_vs_fixed32_pp?;
    let verdict = if ratio < 0.95 {
        Verdict::NotMet
    } else if idle > 0.0 {
        Verdict::Undecided
    } else {
        Verdict::Met
    };
    Some(Finding {
        verdict,
        figures: format!("{:.2}%, idle with backlog {idle:+.3} pts", 100.0 * ratio),
    })
}

/// 3. Recovers, keeps the whole call within 110% of fixed-32's, and (for an
///    advantage) recovers sooner in every block, each pair uncensored.
pub fn recovery(p: &PolicySummary, blocks: usize) -> Option<Finding> {
    let call = p.call_vs_fixed32?;
    let pairs = p.recovery_pairs_vs_fixed32;
    let sooner = p.recovered_sooner_than_fixed32;
    let verdict = if call > 1.10 || p.recovered == 0 {
        Verdict::NotMet
    } else if pairs == blocks && sooner == blocks {
        Verdict::Met
    } else {
        Verdict::Undecided
    };
    Some(Finding {
        verdict,
        figures: format!(
            "recovered {}/{}, sooner than fixed-32 in {sooner} of {pairs} uncensored pairs, call {:.1}%",
            p.recovered,
            p.runs,
            100.0 * call
        ),
    })
}

// ANCHOR: added_value
/// 4. Added value against fixed-8: each measure on its own, a difference
///    counting only beyond the frozen margins. Met if better somewhere and
///    worse nowhere, not met if worse somewhere and better nowhere, a
///    trade-off (undecided: no weighted score was frozen) otherwise.
pub fn added_value(p: &PolicySummary, fixed8: &PolicySummary) -> Option<Finding> {
    if p.policy == FIXED8 {
        return None;
    }
    let (mut better, mut worse) = (Vec::new(), Vec::new());
    let mut judge = |name: &'static str, is_better: bool, is_worse: bool| {
        if is_better {
            better.push(name);
        } else if is_worse {
            worse.push(name);
        }
    };
    // A p95 reduction counts when its interval excludes zero.
    for (name, i) in [
        ("pooled p95", p.pooled_vs_fixed8),
        ("slowdown p95", p.slowdown_vs_fixed8),
    ] {
        if let Some(i) = i {
            judge(name, i.low > 0.0, i.high < 0.0);
        }
    }
    let worst = |s: &PolicySummary| s.longest_send_ms.iter().copied().fold(0.0, f64::max);
    if worst(fixed8) > 0.0 {
        let send = worst(p) / worst(fixed8);
        judge("longest send", send < 0.9, send > 1.1);
    }
    if let Some(t) = p.throughput_vs_fixed8 {
        judge("throughput", t > 1.01, t < 0.99);
    }
    let gained = p.recovered as i64 - fixed8.recovered as i64;
    judge("recovery", gained >= 2, gained <= -2);
    let verdict = match (better.is_empty(), worse.is_empty()) {
        (false, true) => Verdict::Met,
        (true, false) => Verdict::NotMet,
        _ => Verdict::Undecided,
    };
    let list = |v: &[&str]| match v {
        [] => "nothing".to_string(),
        v => v.join(", "),
    };
    Some(Finding {
        verdict,
        figures: format!("better: {}; worse: {}", list(&better), list(&worse)),
    })
}
// ANCHOR_END: added_value

/// Every policy but fixed-32, with its four findings (`None`: the analysis
/// lacks the reference it needs).
pub fn all(a: &Analysis) -> Vec<(String, [Option<Finding>; 4])> {
    let fixed8 = a.policies.iter().find(|p| p.policy == FIXED8);
    a.policies
        .iter()
        .filter(|p| p.policy != FIXED32)
        .map(|p| {
            (
                p.policy.clone(),
                [
                    primary(p),
                    throughput(p),
                    recovery(p, a.blocks),
                    fixed8.and_then(|f| added_value(p, f)),
                ],
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{Cohort, Interval};

    fn summary(policy: &str) -> PolicySummary {
        let none = Cohort {
            n: 0,
            p95_ms: None,
            p99_ms: None,
        };
        PolicySummary {
            policy: policy.into(),
            runs: 5,
            pooled: none,
            slowdown: none,
            median_run_pooled_p95_ms: None,
            median_run_slowdown_p95_ms: None,
            pooled_vs_fixed32: None,
            pooled_vs_fixed8: None,
            slowdown_vs_fixed32: None,
            slowdown_vs_fixed8: None,
            median_skipped: None,
            longest_send_ms: vec![40.0; 5],
            median_completions_per_s: None,
            throughput_vs_fixed32: Some(1.0),
            throughput_vs_fixed8: Some(1.0),
            mean_idle_with_backlog_fraction: 0.0,
            idle_vs_fixed32_pp: Some(0.0),
            call_vs_fixed32: Some(1.0),
            recovery_s: vec![],
            recovered: 5,
            recovery_pairs_vs_fixed32: 5,
            recovered_sooner_than_fixed32: 5,
        }
    }

    fn interval(point: f64, low: f64, high: f64) -> Option<Interval> {
        Some(Interval { point, low, high })
    }

    #[test]
    fn the_primary_endpoint_is_judged_on_the_whole_interval() {
        let mut p = summary("adaptive");
        p.pooled_vs_fixed32 = interval(87.6, 87.5, 87.7);
        assert_eq!(primary(&p).unwrap().verdict, Verdict::Met);
        p.pooled_vs_fixed32 = interval(25.0, 15.0, 30.0);
        assert_eq!(primary(&p).unwrap().verdict, Verdict::Undecided);
        p.pooled_vs_fixed32 = interval(19.0, 18.0, 30.0);
        assert_eq!(primary(&p).unwrap().verdict, Verdict::NotMet);
        p.pooled_vs_fixed32 = None;
        assert_eq!(primary(&p), None);
    }

    #[test]
    fn more_idle_time_leaves_throughput_undecided_and_low_throughput_fails() {
        let mut p = summary("adaptive");
        assert_eq!(throughput(&p).unwrap().verdict, Verdict::Met);
        p.idle_vs_fixed32_pp = Some(0.158);
        assert_eq!(throughput(&p).unwrap().verdict, Verdict::Undecided);
        p.throughput_vs_fixed32 = Some(0.94);
        assert_eq!(throughput(&p).unwrap().verdict, Verdict::NotMet);
    }

    #[test]
    fn a_recovery_advantage_needs_every_pair_uncensored() {
        let mut p = summary("adaptive");
        assert_eq!(recovery(&p, 5).unwrap().verdict, Verdict::Met);
        // Part 2's case: fixed-32 censored in two blocks.
        p.recovery_pairs_vs_fixed32 = 3;
        p.recovered_sooner_than_fixed32 = 3;
        assert_eq!(recovery(&p, 5).unwrap().verdict, Verdict::Undecided);
        p.call_vs_fixed32 = Some(1.2);
        assert_eq!(recovery(&p, 5).unwrap().verdict, Verdict::NotMet);
    }

    #[test]
    fn added_value_lists_both_sides_and_calls_a_mix_a_trade_off() {
        let fixed8 = summary(FIXED8);
        assert_eq!(added_value(&fixed8, &fixed8), None);
        // Part 2's adaptive: a lower pooled p95, a far higher slowdown p95
        // and longest send.
        let mut p = summary("adaptive");
        p.pooled_vs_fixed8 = interval(50.3, 50.2, 50.4);
        p.slowdown_vs_fixed8 = interval(-98.2, -98.8, -97.8);
        p.longest_send_ms = vec![196.0, 198.0];
        let f = added_value(&p, &fixed8).unwrap();
        assert_eq!(f.verdict, Verdict::Undecided);
        assert_eq!(
            f.figures,
            "better: pooled p95; worse: slowdown p95, longest send"
        );
        // Better on both p95s and nowhere worse.
        p.slowdown_vs_fixed8 = interval(70.0, 69.0, 71.0);
        p.longest_send_ms = vec![41.0];
        assert_eq!(added_value(&p, &fixed8).unwrap().verdict, Verdict::Met);
        // Differences inside the margins do not count either way.
        let mut q = summary("fixed-4");
        q.pooled_vs_fixed8 = interval(1.0, -2.0, 3.0);
        q.throughput_vs_fixed8 = Some(0.995);
        q.recovered = 4;
        let f = added_value(&q, &fixed8).unwrap();
        assert_eq!(
            (f.verdict, f.figures.as_str()),
            (Verdict::Undecided, "better: nothing; worse: nothing")
        );
        q.throughput_vs_fixed8 = Some(0.9);
        assert_eq!(added_value(&q, &fixed8).unwrap().verdict, Verdict::NotMet);
    }
}
