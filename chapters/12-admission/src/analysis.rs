//! The analysis, as frozen in the contract: pure functions from the runs'
//! records to the numbers in the report. Times are seconds on the plan's clock
//! (0 = the first call's arrival), multiplied by the run's time scale.

use std::collections::BTreeMap;

pub use perf::stats::{median, nearest_rank};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::{Deserialize, Serialize};

/// One processed message, on the plan's clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Message {
    pub enqueued_s: f64,
    /// Enqueue to dequeue (queue residence), in milliseconds, as the server
    /// recorded it.
    pub queue_ms: f64,
    /// When its service ended.
    pub end_s: f64,
}

/// The windows of the analysis (Part 2's, times the scale).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Windows {
    /// Healthy baseline: messages enqueued in [0, slow_from).
    pub slow_from: f64,
    /// Slowdown-only cohort: [slow_from, slow_to).
    pub slow_to: f64,
    /// End of the offered interval; the pooled cohort is [slow_from, end).
    pub end: f64,
    /// Recovery windows: `recovery_len` long, starting every `recovery_step`
    /// from `slow_to`, ending no later than `end`.
    pub recovery_len: f64,
    pub recovery_step: f64,
}

impl Windows {
    pub fn seed(scale: f64) -> Windows {
        Windows {
            slow_from: 12.0 * scale,
            slow_to: 24.0 * scale,
            end: 36.0 * scale,
            recovery_len: 3.0 * scale,
            recovery_step: 0.2 * scale,
        }
    }
}

/// Queue residences (ms) of messages enqueued in `[from, to)`.
pub fn residences(messages: &[Message], from: f64, to: f64) -> Vec<f64> {
    messages
        .iter()
        .filter(|m| m.enqueued_s >= from && m.enqueued_s < to)
        .map(|m| m.queue_ms)
        .collect()
}

/// Service completions per second in `[from, to)`.
pub fn completion_rate(messages: &[Message], from: f64, to: f64) -> f64 {
    let n = messages
        .iter()
        .filter(|m| m.end_s >= from && m.end_s < to)
        .count();
    n as f64 / (to - from)
}

/// How a run came back to health after the slowdown.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Recovery {
    /// p95 queue residence of messages enqueued in the healthy window.
    pub baseline_p95_ms: f64,
    /// Completions per second in the healthy window.
    pub baseline_rate: f64,
    /// From the end of the slowdown to the end of the first qualifying
    /// window (so at least one window long); `None`: censored, no window
    /// qualified before the offered interval ended.
    pub delay_s: Option<f64>,
}

// ANCHOR: recovery
/// The first window after the slowdown whose p95 is at most the run's own
/// healthy baseline and whose completion rate is at least 95% of it. The
/// baseline is the healthy phase before the slowdown, `[0, slow_from)`.
pub fn recovery(messages: &[Message], w: &Windows) -> Recovery {
    let baseline_p95_ms =
        nearest_rank(&residences(messages, 0.0, w.slow_from), 95.0).unwrap_or(0.0);
    let baseline_rate = completion_rate(messages, 0.0, w.slow_from);
    let mut delay_s = None;
    let mut k = 0;
    loop {
        let from = w.slow_to + k as f64 * w.recovery_step;
        let to = from + w.recovery_len;
        if to > w.end + 1e-9 {
            break;
        }
        let p95 = nearest_rank(&residences(messages, from, to), 95.0);
        let rate = completion_rate(messages, from, to);
        if p95.is_some_and(|p| p <= baseline_p95_ms) && rate >= 0.95 * baseline_rate {
            delay_s = Some(to - w.slow_to);
            break;
        }
        k += 1;
    }
    Recovery {
        baseline_p95_ms,
        baseline_rate,
        delay_s,
    }
}
// ANCHOR_END: recovery

/// What the analysis needs from one valid run.
#[derive(Debug, Clone)]
pub struct Run {
    pub block: usize,
    pub policy: String,
    /// Position within its block (0 = first).
    pub position: usize,
    pub messages: Vec<Message>,
    pub scheduled: u64,
    pub skipped: u64,
    pub longest_send_ms: f64,
    pub idle_with_backlog_ms: f64,
    pub workers: usize,
    /// (seconds on the plan's clock, budget after the change)
    pub budget: Vec<(f64, usize)>,
    pub start_budget: usize,
    pub call_s: f64,
}

/// Percentiles of one cohort.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cohort {
    pub n: usize,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

impl Cohort {
    pub fn of(values: &[f64]) -> Cohort {
        Cohort {
            n: values.len(),
            p95_ms: nearest_rank(values, 95.0),
            p99_ms: nearest_rank(values, 99.0),
        }
    }
}

/// One run's row of the per-run table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRow {
    pub block: usize,
    pub policy: String,
    pub position: usize,
    pub pooled: Cohort,
    pub slowdown: Cohort,
    pub scheduled: u64,
    pub skipped: u64,
    pub longest_send_ms: f64,
    pub completions_per_s: f64,
    pub idle_with_backlog_fraction: f64,
    pub recovery: Recovery,
    pub budget_changes: usize,
    /// Every change: (seconds on the plan's clock, the new budget).
    pub trajectory: Vec<(f64, usize)>,
    pub min_budget: usize,
    pub final_budget: usize,
    pub call_s: f64,
}

pub fn run_row(run: &Run, w: &Windows) -> RunRow {
    let budgets = || std::iter::once(run.start_budget).chain(run.budget.iter().map(|b| b.1));
    RunRow {
        block: run.block,
        policy: run.policy.clone(),
        position: run.position,
        pooled: Cohort::of(&residences(&run.messages, w.slow_from, w.end)),
        slowdown: Cohort::of(&residences(&run.messages, w.slow_from, w.slow_to)),
        scheduled: run.scheduled,
        skipped: run.skipped,
        longest_send_ms: run.longest_send_ms,
        completions_per_s: completion_rate(&run.messages, 0.0, w.end),
        idle_with_backlog_fraction: run.idle_with_backlog_ms
            / (w.end * 1e3 * run.workers.max(1) as f64),
        recovery: recovery(&run.messages, w),
        budget_changes: run.budget.len(),
        trajectory: run.budget.clone(),
        min_budget: budgets().min().unwrap_or(0),
        final_budget: budgets().last().unwrap_or(0),
        call_s: run.call_s,
    }
}

/// A point estimate with its block-bootstrap 95% interval, in percent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub point: f64,
    pub low: f64,
    pub high: f64,
}

/// `100 x (1 - value / reference)`: how much lower `value` is, in percent.
pub fn reduction(value: f64, reference: f64) -> f64 {
    100.0 * (1.0 - value / reference)
}

// ANCHOR: bootstrap
/// Block bootstrap of the reduction in pooled p95 of `policy` against
/// `reference`. `blocks[i]` maps each policy to the residences of its run in
/// block `i`. Each resample draws whole blocks with replacement, so a
/// policy and its reference always come from the same blocks (the pairing is
/// kept); the interval is the 2.5th to 97.5th percentile of the resamples.
pub fn bootstrap_reduction(
    blocks: &[BTreeMap<String, Vec<f64>>],
    policy: &str,
    reference: &str,
    resamples: usize,
    seed: u64,
) -> Option<Interval> {
    let pooled_p95 = |chosen: &[usize], name: &str| -> Option<f64> {
        let values: Vec<f64> = chosen
            .iter()
            .flat_map(|&b| blocks[b].get(name).into_iter().flatten().copied())
            .collect();
        nearest_rank(&values, 95.0)
    };
    let all: Vec<usize> = (0..blocks.len()).collect();
    let point = reduction(pooled_p95(&all, policy)?, pooled_p95(&all, reference)?);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut draws = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let chosen: Vec<usize> = (0..blocks.len())
            .map(|_| rng.random_range(0..blocks.len()))
            .collect();
        if let (Some(v), Some(r)) = (pooled_p95(&chosen, policy), pooled_p95(&chosen, reference)) {
            draws.push(reduction(v, r));
        }
    }
    draws.sort_by(f64::total_cmp);
    let at = |q: f64| draws[((q * draws.len() as f64).ceil() as usize).clamp(1, draws.len()) - 1];
    (!draws.is_empty()).then(|| Interval {
        point,
        low: at(0.025),
        high: at(0.975),
    })
}
// ANCHOR_END: bootstrap

/// One policy over all its runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PolicySummary {
    pub policy: String,
    /// Valid runs of this policy, one per block.
    pub runs: usize,
    /// Queue residence of every message enqueued in the pooled window
    /// (slowdown and recovery), all runs together.
    pub pooled: Cohort,
    /// The same for the slowdown window alone.
    pub slowdown: Cohort,
    /// The median over runs of each run's own p95, pooled and slowdown.
    pub median_run_pooled_p95_ms: Option<f64>,
    pub median_run_slowdown_p95_ms: Option<f64>,
    /// Reductions of pooled (12-36 s) p95.
    pub pooled_vs_fixed32: Option<Interval>,
    pub pooled_vs_fixed8: Option<Interval>,
    /// Reductions of slowdown-only (12-24 s) p95.
    pub slowdown_vs_fixed32: Option<Interval>,
    pub slowdown_vs_fixed8: Option<Interval>,
    /// Slots the client never sent, median over runs.
    pub median_skipped: Option<f64>,
    /// Each run's longest client send, in run order.
    pub longest_send_ms: Vec<f64>,
    pub median_completions_per_s: Option<f64>,
    /// Mean completions/s over the blocks this policy shares with fixed-32,
    /// divided by fixed-32's mean over the same blocks.
    pub throughput_vs_fixed32: Option<f64>,
    /// The same against fixed-8.
    #[serde(default)]
    pub throughput_vs_fixed8: Option<f64>,
    pub mean_idle_with_backlog_fraction: f64,
    /// Mean over the shared blocks of (this policy's idle-with-backlog
    /// fraction - fixed-32's), in percentage points.
    #[serde(default)]
    pub idle_vs_fixed32_pp: Option<f64>,
    /// Mean whole-call duration over the shared blocks / fixed-32's.
    #[serde(default)]
    pub call_vs_fixed32: Option<f64>,
    /// Recovery delays by block (`None`: censored).
    pub recovery_s: Vec<Option<f64>>,
    pub recovered: usize,
    /// Blocks in which both this policy and fixed-32 recovered (an
    /// uncensored pair), and in how many of them this policy was sooner.
    #[serde(default)]
    pub recovery_pairs_vs_fixed32: usize,
    #[serde(default)]
    pub recovered_sooner_than_fixed32: usize,
}

/// Everything the report shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Analysis {
    pub windows: Windows,
    pub blocks: usize,
    pub runs: Vec<RunRow>,
    pub policies: Vec<PolicySummary>,
}

pub const FIXED32: &str = "fixed-32";
pub const FIXED8: &str = "fixed-8";

pub fn analyse(
    runs: &[Run],
    policies: &[String],
    w: &Windows,
    resamples: usize,
    seed: u64,
) -> Analysis {
    let rows: Vec<RunRow> = runs.iter().map(|r| run_row(r, w)).collect();
    let mut block_ids: Vec<usize> = runs.iter().map(|r| r.block).collect();
    block_ids.sort_unstable();
    block_ids.dedup();
    let cohort_blocks = |from: f64, to: f64| -> Vec<BTreeMap<String, Vec<f64>>> {
        block_ids
            .iter()
            .map(|b| {
                runs.iter()
                    .filter(|r| r.block == *b)
                    .map(|r| (r.policy.clone(), residences(&r.messages, from, to)))
                    .collect()
            })
            .collect()
    };
    let pooled_blocks = cohort_blocks(w.slow_from, w.end);
    let slowdown_blocks = cohort_blocks(w.slow_from, w.slow_to);
    let summaries = policies
        .iter()
        .map(|p| {
            let mine: Vec<&Run> = runs.iter().filter(|r| &r.policy == p).collect();
            let my_rows: Vec<&RunRow> = rows.iter().filter(|r| &r.policy == p).collect();
            let pool = |from, to| -> Vec<f64> {
                mine.iter()
                    .flat_map(|r| residences(&r.messages, from, to))
                    .collect()
            };
            let boot = |blocks: &[BTreeMap<String, Vec<f64>>], reference: &str| {
                if p == reference || !policies.iter().any(|q| q == reference) {
                    return None;
                }
                bootstrap_reduction(blocks, p, reference, resamples, seed)
            };
            let per =
                |f: &dyn Fn(&RunRow) -> f64| -> Vec<f64> { my_rows.iter().map(|r| f(r)).collect() };
            // (this policy's figure, the reference's) in each block they share
            let paired = |reference: &str, f: fn(&RunRow) -> f64| -> Vec<(f64, f64)> {
                my_rows
                    .iter()
                    .filter_map(|r| {
                        rows.iter()
                            .find(|o| o.block == r.block && o.policy == reference)
                            .map(|o| (f(r), f(o)))
                    })
                    .collect()
            };
            let ratio_of_means = |pairs: Vec<(f64, f64)>| {
                let sum = |f: fn(&(f64, f64)) -> f64| pairs.iter().map(f).sum::<f64>();
                (!pairs.is_empty()).then(|| sum(|p| p.0) / sum(|p| p.1))
            };
            let recovery_pairs: Vec<(f64, f64)> = my_rows
                .iter()
                .filter_map(|r| {
                    let f = rows
                        .iter()
                        .find(|o| o.block == r.block && o.policy == FIXED32)?;
                    Some((r.recovery.delay_s?, f.recovery.delay_s?))
                })
                .collect();
            PolicySummary {
                policy: p.clone(),
                runs: mine.len(),
                pooled: Cohort::of(&pool(w.slow_from, w.end)),
                slowdown: Cohort::of(&pool(w.slow_from, w.slow_to)),
                median_run_pooled_p95_ms: median(
                    &my_rows
                        .iter()
                        .filter_map(|r| r.pooled.p95_ms)
                        .collect::<Vec<_>>(),
                ),
                median_run_slowdown_p95_ms: median(
                    &my_rows
                        .iter()
                        .filter_map(|r| r.slowdown.p95_ms)
                        .collect::<Vec<_>>(),
                ),
                pooled_vs_fixed32: boot(&pooled_blocks, FIXED32),
                pooled_vs_fixed8: boot(&pooled_blocks, FIXED8),
                slowdown_vs_fixed32: boot(&slowdown_blocks, FIXED32),
                slowdown_vs_fixed8: boot(&slowdown_blocks, FIXED8),
                median_skipped: median(&per(&|r| r.skipped as f64)),
                longest_send_ms: per(&|r| r.longest_send_ms),
                median_completions_per_s: median(&per(&|r| r.completions_per_s)),
                throughput_vs_fixed32: ratio_of_means(paired(FIXED32, |r| r.completions_per_s)),
                throughput_vs_fixed8: ratio_of_means(paired(FIXED8, |r| r.completions_per_s)),
                mean_idle_with_backlog_fraction: {
                    let v = per(&|r| r.idle_with_backlog_fraction);
                    v.iter().sum::<f64>() / v.len().max(1) as f64
                },
                idle_vs_fixed32_pp: {
                    let pairs = paired(FIXED32, |r| r.idle_with_backlog_fraction);
                    (!pairs.is_empty()).then(|| {
                        100.0 * pairs.iter().map(|p| p.0 - p.1).sum::<f64>() / pairs.len() as f64
                    })
                },
                call_vs_fixed32: ratio_of_means(paired(FIXED32, |r| r.call_s)),
                recovery_s: my_rows.iter().map(|r| r.recovery.delay_s).collect(),
                recovered: my_rows
                    .iter()
                    .filter(|r| r.recovery.delay_s.is_some())
                    .count(),
                recovery_pairs_vs_fixed32: recovery_pairs.len(),
                recovered_sooner_than_fixed32: recovery_pairs.iter().filter(|p| p.0 < p.1).count(),
            }
        })
        .collect();
    Analysis {
        windows: *w,
        blocks: block_ids.len(),
        runs: rows,
        policies: summaries,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(enqueued_s: f64, queue_ms: f64, service_ms: f64) -> Message {
        Message {
            enqueued_s,
            queue_ms,
            end_s: enqueued_s + (queue_ms + service_ms) / 1e3,
        }
    }

    #[test]
    fn cohorts_are_chosen_by_enqueue_time() {
        let m = [
            msg(11.9, 5.0, 10.0),
            msg(12.0, 100.0, 40.0),
            msg(23.99, 700.0, 40.0),
            msg(24.0, 30.0, 10.0),
            msg(36.0, 1.0, 10.0),
        ];
        assert_eq!(residences(&m, 12.0, 24.0), vec![100.0, 700.0]);
        assert_eq!(residences(&m, 12.0, 36.0).len(), 3);
        let c = Cohort::of(&residences(&m, 12.0, 36.0));
        assert_eq!((c.n, c.p95_ms, c.p99_ms), (3, Some(700.0), Some(700.0)));
    }

    /// A run at 10 messages/s (one every 100 ms): residence 2 ms while
    /// healthy, 500 ms in the slowdown, then `tail` ms from `settle` s on.
    fn run(settle: f64, tail_ms: f64) -> Vec<Message> {
        (0..360)
            .map(|i| {
                let t = i as f64 * 0.1;
                let q = if t < 12.0 {
                    2.0
                } else if t < settle {
                    500.0
                } else {
                    tail_ms
                };
                msg(t, q, 10.0)
            })
            .collect()
    }

    #[test]
    fn recovery_is_the_first_qualifying_window_or_censored() {
        let w = Windows::seed(1.0);
        // Healthy again from 26 s: the first window wholly after it, [26, 29),
        // starts 2.0 s after 24 -> delay 5.0 s (window included).
        let r = recovery(&run(26.0, 1.0), &w);
        assert_eq!(r.baseline_p95_ms, 2.0);
        assert!((r.baseline_rate - 10.0).abs() < 0.2);
        assert!((r.delay_s.unwrap() - 5.0).abs() < 1e-6, "{r:?}");
        // Residence stays above the baseline: censored.
        assert_eq!(recovery(&run(26.0, 3.0), &w).delay_s, None);
        // Healthy from 24 s: the very first window qualifies, 3 s.
        assert!((recovery(&run(24.0, 2.0), &w).delay_s.unwrap() - 3.0).abs() < 1e-6);
    }

    #[test]
    fn a_window_with_too_few_completions_does_not_qualify() {
        let w = Windows::seed(1.0);
        // After 24 s only every other message: half the baseline rate.
        let m: Vec<Message> = run(24.0, 1.0)
            .into_iter()
            .enumerate()
            .filter(|(i, m)| m.enqueued_s < 24.0 || i % 2 == 0)
            .map(|(_, m)| m)
            .collect();
        assert_eq!(recovery(&m, &w).delay_s, None);
    }

    #[test]
    fn completion_rate_counts_service_ends() {
        let m = [
            msg(0.0, 0.0, 10.0),
            msg(0.5, 0.0, 10.0),
            msg(1.995, 0.0, 10.0),
        ];
        // The last ends at 2.005 s: outside [0, 2).
        assert_eq!(completion_rate(&m, 0.0, 2.0), 1.0);
    }

    #[test]
    fn block_bootstrap_keeps_pairs_and_brackets_the_point() {
        // Two blocks. Block 0: a = 10 x 100 ms, b = 10 x 50 ms.
        // Block 1: a = 10 x 200 ms, b = 10 x 100 ms. Either block alone,
        // and any mix, gives b half of a: every resample says 50%.
        let block = |a: f64, b: f64| -> BTreeMap<String, Vec<f64>> {
            [
                ("a".to_string(), vec![a; 10]),
                ("b".to_string(), vec![b; 10]),
            ]
            .into()
        };
        let blocks = [block(100.0, 50.0), block(200.0, 100.0)];
        let i = bootstrap_reduction(&blocks, "b", "a", 200, 1).unwrap();
        // Pooled: a p95 = 200, b p95 = 100 -> 50%.
        assert_eq!((i.point, i.low, i.high), (50.0, 50.0, 50.0));
        // Unpaired differences show up as a spread: in block 1 b is no better.
        let blocks = [block(100.0, 50.0), block(200.0, 200.0)];
        let i = bootstrap_reduction(&blocks, "b", "a", 500, 1).unwrap();
        assert_eq!(i.point, 0.0);
        assert_eq!((i.low, i.high), (0.0, 50.0));
        assert!(bootstrap_reduction(&blocks, "c", "a", 10, 1).is_none());
    }

    #[test]
    fn analyse_summarises_policies_and_pairs_throughput() {
        let w = Windows::seed(1.0);
        let mk = |block, policy: &str, settle| Run {
            block,
            policy: policy.into(),
            position: 0,
            messages: run(settle, 1.0),
            scheduled: 360,
            skipped: 10 * block as u64,
            longest_send_ms: 40.0,
            idle_with_backlog_ms: 360.0,
            workers: 1,
            budget: vec![(13.0, 8), (14.0, 4)],
            start_budget: 16,
            call_s: 36.3,
        };
        let runs = [
            mk(0, FIXED32, 30.0),
            mk(0, "adaptive", 26.0),
            mk(1, FIXED32, 40.0),
            mk(1, "adaptive", 26.0),
        ];
        let a = analyse(&runs, &[FIXED32.into(), "adaptive".into()], &w, 100, 1);
        assert_eq!(a.blocks, 2);
        assert_eq!(a.runs.len(), 4);
        let ad = &a.policies[1];
        assert_eq!(ad.runs, 2);
        assert_eq!(ad.recovered, 2);
        assert_eq!(
            a.policies[0].recovery_s[1], None,
            "fixed-32 of block 1 never settles"
        );
        // Completions in [0, 36 s): adaptive 360 + 360; fixed-32 360 + 355
        // (block 1's last five messages, enqueued 35.5-35.9 s, wait 500 ms
        // and end after 36 s). Ratio of the paired means: 720 / 715.
        assert_eq!(ad.throughput_vs_fixed32, Some(720.0 / 715.0));
        assert_eq!(ad.median_skipped, Some(5.0));
        assert!((ad.mean_idle_with_backlog_fraction - 0.01).abs() < 1e-9);
        assert_eq!(
            (
                a.runs[1].min_budget,
                a.runs[1].final_budget,
                a.runs[1].budget_changes
            ),
            (4, 4, 2)
        );
        assert!(ad.pooled_vs_fixed32.is_some() && ad.pooled_vs_fixed8.is_none());
        assert!(a.policies[0].pooled_vs_fixed32.is_none());
    }
}
