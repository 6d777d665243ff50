//! The report's tables: our figures beside Part 2's, and the per-run rows.
//! Tables and figures only; what they mean is said in the chapter.
//!
//! It is longer than the other files of this crate (about 590 lines) because
//! it holds Part 2's published figures beside every table of ours; split by
//! table, one page of output would be spread over several files.

use std::fmt::Write as _;

use harness::report::table;
use serde::{Deserialize, Serialize};

use crate::{
    analysis::{Analysis, Cohort, Interval, PolicySummary},
    contract::Contract,
    hypotheses,
    records::Attempt,
};

/// Part 2's published figures for one policy (five blocks, scale 1).
#[derive(Debug, Clone, Copy)]
pub struct SeedFigures {
    pub pooled_p95: f64,
    pub pooled_p99: f64,
    pub pooled_n: usize,
    pub slowdown_p95: f64,
    pub slowdown_p99: f64,
    pub median_skipped: f64,
    pub longest_send: &'static str,
    pub completions_per_s: f64,
    pub recovered: &'static str,
}

pub fn seed_figures(policy: &str) -> Option<SeedFigures> {
    match policy {
        "fixed-32" => Some(SeedFigures {
            pooled_p95: 1321.235,
            pooled_p99: 1325.096,
            pooled_n: 6439,
            slowdown_p95: 1324.535,
            slowdown_p99: 1330.429,
            median_skipped: 630.0,
            longest_send: "<= 46",
            completions_per_s: 62.5,
            recovered: "3/5",
        }),
        "fixed-8" => Some(SeedFigures {
            pooled_p95: 330.739,
            pooled_p99: 332.546,
            pooled_n: 6312,
            slowdown_p95: 332.431,
            slowdown_p99: 333.658,
            median_skipped: 655.0,
            longest_send: "<= 46",
            completions_per_s: 61.806,
            recovered: "4/5",
        }),
        "adaptive" => Some(SeedFigures {
            pooled_p95: 164.863,
            pooled_p99: 658.698,
            pooled_n: 6302,
            slowdown_p95: 657.598,
            slowdown_p99: 661.579,
            median_skipped: 660.0,
            longest_send: "359-370",
            completions_per_s: 61.667,
            recovered: "5/5",
        }),
        _ => None,
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

/// Part 2's figures as a run at `scale` should see them: times x scale,
/// rates / scale (counts unchanged).
pub fn seed_at(policy: &str, scale: f64) -> Option<SeedFigures> {
    seed_figures(policy).map(|f| SeedFigures {
        pooled_p95: f.pooled_p95 * scale,
        pooled_p99: f.pooled_p99 * scale,
        slowdown_p95: f.slowdown_p95 * scale,
        slowdown_p99: f.slowdown_p99 * scale,
        completions_per_s: f.completions_per_s / scale,
        ..f
    })
}

fn seed_ms(policy: &str, scale: f64, f: fn(&SeedFigures) -> f64) -> String {
    seed_at(policy, scale).map_or("-".into(), |s| format!("{:.1}", f(&s)))
}

fn interval(i: Option<Interval>) -> String {
    i.map_or("-".into(), |i| {
        format!("{:.1}% [{:.1}, {:.1}]", i.point, i.low, i.high)
    })
}

/// Seconds of recovery, or the censoring bound.
fn recovery_cell(delay: Option<f64>, max: f64) -> String {
    delay.map_or(format!("> {max:.1} s, censored"), |d| format!("{d:.1} s"))
}

pub fn find<'a>(a: &'a Analysis, policy: &str) -> Option<&'a PolicySummary> {
    a.policies.iter().find(|p| p.policy == policy)
}

/// One line per policy: the two p95s that make the reversal, ours and Part 2's.
pub fn headline(c: &Contract, a: &Analysis) -> String {
    let scale = c.scale;
    let mut out = format!(
        "{:<10} {:>25} {:>25}   (ms; time scale {})\n",
        "policy", "pooled p95 12-36 s", "slowdown p95 12-24 s", c.scale
    );
    for p in &a.policies {
        let _ = writeln!(
            out,
            "{:<10} {:>10} (Part 2: {:>8}) {:>8} (Part 2: {:>8})",
            p.policy,
            ms(p.pooled.p95_ms),
            seed_ms(&p.policy, scale, |s| s.pooled_p95),
            ms(p.slowdown.p95_ms),
            seed_ms(&p.policy, scale, |s| s.slowdown_p95),
        );
    }
    out
}

/// The acceptance checks, stated with the numbers that decide them.
pub fn acceptance(c: &Contract, a: &Analysis) -> Vec<String> {
    let mut lines = Vec::new();
    let p95 = |p: &str| find(a, p).and_then(|s| s.pooled.p95_ms);
    let slow = |p: &str| find(a, p).and_then(|s| s.slowdown.p95_ms);
    for (policy, seed) in [
        ("fixed-32", 1321.235 * c.scale),
        ("fixed-8", 330.739 * c.scale),
    ] {
        if let Some(v) = p95(policy) {
            let off = 100.0 * (v / seed - 1.0);
            lines.push(format!(
                "{policy} pooled p95 {v:.1} ms vs Part 2's {seed:.1} ms: {off:+.1}% ({})",
                if off.abs() <= 10.0 {
                    "within 10%"
                } else {
                    "OUTSIDE 10%"
                }
            ));
        }
    }
    if let (Some(ap), Some(fp), Some(asl), Some(fsl)) = (
        p95("adaptive"),
        p95("fixed-8"),
        slow("adaptive"),
        slow("fixed-8"),
    ) {
        let reversal = ap < fp && asl > fsl;
        lines.push(format!(
            "reversal: adaptive pooled p95 {ap:.1} {} fixed-8's {fp:.1}, slowdown p95 {asl:.1} {} fixed-8's {fsl:.1}: {}",
            if ap < fp { "<" } else { ">=" },
            if asl > fsl { ">" } else { "<=" },
            if reversal { "Part 2's reversal holds" } else { "NO reversal" }
        ));
    }
    if let (Some(t), Some(fsl)) = (find(a, "target"), slow("fixed-8")) {
        let tsl = t.slowdown.p95_ms.unwrap_or(f64::INFINITY);
        let thr = t.throughput_vs_fixed32.unwrap_or(0.0);
        lines.push(format!(
            "target: slowdown p95 {tsl:.1} ms vs fixed-8's {fsl:.1} ms ({}), throughput {:.2}% of fixed-32 ({})",
            if tsl < fsl { "better" } else { "not better" },
            100.0 * thr,
            if thr >= 0.95 { "within 5%" } else { "loses more than 5%" }
        ));
    }
    lines
}

/// One cohort's queue residence per policy, ours beside Part 2's: `pick`
/// chooses the cohort (and the median of its per-run p95s), `seed` the
/// seed's p95, p99 and message count for it.
fn cohort_table(
    o: &mut String,
    enqueued: &str,
    a: &Analysis,
    scale: f64,
    pick: impl Fn(&PolicySummary) -> (&Cohort, Option<f64>),
    seed: fn(&SeedFigures) -> (f64, f64, Option<usize>),
) {
    let _ = writeln!(o, "**Queue residence (ms), enqueued {enqueued}**\n");
    table(
        o,
        &[
            "policy",
            "pooled p95",
            "Part 2",
            "pooled p99",
            "Part 2",
            "messages",
            "Part 2 (5 blocks)",
            "median of per-run p95",
        ],
        a.policies.iter().map(|p| {
            let (cohort, median) = pick(p);
            let seed = seed_at(&p.policy, scale).map(|f| seed(&f));
            let seed_ms =
                |v: Option<f64>| v.map_or("(not in Part 2)".into(), |v| format!("{v:.1}"));
            vec![
                p.policy.clone(),
                ms(cohort.p95_ms),
                seed_ms(seed.map(|s| s.0)),
                ms(cohort.p99_ms),
                seed_ms(seed.map(|s| s.1)),
                cohort.n.to_string(),
                seed.and_then(|s| s.2).map_or("-".into(), |n| n.to_string()),
                ms(median),
            ]
        }),
    );
}

/// The load averages the attempts started at, and whether the machine was
/// quiet (none above 0.5) enough for the run to go into the book.
fn load(ledger: &[Attempt]) -> String {
    let mut v: Vec<f64> = ledger.iter().filter_map(|a| a.loadavg_1m).collect();
    if v.is_empty() {
        return "not recorded".into();
    }
    v.sort_by(f64::total_cmp);
    let busy = v.iter().filter(|&&l| l > QUIET).count();
    format!(
        "median {:.2}, highest {:.2}: {}",
        v[v.len() / 2],
        v[v.len() - 1],
        if busy == 0 {
            "quiet".to_string()
        } else {
            format!("{busy} of {} above {QUIET}, not quiet", v.len())
        }
    )
}

/// The highest load average at which a run counts as made on a quiet machine.
pub const QUIET: f64 = 0.5;

/// How often each policy ran at each position of its block: a seeded shuffle
/// is random, not balanced, and a reader should see how unbalanced.
fn run_order(o: &mut String, c: &Contract) {
    let _ = writeln!(o, "**Run order: runs of each policy at each position**\n");
    let positions = c.policies.len();
    let mut header = vec!["policy".to_string()];
    header.extend((1..=positions).map(|i| format!("#{i}")));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    table(
        o,
        &header,
        c.policies.iter().map(|&p| {
            let mut row = vec![p.to_string()];
            row.extend((0..positions).map(|i| {
                c.order
                    .iter()
                    .filter(|block| block.get(i) == Some(&p))
                    .count()
                    .to_string()
            }));
            row
        }),
    );
}

/// The report: tables only, each under a bold caption that says what it holds
/// (a caption, not a heading: the chapter's page includes the report, and its
/// headings would land in the page's outline).
pub fn markdown(c: &Contract, a: &Analysis, ledger: &[Attempt]) -> String {
    let s = c.scale;
    let w = &a.windows;
    let invalid = ledger.iter().filter(|l| !l.valid).count();
    let mut o = String::new();
    let _ = writeln!(o, "**The run**\n");
    table(
        &mut o,
        &["", ""],
        [
            (
                "blocks x policies",
                format!("{} x {}", a.blocks, c.policies.len()),
            ),
            (
                "runs",
                format!(
                    "{} valid of {} attempts ({invalid} excluded)",
                    a.runs.len(),
                    ledger.len()
                ),
            ),
            ("time scale", s.to_string()),
            (
                "schedule",
                format!(
                    "{} slots at {}/s over {:.1} s",
                    c.slots, c.rate_per_s, c.duration_s
                ),
            ),
            ("service plan", format!("`{}`", c.plan)),
            (
                "K, streams, workers",
                format!("{}, {}, {}", c.capacity, c.streams, c.workers),
            ),
            ("message bytes", c.message_bytes.to_string()),
            (
                "build, machine",
                format!(
                    "{}, {} ({} CPUs)",
                    c.meta.build, c.meta.machine.cpu_model, c.meta.machine.cpus
                ),
            ),
            ("transport", c.transport.clone()),
            ("load average (1 min) at each attempt's start", load(ledger)),
        ]
        .into_iter()
        .map(|(k, v)| vec![k.to_string(), v]),
    );
    run_order(&mut o, c);
    let _ = writeln!(o, "**Checks**\n");
    table(
        &mut o,
        &["check"],
        acceptance(c, a).into_iter().map(|line| vec![line]),
    );
    let _ = writeln!(
        o,
        "**Part 2's four hypotheses, decided by the contract's rules**\n"
    );
    table(
        &mut o,
        &[
            "policy",
            "1. pooled p95 vs fixed-32 (>= 20% lower)",
            "2. throughput vs fixed-32 (>= 95%), idle with backlog",
            "3. recovery, whole call vs fixed-32 (<= 110%)",
            "4. against fixed-8",
        ],
        hypotheses::all(a).into_iter().map(|(policy, findings)| {
            let mut row = vec![policy];
            row.extend(
                findings
                    .iter()
                    .map(|f| f.as_ref().map_or("-".into(), |f| f.cell())),
            );
            row
        }),
    );
    cohort_table(
        &mut o,
        &format!("{:.1}-{:.1} s: slowdown and recovery", w.slow_from, w.end),
        a,
        s,
        |p| (&p.pooled, p.median_run_pooled_p95_ms),
        |f| (f.pooled_p95, f.pooled_p99, Some(f.pooled_n)),
    );
    cohort_table(
        &mut o,
        &format!("{:.1}-{:.1} s: slowdown only", w.slow_from, w.slow_to),
        a,
        s,
        |p| (&p.slowdown, p.median_run_slowdown_p95_ms),
        |f| (f.slowdown_p95, f.slowdown_p99, None),
    );
    let _ = writeln!(
        o,
        "**Reductions of p95 (%), with block-bootstrap 95% intervals (negative: higher)**\n"
    );
    let mut rows: Vec<Vec<String>> = a
        .policies
        .iter()
        .map(|p| {
            vec![
                p.policy.clone(),
                interval(p.pooled_vs_fixed32),
                interval(p.pooled_vs_fixed8),
                interval(p.slowdown_vs_fixed32),
                interval(p.slowdown_vs_fixed8),
            ]
        })
        .collect();
    rows.push(
        [
            "adaptive, Part 2",
            "87.52% [87.48, 87.56]",
            "50.15%",
            "-",
            "-",
        ]
        .map(String::from)
        .to_vec(),
    );
    table(
        &mut o,
        &[
            "policy",
            "pooled vs fixed-32",
            "pooled vs fixed-8",
            "slowdown vs fixed-32",
            "slowdown vs fixed-8",
        ],
        rows,
    );
    let _ = writeln!(o, "**Where the waiting went**\n");
    table(
        &mut o,
        &[
            "policy",
            "median skipped slots",
            "Part 2",
            "longest send per run (ms)",
            "Part 2",
            "completions/s (median)",
            "Part 2",
            "vs fixed-32",
            "Part 2",
            "idle with backlog",
        ],
        a.policies.iter().map(|p| {
            let f = seed_at(&p.policy, s);
            let sends: Vec<String> = p
                .longest_send_ms
                .iter()
                .map(|v| format!("{v:.0}"))
                .collect();
            vec![
                p.policy.clone(),
                p.median_skipped.map_or("-".into(), |v| format!("{v:.0}")),
                f.map_or("-".into(), |f| format!("{:.0}", f.median_skipped)),
                sends.join(", "),
                f.map_or("-".into(), |f| f.longest_send.to_string()),
                p.median_completions_per_s
                    .map_or("-".into(), |v| format!("{v:.3}")),
                f.map_or("-".into(), |f| format!("{:.3}", f.completions_per_s)),
                p.throughput_vs_fixed32
                    .map_or("-".into(), |v| format!("{:.2}%", 100.0 * v)),
                if p.policy == "adaptive" {
                    "98.80%"
                } else {
                    "-"
                }
                .to_string(),
                format!("{:.3}%", 100.0 * p.mean_idle_with_backlog_fraction),
            ]
        }),
    );
    let max = w.end - w.slow_to;
    let _ = writeln!(
        o,
        "**Recovery after {:.1} s (window included; censored: none qualified by {:.1} s)**\n",
        w.slow_to, w.end
    );
    let mut header = vec!["block"];
    header.extend(a.policies.iter().map(|p| p.policy.as_str()));
    let mut rows: Vec<Vec<String>> = (1..=a.blocks)
        .map(|b| {
            let mut row = vec![b.to_string()];
            row.extend(a.policies.iter().map(|p| {
                a.runs
                    .iter()
                    .find(|r| r.block == b && r.policy == p.policy)
                    .map_or("-".into(), |r| recovery_cell(r.recovery.delay_s, max))
            }));
            row
        })
        .collect();
    let mut recovered = vec!["recovered".to_string()];
    recovered.extend(a.policies.iter().map(|p| {
        let seed =
            seed_at(&p.policy, s).map_or(String::new(), |f| format!(" (Part 2: {})", f.recovered));
        format!("{}/{}{seed}", p.recovered, p.runs)
    }));
    rows.push(recovered);
    table(&mut o, &header, rows);
    let _ = writeln!(o, "**Budget trajectories, from the slowdown on**\n");
    table(
        &mut o,
        &[
            "block",
            "policy",
            "changes",
            "lowest B",
            "final B",
            "first changes",
        ],
        a.runs.iter().filter(|r| r.budget_changes > 0).map(|r| {
            vec![
                r.block.to_string(),
                r.policy.clone(),
                r.budget_changes.to_string(),
                r.min_budget.to_string(),
                r.final_budget.to_string(),
                r.trajectory
                    .iter()
                    .filter(|(t, _)| *t >= w.slow_from - 0.01)
                    .take(6)
                    .map(|(t, b)| format!("B={b} at {t:.1} s"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        }),
    );
    let _ = writeln!(o, "**Every run**\n");
    table(
        &mut o,
        &[
            "block",
            "#",
            "policy",
            "pooled p95",
            "slowdown p95",
            "skipped",
            "longest send",
            "completions/s",
            "recovery",
        ],
        a.runs.iter().map(|r| {
            vec![
                r.block.to_string(),
                r.position.to_string(),
                r.policy.clone(),
                ms(r.pooled.p95_ms),
                ms(r.slowdown.p95_ms),
                r.skipped.to_string(),
                format!("{:.0}", r.longest_send_ms),
                format!("{:.3}", r.completions_per_s),
                recovery_cell(r.recovery.delay_s, max),
            ]
        }),
    );
    o.truncate(o.trim_end().len());
    o.push('\n');
    o
}

/// One row of `runs.csv`: a run's figures, flat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunCsv {
    /// Which block, and where in the block's order the run came.
    pub block: usize,
    pub position: usize,
    pub policy: String,
    /// Messages in the pooled cohort, and their queue residence.
    pub pooled_n: usize,
    pub pooled_p95_ms: Option<f64>,
    pub pooled_p99_ms: Option<f64>,
    /// The same for the slowdown cohort.
    pub slowdown_n: usize,
    pub slowdown_p95_ms: Option<f64>,
    pub slowdown_p99_ms: Option<f64>,
    /// The client's side: slots, skips, its longest send.
    pub scheduled: u64,
    pub skipped: u64,
    pub longest_send_ms: f64,
    pub completions_per_s: f64,
    /// Share of the run the worker was idle while messages were queued.
    pub idle_with_backlog_fraction: f64,
    /// The healthy phase's p95 and completion rate, which recovery returns to.
    pub baseline_p95_ms: f64,
    pub baseline_rate: f64,
    /// Seconds after the slowdown to the first qualifying window; `None`:
    /// censored.
    pub recovery_s: Option<f64>,
    pub budget_changes: usize,
    pub min_budget: usize,
    pub final_budget: usize,
    /// How long the one call lasted.
    pub call_s: f64,
}

pub fn run_rows(a: &Analysis) -> Vec<RunCsv> {
    a.runs
        .iter()
        .map(|r| RunCsv {
            block: r.block,
            position: r.position,
            policy: r.policy.clone(),
            pooled_n: r.pooled.n,
            pooled_p95_ms: r.pooled.p95_ms,
            pooled_p99_ms: r.pooled.p99_ms,
            slowdown_n: r.slowdown.n,
            slowdown_p95_ms: r.slowdown.p95_ms,
            slowdown_p99_ms: r.slowdown.p99_ms,
            scheduled: r.scheduled,
            skipped: r.skipped,
            longest_send_ms: r.longest_send_ms,
            completions_per_s: r.completions_per_s,
            idle_with_backlog_fraction: r.idle_with_backlog_fraction,
            baseline_p95_ms: r.recovery.baseline_p95_ms,
            baseline_rate: r.recovery.baseline_rate,
            recovery_s: r.recovery.delay_s,
            budget_changes: r.budget_changes,
            min_budget: r.min_budget,
            final_budget: r.final_budget,
            call_s: r.call_s,
        })
        .collect()
}
