//! The report, drawn from the run's tables: what the runtime saw, what a call
//! cost, and each arm at each load (medians over the blocks), with two plots.

use std::fmt::Write as _;

use harness::{
    Folder,
    plot::{Panel, Series, panels},
    report::table,
};
use perf::stats::median;

use crate::{
    config::{Arm, Config},
    run::{CALIBRATION, CELLS, Calibration, CellRow, SEES, SeesRow, WINDOW, WindowRow, of},
};

/// One arm at one load, over its blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub arm: Arm,
    pub together: usize,
    pub load: f64,
    pub workers: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p99_low: f64,
    pub p99_high: f64,
    pub max_ms: f64,
    /// Of the periods in which the pod had work, the share that ended throttled.
    pub throttled_share: f64,
    pub throttled_ms_per_s: f64,
    pub cpu_of_quota: f64,
    pub late_p99_ms: f64,
    pub failed: u64,
}

pub fn summarize(
    config: &Config,
    cells: &[CellRow],
    arm: Arm,
    together: usize,
    load: f64,
) -> Option<Summary> {
    let rows: Vec<&CellRow> = of(cells, arm, together, load).collect();
    let values = |f: fn(&CellRow) -> f64| rows.iter().map(|r| f(r)).collect::<Vec<f64>>();
    let p99s = values(|r| r.p99_ms);
    let periods: u64 = rows.iter().map(|r| r.periods).sum();
    Some(Summary {
        arm,
        together,
        load,
        workers: rows.first()?.workers,
        p50_ms: median(&values(|r| r.p50_ms))?,
        p99_ms: median(&p99s)?,
        p99_low: p99s.iter().copied().fold(f64::MAX, f64::min),
        p99_high: p99s.iter().copied().fold(f64::MIN, f64::max),
        max_ms: values(|r| r.max_ms).into_iter().fold(0.0, f64::max),
        throttled_share: rows.iter().map(|r| r.throttled).sum::<u64>() as f64
            / periods.max(1) as f64,
        throttled_ms_per_s: rows.iter().map(|r| r.throttled_ms).sum::<f64>()
            / (rows.len() as f64 * config.cell.as_secs_f64()),
        cpu_of_quota: median(&values(|r| r.cpu_of_quota))?,
        late_p99_ms: values(|r| r.late_p99_ms).into_iter().fold(0.0, f64::max),
        failed: rows.iter().map(|r| r.failed).sum(),
    })
}

/// The shape of arrivals, as a table's title.
fn shape(together: usize) -> String {
    match together {
        1 => "Independent calls (Poisson arrivals)".into(),
        n => format!("Calls arriving {n} at a time (Poisson arrivals of {n}-call groups)"),
    }
}

/// The same, as a chart label.
fn short(together: usize) -> String {
    match together {
        1 => "one at a time".into(),
        n => format!("{n} at a time"),
    }
}

fn limit(cpus: Option<f64>) -> String {
    cpus.map_or("none".into(), |c| format!("{c} CPU"))
}

/// Writes `results.md`, `p99.svg` and `window.svg`; returns the Markdown.
pub fn render(config: &Config, folder: &Folder) -> anyhow::Result<String> {
    let sees: Vec<SeesRow> = folder.read_csv(SEES)?;
    let calibration: Calibration = folder.read_json(CALIBRATION)?;
    let cells: Vec<CellRow> = folder.read_csv(CELLS)?;
    // A run against a remote server measured the one runtime it reported.
    let mut arms = config.arms.clone();
    if arms.is_empty() {
        arms = cells.iter().map(|c| c.arm).collect();
        arms.dedup();
    }
    let dots: Vec<WindowRow> = folder.read_csv(WINDOW)?;
    let mut md = String::new();
    let _ = writeln!(md, "**Chapter 17: a server in a CPU quota**\n");
    let _ = writeln!(
        md,
        "**What the runtime sees inside a pod** (this machine: {} CPUs)\n",
        config.machine_cpus
    );
    table(
        &mut md,
        &[
            "pod's CPU limit",
            "CPUs allowed",
            "available_parallelism",
            "Tokio's default workers",
        ],
        sees.iter().map(|s| {
            vec![
                limit(s.limit_cpus),
                s.cpus_allowed.clone(),
                s.parallelism.to_string(),
                s.workers.to_string(),
            ]
        }),
    );
    let _ = writeln!(
        md,
        "**One call** costs {:.0} µs of the server's CPU time ({} µs of handler work; \
         {} calls measured), so load 1 (the quota full) is {:.0} calls/s in a {}-CPU pod.\n",
        calibration.cpu_per_call_us,
        calibration.work_us,
        calibration.calls,
        calibration.full_rate,
        config.cpus
    );
    // One table per shape of arrivals: every load, every arm.
    let mut summaries = Vec::new();
    let cells = &cells;
    for &together in &config.together {
        let rows: Vec<Summary> = config
            .loads
            .iter()
            .flat_map(|&load| {
                arms.iter()
                    .filter_map(move |&arm| summarize(config, cells, arm, together, load))
            })
            .collect();
        let blocks = match config.blocks {
            1 => format!("one block of {} s", config.cell.as_secs_f64()),
            n => format!(
                "medians of {n} blocks of {} s; p99's range over the blocks",
                config.cell.as_secs_f64()
            ),
        };
        let _ = writeln!(md, "**{}** ({blocks})\n", shape(together));
        table(
            &mut md,
            &[
                "load, arm",
                "calls/s",
                "workers",
                "p50 ms",
                "p99 ms",
                "p99 range",
                "max ms",
                "throttled periods %",
                "throttled ms/s",
                "CPU of quota %",
                "generator late p99 ms",
                "failed",
            ],
            rows.iter().map(|s| {
                vec![
                    format!("{} {}", s.load, s.arm),
                    format!("{:.0}", s.load * calibration.full_rate),
                    s.workers.to_string(),
                    format!("{:.2}", s.p50_ms),
                    format!("{:.2}", s.p99_ms),
                    format!("{:.2}-{:.2}", s.p99_low, s.p99_high),
                    format!("{:.1}", s.max_ms),
                    format!("{:.1}", 100.0 * s.throttled_share),
                    format!("{:.1}", s.throttled_ms_per_s),
                    format!("{:.0}", 100.0 * s.cpu_of_quota),
                    format!("{:.2}", s.late_p99_ms),
                    s.failed.to_string(),
                ]
            }),
        );
        summaries.extend(rows);
    }
    let curve = |arm: Arm, together: usize, f: fn(&Summary) -> f64| {
        let points = summaries
            .iter()
            .filter(|s| s.arm == arm && s.together == together)
            .map(|s| (s.load, f(s)));
        Series::line(arm.to_string(), points.collect())
    };
    let mut charts = Vec::new();
    for &together in &config.together {
        charts.push(Panel {
            y_label: format!("p99 (ms), {}", short(together)),
            series: arms
                .iter()
                .map(|&a| curve(a, together, |s| s.p99_ms))
                .collect(),
        });
        charts.push(Panel {
            y_label: format!("throttled periods (%), {}", short(together)),
            series: arms
                .iter()
                .map(|&a| curve(a, together, |s| 100.0 * s.throttled_share))
                .collect(),
        });
    }
    panels(
        &folder.join("p99.svg"),
        &format!("A {}-CPU pod: p99 and throttling against load", config.cpus),
        "offered load (fraction of the quota)",
        &charts,
    )?;
    let top = config.loads.iter().copied().fold(f64::MIN, f64::max);
    let most = config.together.iter().copied().max().unwrap_or(1);
    panels(
        &folder.join("window.svg"),
        &format!(
            "Half a second at load {top}, {}: each call's latency at its arrival",
            short(most)
        ),
        "arrival (ms from the window's start; a CFS period is 100 ms)",
        &arms
            .iter()
            .map(|&arm| Panel {
                y_label: format!("{arm}: latency (ms)"),
                series: vec![Series::dots(
                    arm.to_string(),
                    dots.iter()
                        .filter(|d| d.arm == arm)
                        .map(|d| (d.due_ms, d.latency_ms))
                        .collect(),
                )],
            })
            .collect::<Vec<_>>(),
    )?;
    folder.write_text("results.md", &md)?;
    Ok(md)
}
