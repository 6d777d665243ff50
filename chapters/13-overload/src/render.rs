//! From the raw records to the report, in two steps. `reduce`: every
//! cell's figures recomputed from its rows (about 100,000 rows per
//! transport), written as `cells.csv` and `results.json`. `render`: from
//! `results.json` alone, `results.md` (a table per transport),
//! `transports.md` (the transports side by side) and the charts against
//! offered load, a panel per transport.

use std::{fmt::Write as _, path::Path};

use harness::{
    Folder,
    experiment::CONFIG,
    live::Figure,
    plot::{Panel, Series, panels},
};
use serde::{Deserialize, Serialize};

use crate::{
    config::{Config, Policy, Transport},
    figures::{Cell, figures, share},
    records::{ArrivalRow, CallRow, WorkRow, raw_file},
};

/// The Markdown table of one transport: one row per cell, grouped by policy.
fn table(config: &Config, transport: Transport, cells: &[Cell]) -> String {
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
        for c in cells
            .iter()
            .filter(|c| c.transport == transport && c.policy == policy)
        {
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
                policy,
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

/// `text` between the comment lines mdBook's `{{#include file:name}}` looks for.
fn anchored(name: &str, text: &str) -> String {
    format!("<!-- ANCHOR: {name} -->\n{text}<!-- ANCHOR_END: {name} -->\n")
}

/// The transports side by side: per policy and load, each figure as
/// `grpc / rest-h1 / rest-h2` (in the run's order of transports).
fn side_by_side(config: &Config, cells: &[Cell]) -> String {
    let names: Vec<String> = config.transports.iter().map(|t| t.to_string()).collect();
    let mut out = format!(
        "Each figure: {}.\n\n| policy | load | goodput/s | ok p99 ms | refused | wasted work | attempts/call |\n|---|---:|---:|---:|---:|---:|---:|\n",
        names.join(" / ")
    );
    for &policy in &config.policies {
        for &load in &config.loads {
            let row: Vec<&Cell> = config
                .transports
                .iter()
                .filter_map(|&t| {
                    cells
                        .iter()
                        .find(|c| c.transport == t && c.policy == policy && c.load == load)
                })
                .collect();
            let each = |f: &dyn Fn(&Cell) -> String| {
                row.iter().map(|c| f(c)).collect::<Vec<_>>().join(" / ")
            };
            let _ = writeln!(
                out,
                "| {} | {load}x | {} | {} | {} | {} | {} |",
                policy,
                each(&|c| format!("{:.0}", c.goodput_per_s)),
                each(&|c| format!("{:.1}", c.ok_latency.p99_ms)),
                each(&|c| format!("{:.0}%", share(c.refused, c.calls))),
                each(&|c| format!("{:.0}%", c.server.wasted_share * 100.0)),
                each(&|c| format!("{:.2}", c.attempts_per_call)),
            );
        }
    }
    out
}

/// One cell's figures, from its raw records.
fn read_cell(
    config: &Config,
    folder: &Folder,
    transport: Transport,
    policy: Policy,
    load: f64,
) -> anyhow::Result<Cell> {
    let file = |kind| raw_file(transport, policy, load, kind);
    let calls: Vec<CallRow> = folder.read_csv(&file("calls"))?;
    let work: Vec<WorkRow> = folder.read_csv(&file("server"))?;
    let arrivals: Vec<ArrivalRow> = folder.read_csv(&file("arrivals"))?;
    Ok(figures(
        config, transport, policy, load, &calls, &work, &arrivals,
    ))
}

/// `results.json`: every cell's figures, with the settings they came from.
#[derive(Serialize, Deserialize)]
struct Results {
    config: Config,
    capacity_per_s: f64,
    cells: Vec<Cell>,
}

const RESULTS: &str = "results.json";

/// From the raw records in `raw` to `cells.csv` and `results.json` in `out`.
pub fn reduce(config: &Config, raw: &Folder, out: &Folder) -> anyhow::Result<()> {
    let mut cells = Vec::new();
    for &load in &config.loads {
        for &policy in &config.policies {
            for &transport in &config.transports {
                cells.push(read_cell(config, raw, transport, policy, load)?);
            }
        }
    }
    out.write_csv(
        "cells.csv",
        &cells.iter().map(CellCsv::of).collect::<Vec<_>>(),
    )?;
    out.write_json(
        RESULTS,
        &Results {
            config: config.clone(),
            capacity_per_s: config.capacity(),
            cells,
        },
    )
}

/// From `results.json` to results.md, transports.md and the charts; returns
/// the table.
pub fn render(config: &Config, folder: &Folder) -> anyhow::Result<String> {
    let Results { cells, .. } = folder.read_json(RESULTS)?;
    let settings = format!(
        "| capacity | deadline | per cell | warm-up left out | HTTP/1.1 connections |\n|---|---|---|---|---|\n| {} workers x {} ms = {:.0} calls/s | {} ms | {:.1} s | {:.1} s | {} |\n",
        config.workers,
        config.service.as_millis(),
        config.capacity(),
        config.deadline.as_millis(),
        config.step.as_secs_f64(),
        config.warmup.as_secs_f64(),
        config.h1_connections,
    );
    // The anchors let the book include the settings, or one transport's
    // table, alone.
    let mut tables = anchored("settings", &settings);
    for &transport in &config.transports {
        let name = transport.to_string();
        let _ = writeln!(tables, "\n### {name}\n");
        tables += &anchored(&name, &table(config, transport, &cells));
    }
    folder.write_text("results.md", &tables)?;
    let side_by_side = side_by_side(config, &cells);
    folder.write_text("transports.md", &side_by_side)?;
    charts(config, &cells, folder)?;
    Ok(if config.transports.len() > 1 {
        side_by_side
    } else {
        tables
    })
}

/// One row of `cells.csv`: a cell's figures, flat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellCsv {
    pub transport: Transport,
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
            transport: c.transport,
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

/// A panel per transport; in each, a series per policy: `value` of each of
/// its cells against the load.
fn per_policy(
    config: &Config,
    cells: &[Cell],
    y: &str,
    value: impl Fn(&Cell) -> f64,
) -> Vec<Panel> {
    config
        .transports
        .iter()
        .map(|&t| Panel {
            y_label: if config.transports.len() > 1 {
                format!("{t} {y}")
            } else {
                y.to_string()
            },
            series: config
                .policies
                .iter()
                .map(|&p| {
                    let points = cells
                        .iter()
                        .filter(|c| c.transport == t && c.policy == p)
                        .map(|c| (c.load, value(c)))
                        .collect();
                    Series::line(p.to_string(), points)
                })
                .collect(),
        })
        .collect()
}

/// The report's four charts: file name, title, and the chart's panels.
fn charts_of(config: &Config, cells: &[Cell]) -> [(&'static str, String, Vec<Panel>); 4] {
    [
        (
            "goodput.svg",
            format!(
                "Goodput: successes within the deadline (capacity {:.0}/s)",
                config.capacity()
            ),
            per_policy(config, cells, "calls/s", |c| c.goodput_per_s),
        ),
        (
            "wasted.svg",
            "Wasted work: server time on calls whose caller had given up".into(),
            per_policy(config, cells, "% of busy time", |c| {
                c.server.wasted_share * 100.0
            }),
        ),
        (
            "amplification.svg",
            "Amplification: attempts per offered call".into(),
            per_policy(config, cells, "attempts / call", |c| c.attempts_per_call),
        ),
        (
            "latency.svg",
            "Successful calls: p99 latency from when they were due".into(),
            per_policy(config, cells, "ms", |c| c.ok_latency.p99_ms),
        ),
    ]
}

const X_LABEL: &str = "offered load (x capacity)";

fn charts(config: &Config, cells: &[Cell], folder: &Folder) -> anyhow::Result<()> {
    for (file, title, panel) in charts_of(config, cells) {
        panels(&folder.join(file), &title, X_LABEL, &panel)?;
    }
    Ok(())
}

/// What `--live` draws: goodput and attempts per call for each transport,
/// from the cells that have ended so far (a cell's raw records are written as it ends), so the curves
/// grow a point at a time while the run goes on.
pub fn live(dir: &Path) -> anyhow::Result<Figure> {
    let folder = Folder::open(dir)?;
    let config: Config = folder.read_json(CONFIG)?;
    let mut cells = Vec::new();
    for &load in &config.loads {
        for &policy in &config.policies {
            for &transport in &config.transports {
                // Written last of a cell's three files: the cell has ended.
                if folder
                    .join(raw_file(transport, policy, load, "arrivals"))
                    .exists()
                {
                    // A file caught while being written is read on the next frame.
                    if let Ok(cell) = read_cell(&config, &folder, transport, policy, load) {
                        cells.push(cell);
                    }
                }
            }
        }
    }
    let goodput = per_policy(&config, &cells, "goodput (calls/s)", |c| c.goodput_per_s);
    let attempts = per_policy(&config, &cells, "attempts / call", |c| c.attempts_per_call);
    Ok(Figure {
        title: format!(
            "{} of {} cells so far",
            cells.len(),
            config.loads.len() * config.policies.len() * config.transports.len()
        ),
        x_label: X_LABEL.into(),
        panels: goodput
            .into_iter()
            .zip(attempts)
            .flat_map(|(g, a)| [g, a])
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;
    use loadgen::Outcome;

    use super::*;
    use crate::server::Fate;

    #[test]
    fn the_live_view_draws_the_cells_that_have_ended_and_only_those() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let out_flag = out.to_str().unwrap();
        let config = crate::Args::parse_from(["overload", "--quick", "--out", out_flag])
            .config()
            .unwrap();
        let folder = Folder::create(&out).unwrap();
        folder.write_json(CONFIG, &config).unwrap();
        let (first, second) = (config.policies[0], config.policies[1]);
        let (load, grpc) = (config.loads[0], config.transports[0]);
        let ms = Duration::from_millis;
        let calls: Vec<CallRow> = (0..4u64)
            .map(|i| CallRow {
                index: i,
                due: ms(600 + 100 * i),
                started: Some(ms(600 + 100 * i)),
                ended: Some(ms(610 + 100 * i)),
                outcome: Outcome::Ok,
                code: None,
                attempts: 1,
            })
            .collect();
        let work: Vec<WorkRow> = calls
            .iter()
            .map(|c| WorkRow {
                arrived: c.due,
                deadline: None,
                started: c.started,
                ended: c.ended,
                waiting_ahead: 0,
                fate: Fate::Served,
            })
            .collect();
        let arrivals: Vec<ArrivalRow> = calls
            .iter()
            .map(|c| ArrivalRow {
                arrived: c.due,
                waiting: 0,
            })
            .collect();
        folder
            .write_csv(&raw_file(grpc, first, load, "calls"), &calls)
            .unwrap();
        folder
            .write_csv(&raw_file(grpc, first, load, "server"), &work)
            .unwrap();
        folder
            .write_csv(&raw_file(grpc, first, load, "arrivals"), &arrivals)
            .unwrap();
        // The second policy's cell is still running: its calls are written,
        // its arrivals (written last) not yet.
        folder
            .write_csv(&raw_file(grpc, second, load, "calls"), &calls)
            .unwrap();

        let figure = live(&out).unwrap();
        let cells = config.loads.len() * config.policies.len() * config.transports.len();
        assert_eq!(figure.title, format!("1 of {cells} cells so far"));
        // Goodput and attempts, for each transport, the first's first.
        assert_eq!(figure.panels.len(), 2 * config.transports.len());
        for (i, panel) in figure.panels.iter().enumerate() {
            let drawn: Vec<usize> = panel.series.iter().map(|s| s.points.len()).collect();
            let ended = if i < 2 { 1 } else { 0 };
            assert_eq!(drawn[0], ended, "{}", panel.y_label);
            assert!(
                drawn[1..].iter().all(|&n| n == 0),
                "{}: {drawn:?}",
                panel.y_label
            );
        }
        assert_eq!(figure.panels[0].series[0].points[0].0, load);
        // A folder that is not a run's is an error that says so.
        let error = live(dir.path()).unwrap_err().to_string();
        assert!(error.contains("meta.json"), "{error}");
    }
}
