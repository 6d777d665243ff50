//! From the raw records to the report: every cell's figures recomputed from
//! its rows, then `cells.csv`, `results.json`, `results.md` (tables only) and
//! the charts against offered load.

use std::fmt::Write as _;

use harness::{
    Folder,
    plot::{Panel, Series, panels},
};
use serde::{Deserialize, Serialize};

use crate::{
    config::{Config, Policy},
    figures::{Cell, figures, share},
    records::{ArrivalRow, CallRow, WorkRow, raw_file},
};

/// The Markdown table: one row per cell, grouped by policy.
fn table(config: &Config, cells: &[Cell]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| policy | load | offered/s | goodput/s | ok p50 ms | ok p99 ms | refused | refused p50 ms | timed out | wasted work | attempts/call | queue p50 / max |"
    );
    let _ = writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for &policy in &config.policies {
        for c in cells.iter().filter(|c| c.policy == policy) {
            let ms = |count: u64, v: f64| {
                if count == 0 {
                    "-".to_string()
                } else {
                    format!("{v:.1}")
                }
            };
            let _ = writeln!(
                out,
                "| {} | {}x | {:.0} | {:.0} | {} | {} | {:.0}% | {} | {:.0}% | {:.0}% | {:.2} | {} / {} |",
                policy.name(),
                c.load,
                c.offered_per_s,
                c.goodput_per_s,
                ms(c.ok_latency.count, c.ok_latency.p50_ms),
                ms(c.ok_latency.count, c.ok_latency.p99_ms),
                share(c.refused, c.calls),
                ms(c.refused_latency.count, c.refused_latency.p50_ms),
                share(c.timed_out, c.calls),
                c.server.wasted_share * 100.0,
                c.attempts_per_call,
                c.server.queue_p50,
                c.server.queue_max,
            );
        }
    }
    out
}

/// `results.json`: every cell's figures, with the settings they came from.
#[derive(Serialize)]
struct Results<'a> {
    config: &'a Config,
    capacity_per_s: f64,
    cells: &'a [Cell],
}

/// From the raw records in `folder` to cells.csv, results.json, results.md
/// and the charts; returns the table.
pub fn render(config: &Config, folder: &Folder) -> anyhow::Result<String> {
    let mut cells = Vec::new();
    for &load in &config.loads {
        for &policy in &config.policies {
            let calls: Vec<CallRow> = folder.read_csv(&raw_file(policy, load, "calls"))?;
            let work: Vec<WorkRow> = folder.read_csv(&raw_file(policy, load, "server"))?;
            let arrivals: Vec<ArrivalRow> = folder.read_csv(&raw_file(policy, load, "arrivals"))?;
            cells.push(figures(config, policy, load, &calls, &work, &arrivals));
        }
    }
    folder.write_csv(
        "cells.csv",
        &cells.iter().map(CellCsv::of).collect::<Vec<_>>(),
    )?;
    folder.write_json(
        "results.json",
        &Results {
            config,
            capacity_per_s: config.capacity(),
            cells: &cells,
        },
    )?;
    let settings = format!(
        "| capacity | deadline | per cell | warm-up left out |\n|---|---|---|---|\n| {} workers x {} ms = {:.0} calls/s | {} ms | {:.1} s | {:.1} s |\n\n",
        config.workers,
        config.service.as_millis(),
        config.capacity(),
        config.deadline.as_millis(),
        config.step.as_secs_f64(),
        config.warmup.as_secs_f64(),
    );
    let table = table(config, &cells);
    folder.write_text("results.md", &format!("{settings}{table}"))?;
    charts(config, &cells, folder)?;
    Ok(table)
}

/// One row of `cells.csv`: a cell's figures, flat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellCsv {
    pub policy: Policy,
    pub load: f64,
    pub offered_per_s: f64,
    pub calls: u64,
    pub ok: u64,
    pub goodput_per_s: f64,
    pub ok_p50_ms: f64,
    pub ok_p99_ms: f64,
    pub refused: u64,
    pub refused_p50_ms: f64,
    pub refused_p99_ms: f64,
    pub timed_out: u64,
    pub other: u64,
    pub attempts_per_call: f64,
    pub busy_share: f64,
    pub wasted_share: f64,
    pub server_served: u64,
    pub server_wasted: u64,
    pub server_dropped: u64,
    pub server_shed: u64,
    pub server_never_started: u64,
    pub queue_p50: usize,
    pub queue_max: usize,
}

impl CellCsv {
    fn of(c: &Cell) -> CellCsv {
        let s = &c.server;
        CellCsv {
            policy: c.policy,
            load: c.load,
            offered_per_s: c.offered_per_s,
            calls: c.calls,
            ok: c.ok,
            goodput_per_s: c.goodput_per_s,
            ok_p50_ms: c.ok_latency.p50_ms,
            ok_p99_ms: c.ok_latency.p99_ms,
            refused: c.refused,
            refused_p50_ms: c.refused_latency.p50_ms,
            refused_p99_ms: c.refused_latency.p99_ms,
            timed_out: c.timed_out,
            other: c.other,
            attempts_per_call: c.attempts_per_call,
            busy_share: s.busy_share,
            wasted_share: s.wasted_share,
            server_served: s.served,
            server_wasted: s.wasted,
            server_dropped: s.dropped,
            server_shed: s.shed,
            server_never_started: s.never_started,
            queue_p50: s.queue_p50,
            queue_max: s.queue_max,
        }
    }
}

/// One series per policy: `value` of each of its cells against the load.
fn per_policy(config: &Config, cells: &[Cell], value: impl Fn(&Cell) -> f64) -> Vec<Series> {
    config
        .policies
        .iter()
        .map(|&p| {
            let points = cells
                .iter()
                .filter(|c| c.policy == p)
                .map(|c| (c.load, value(c)))
                .collect();
            Series::line(p.name(), points)
        })
        .collect()
}

fn charts(config: &Config, cells: &[Cell], folder: &Folder) -> anyhow::Result<()> {
    let x = "offered load (x capacity)";
    let one = |y: &str, series| {
        [Panel {
            y_label: y.to_string(),
            series,
        }]
    };
    panels(
        &folder.join("goodput.svg"),
        &format!(
            "Goodput: successes within the deadline (capacity {:.0}/s)",
            config.capacity()
        ),
        x,
        &one("calls/s", per_policy(config, cells, |c| c.goodput_per_s)),
    )?;
    panels(
        &folder.join("wasted.svg"),
        "Wasted work: server time on calls whose caller had given up",
        x,
        &one(
            "% of busy time",
            per_policy(config, cells, |c| c.server.wasted_share * 100.0),
        ),
    )?;
    panels(
        &folder.join("amplification.svg"),
        "Amplification: attempts per offered call",
        x,
        &one(
            "attempts / call",
            per_policy(config, cells, |c| c.attempts_per_call),
        ),
    )?;
    panels(
        &folder.join("latency.svg"),
        "Successful calls: p99 latency from when they were due",
        x,
        &one("ms", per_policy(config, cells, |c| c.ok_latency.p99_ms)),
    )
}
