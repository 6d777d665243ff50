//! The charts: both p95 cohorts per policy on one axis, the budget and the
//! queue over time, and every client send over time.

use harness::{
    Folder,
    plot::{Bar, BarPanel, Panel, Series, bars, panels},
};

use crate::{analysis::Analysis, records::Trace};

/// p95.svg (both cohorts on one axis), budget.svg (B and Q over time, first
/// block), sends.svg (client send durations over time, first block).
pub fn plots(folder: &Folder, a: &Analysis, traces: &[Trace]) -> anyhow::Result<()> {
    let mut p95 = Vec::new();
    for p in &a.policies {
        let runs: Vec<_> = a.runs.iter().filter(|r| r.policy == p.policy).collect();
        // Each cohort's bar is the pooled p95; its whisker spans the runs' own p95s.
        let cohorts = [
            (
                "pool",
                p.pooled.p95_ms,
                runs.iter()
                    .filter_map(|r| r.pooled.p95_ms)
                    .collect::<Vec<f64>>(),
            ),
            (
                "slow",
                p.slowdown.p95_ms,
                runs.iter().filter_map(|r| r.slowdown.p95_ms).collect(),
            ),
        ];
        for (name, pooled, v) in cohorts {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(0.0, f64::max);
            p95.push(Bar {
                label: format!("{} {name}", p.policy),
                value: pooled.unwrap_or(0.0),
                low: lo.min(hi),
                high: hi,
            });
        }
    }
    bars(
        &folder.join("p95.svg"),
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
            .map(|t| {
                Series::line(
                    t.policy.to_string(),
                    t.timeline.iter().map(|p| (p.0, f(p))).collect(),
                )
            })
            .collect()
    };
    panels(
        &folder.join("budget.svg"),
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
        &folder.join("sends.svg"),
        &format!("Client send durations (block {first}, stream 0)"),
        "seconds since the call started (when the send was due)",
        &shown
            .iter()
            .map(|t| Panel {
                y_label: format!("{} send (ms)", t.policy),
                series: vec![Series::dots(t.policy.to_string(), t.sends.clone())],
            })
            .collect::<Vec<_>>(),
    )
}
