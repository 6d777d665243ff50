//! The report: our figures beside the seed's, the
//! per-run CSV, and the plots.

use std::{fmt::Write as _, path::Path};

use loadgen::plot::{Bar, BarPanel, Panel, Series, bars, panels};

use crate::{
    analysis::{Analysis, Interval, PolicySummary},
    runner::{Contract, Trace},
};

/// The seed's published figures for one policy (five blocks, scale 1).
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

/// The seed's figures as a run at `scale` should see them: times x scale,
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
    seed_at(policy, scale).map_or("(not in the seed)".into(), |s| format!("{:.1}", f(&s)))
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

fn find<'a>(a: &'a Analysis, policy: &str) -> Option<&'a PolicySummary> {
    a.policies.iter().find(|p| p.policy == policy)
}

/// One line per policy: the two p95s that make the reversal, ours and the seed's.
pub fn headline(c: &Contract, a: &Analysis) -> String {
    let scale = c.scale;
    let mut out = format!(
        "{:<10} {:>22} {:>22}   (ms; time scale {})\n",
        "policy", "pooled p95 12-36 s", "slowdown p95 12-24 s", c.scale
    );
    for p in &a.policies {
        let _ = writeln!(
            out,
            "{:<10} {:>10} (seed {:>8}) {:>8} (seed {:>8})",
            p.policy,
            ms(p.pooled.p95_ms),
            seed_ms(&p.policy, scale, |s| s.pooled_p95),
            ms(p.slowdown.p95_ms),
            seed_ms(&p.policy, scale, |s| s.slowdown_p95),
        );
    }
    out
}

// ANCHOR: acceptance
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
                "{policy} pooled p95 {v:.1} ms vs the seed's {seed:.1} ms: {off:+.1}% ({})",
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
            if reversal { "the seed's reversal holds" } else { "NO reversal" }
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
// ANCHOR_END: acceptance

pub fn markdown(c: &Contract, a: &Analysis, attempts: usize, invalid: usize) -> String {
    let s = c.scale;
    let scale = s;
    let w = &a.windows;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "**Fixed or adaptive admission, replicated** (chapter 12)\n"
    );
    let _ = writeln!(
        o,
        "{} block(s) x {} policies, {} valid run(s) ({attempts} attempts, {invalid} excluded). \
         Time scale {s}: {} slots at {}/s over {:.1} s, plan `{}`, K = {}, {} stream(s), {} worker(s), \
         {} byte messages; {} build on {} ({} CPUs). Transport: {}.\n",
        a.blocks,
        c.policies.len(),
        a.runs.len(),
        c.slots,
        c.rate_per_s,
        c.duration_s,
        c.plan,
        c.capacity,
        c.streams,
        c.workers,
        c.message_bytes,
        c.meta.build,
        c.meta.machine.cpu_model,
        c.meta.machine.cpus,
        c.transport
    );
    if s != 1.0 {
        let _ = writeln!(
            o,
            "Time-scaled run: every time is {s} x the seed's and the send rate 1/{s} x; the seed's figures are shown scaled the same way (times x {s}, rates / {s}).\n"
        );
    }
    let _ = writeln!(o, "#### Checks\n");
    for line in acceptance(c, a) {
        let _ = writeln!(o, "- {line}");
    }
    let _ = writeln!(
        o,
        "\n#### Queue residence, enqueued {:.1}-{:.1} s (slowdown and recovery), ms\n",
        w.slow_from, w.end
    );
    let _ = writeln!(
        o,
        "| policy | pooled p95 | seed | pooled p99 | seed | messages | seed (5 blocks) | median of per-run p95 |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for p in &a.policies {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            p.policy,
            ms(p.pooled.p95_ms),
            seed_ms(&p.policy, scale, |f| f.pooled_p95),
            ms(p.pooled.p99_ms),
            seed_ms(&p.policy, scale, |f| f.pooled_p99),
            p.pooled.n,
            seed_at(&p.policy, scale).map_or("-".into(), |f| f.pooled_n.to_string()),
            ms(p.median_run_pooled_p95_ms),
        );
    }
    let _ = writeln!(
        o,
        "\n#### Queue residence, enqueued {:.1}-{:.1} s (slowdown only), ms\n",
        w.slow_from, w.slow_to
    );
    let _ = writeln!(
        o,
        "| policy | pooled p95 | seed | pooled p99 | seed | messages | median of per-run p95 |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|");
    for p in &a.policies {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} |",
            p.policy,
            ms(p.slowdown.p95_ms),
            seed_ms(&p.policy, scale, |f| f.slowdown_p95),
            ms(p.slowdown.p99_ms),
            seed_ms(&p.policy, scale, |f| f.slowdown_p99),
            p.slowdown.n,
            ms(p.median_run_slowdown_p95_ms),
        );
    }
    let _ = writeln!(
        o,
        "\n#### Reductions of p95, with block-bootstrap 95% intervals\n"
    );
    let _ = writeln!(
        o,
        "The seed: adaptive's pooled p95 87.52% [87.48, 87.56] below fixed-32's, 50.15% below fixed-8's. Negative: higher.\n"
    );
    let _ = writeln!(
        o,
        "| policy | pooled vs fixed-32 | pooled vs fixed-8 | slowdown vs fixed-32 | slowdown vs fixed-8 |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|");
    for p in &a.policies {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} |",
            p.policy,
            interval(p.pooled_vs_fixed32),
            interval(p.pooled_vs_fixed8),
            interval(p.slowdown_vs_fixed32),
            interval(p.slowdown_vs_fixed8)
        );
    }
    let _ = writeln!(o, "\n#### Where the waiting went\n");
    let _ = writeln!(
        o,
        "| policy | median skipped slots | seed | longest send per run (ms) | seed | completions/s (median) | seed | vs fixed-32 | idle with backlog |"
    );
    let _ = writeln!(o, "|---|---:|---:|---|---:|---:|---:|---:|---:|");
    for p in &a.policies {
        let f = seed_at(&p.policy, scale);
        let sends: Vec<String> = p
            .longest_send_ms
            .iter()
            .map(|v| format!("{v:.0}"))
            .collect();
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.3}% |",
            p.policy,
            p.median_skipped.map_or("-".into(), |v| format!("{v:.0}")),
            f.map_or("-".into(), |f| format!("{:.0}", f.median_skipped)),
            sends.join(", "),
            f.map_or("-", |f| f.longest_send),
            p.median_completions_per_s
                .map_or("-".into(), |v| format!("{v:.3}")),
            f.map_or("-".into(), |f| format!("{:.3}", f.completions_per_s)),
            p.throughput_vs_fixed32
                .map_or("-".into(), |v| format!("{:.2}%", 100.0 * v)),
            100.0 * p.mean_idle_with_backlog_fraction,
        );
    }
    let _ = writeln!(
        o,
        "\nThe seed's adaptive reached 98.799% of fixed-32's throughput.\n"
    );
    let max = w.end - w.slow_to;
    let _ = writeln!(
        o,
        "#### Recovery after {:.1} s (window included; censored: none qualified by {:.1} s)\n",
        w.slow_to, w.end
    );
    let _ = write!(o, "| block |");
    for p in &a.policies {
        let _ = write!(o, " {} |", p.policy);
    }
    let _ = writeln!(o, "\n|---|{}", "---:|".repeat(a.policies.len()));
    for b in 1..=a.blocks {
        let _ = write!(o, "| {b} |");
        for p in &a.policies {
            let cell = a
                .runs
                .iter()
                .find(|r| r.block == b && r.policy == p.policy)
                .map_or("-".into(), |r| recovery_cell(r.recovery.delay_s, max));
            let _ = write!(o, " {cell} |");
        }
        o.push('\n');
    }
    let _ = write!(o, "| recovered |");
    for p in &a.policies {
        let seed =
            seed_at(&p.policy, scale).map_or(String::new(), |f| format!(" (seed {})", f.recovered));
        let _ = write!(o, " {}/{}{seed} |", p.recovered, p.runs);
    }
    let _ = writeln!(o, "\n\n#### Budget trajectories\n");
    for r in a.runs.iter().filter(|r| r.budget_changes > 0) {
        let _ = writeln!(
            o,
            "- block {} {}: {} changes, lowest B {}, final B {}; from the slowdown on: {}",
            r.block,
            r.policy,
            r.budget_changes,
            r.min_budget,
            r.final_budget,
            r.trajectory
                .iter()
                .filter(|(t, _)| *t >= w.slow_from - 0.01)
                .take(6)
                .map(|(t, b)| format!("B={b} at {t:.1} s"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let _ = writeln!(
        o,
        "\n(Each run's changes, with times, are in runs/*/budget.csv; the controller's ticks in runs/*/controller.csv.)\n"
    );
    let _ = writeln!(o, "#### Every run\n");
    let _ = writeln!(
        o,
        "| block | # | policy | pooled p95 | slowdown p95 | skipped | longest send | completions/s | recovery |"
    );
    let _ = writeln!(o, "|---:|---:|---|---:|---:|---:|---:|---:|---|");
    for r in &a.runs {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {:.0} | {:.3} | {} |",
            r.block,
            r.position,
            r.policy,
            ms(r.pooled.p95_ms),
            ms(r.slowdown.p95_ms),
            r.skipped,
            r.longest_send_ms,
            r.completions_per_s,
            recovery_cell(r.recovery.delay_s, max)
        );
    }
    o
}

pub fn runs_csv(a: &Analysis) -> String {
    let mut o = String::from(
        "block,position,policy,pooled_n,pooled_p95_ms,pooled_p99_ms,slowdown_n,slowdown_p95_ms,slowdown_p99_ms,scheduled,skipped,longest_send_ms,completions_per_s,idle_with_backlog_fraction,baseline_p95_ms,baseline_rate,recovery_s,budget_changes,min_budget,final_budget,call_s\n",
    );
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_default();
    for r in &a.runs {
        let _ = writeln!(
            o,
            "{},{},{},{},{},{},{},{},{},{},{},{:.3},{:.3},{:.6},{:.3},{:.3},{},{},{},{},{:.3}",
            r.block,
            r.position,
            r.policy,
            r.pooled.n,
            opt(r.pooled.p95_ms),
            opt(r.pooled.p99_ms),
            r.slowdown.n,
            opt(r.slowdown.p95_ms),
            opt(r.slowdown.p99_ms),
            r.scheduled,
            r.skipped,
            r.longest_send_ms,
            r.completions_per_s,
            r.idle_with_backlog_fraction,
            r.recovery.baseline_p95_ms,
            r.recovery.baseline_rate,
            opt(r.recovery.delay_s),
            r.budget_changes,
            r.min_budget,
            r.final_budget,
            r.call_s
        );
    }
    o
}

/// p95.svg (both cohorts on one axis), budget.svg (B and Q over time, first
/// block), sends.svg (client send durations over time, first block).
pub fn plots(out: &Path, _c: &Contract, a: &Analysis, traces: &[Trace]) -> anyhow::Result<()> {
    let mut p95 = Vec::new();
    for p in &a.policies {
        let runs: Vec<_> = a.runs.iter().filter(|r| r.policy == p.policy).collect();
        let range = |f: &dyn Fn(&crate::analysis::RunRow) -> Option<f64>| {
            let v: Vec<f64> = runs.iter().filter_map(|r| f(r)).collect();
            (
                v.iter().copied().fold(f64::INFINITY, f64::min),
                v.iter().copied().fold(0.0, f64::max),
            )
        };
        let (lo, hi) = range(&|r| r.pooled.p95_ms);
        p95.push(Bar {
            label: format!("{} pool", p.policy),
            value: p.pooled.p95_ms.unwrap_or(0.0),
            low: lo.min(hi),
            high: hi,
        });
        let (lo, hi) = range(&|r| r.slowdown.p95_ms);
        p95.push(Bar {
            label: format!("{} slow", p.policy),
            value: p.slowdown.p95_ms.unwrap_or(0.0),
            low: lo.min(hi),
            high: hi,
        });
    }
    bars(
        &out.join("p95.svg"),
        "Queue p95 on one axis: pool = enqueued 12-36 s, slow = 12-24 s only",
        &[BarPanel {
            y_label: "queue residence p95 (ms); whiskers: per-run min-max".into(),
            bars: p95,
        }],
    )?;
    let first = traces.iter().map(|t| t.block).min().unwrap_or(1);
    let shown: Vec<&Trace> = traces.iter().filter(|t| t.block == first).collect();
    let line = |f: &dyn Fn(&(f64, f64, f64)) -> f64| -> Vec<Series> {
        shown
            .iter()
            .map(|t| Series::line(t.policy, t.timeline.iter().map(|p| (p.0, f(p))).collect()))
            .collect()
    };
    panels(
        &out.join("budget.svg"),
        &format!("Budget B and queue depth Q over time (block {first})"),
        "seconds since the plan's zero",
        &[
            Panel {
                y_label: "budget B".into(),
                series: line(&|p| p.1),
            },
            Panel {
                y_label: "queued Q".into(),
                series: line(&|p| p.2),
            },
        ],
    )?;
    panels(
        &out.join("sends.svg"),
        &format!("Client send durations (block {first}, stream 0)"),
        "seconds since the call started (when the send was due)",
        &shown
            .iter()
            .map(|t| Panel {
                y_label: format!("{} send (ms)", t.policy),
                series: vec![Series::dots(t.policy, t.sends.clone())],
            })
            .collect::<Vec<_>>(),
    )
}
