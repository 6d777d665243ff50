//! The run, and its files: a CSV row per cell, raw records per cell, JSON with
//! the run's provenance, a Markdown table and SVG charts against offered load.

use std::{fmt::Write as _, path::Path};

use harness::{
    RunMeta,
    plot::{Panel, Series, panels},
    records::{write, write_json},
};
use serde::Serialize;

use crate::experiment::{Args, Cell, CellRun, Config, run_cell};

/// Runs every cell (loads in order; at each load, every policy in turn),
/// prints a line per cell and the table, writes the files, and prints where.
pub async fn run(args: Args) -> anyhow::Result<Vec<Cell>> {
    let config = args.config()?;
    let cells_total = config.loads.len() * config.policies.len();
    eprintln!(
        "capacity {} workers x {} ms = {:.0} calls/s; deadline {} ms; {} cells of {:.1} s ({:.1} s warm-up left out)",
        config.workers,
        config.service.as_millis(),
        config.capacity(),
        config.deadline.as_millis(),
        cells_total,
        config.step.as_secs_f64(),
        config.warmup.as_secs_f64(),
    );
    let mut cells = Vec::new();
    let raw = config.out.join("raw");
    for &load in &config.loads {
        for &policy in &config.policies {
            eprintln!(
                "[{}/{}] {} at {}x = {:.0} calls/s",
                cells.len() + 1,
                cells_total,
                policy.name(),
                load,
                load * config.capacity()
            );
            let run = run_cell(&config, policy, load).await?;
            eprintln!("    {}", line(&run.cell, &config));
            write_raw(&raw, &run)?;
            cells.push(run.cell);
        }
    }
    println!("{}", table(&config, &cells));
    write_results(&config, &cells)?;
    println!("results in {}", config.out.display());
    Ok(cells)
}

/// One cell in a line.
pub fn line(c: &Cell, config: &Config) -> String {
    format!(
        "goodput {:.0}/s ({:.0}% of capacity), ok p99 {:.0} ms, refused {:.0}%, timed out {:.0}%, wasted {:.0}% of work, {:.2} attempts/call",
        c.goodput_per_s,
        c.goodput_per_s / config.capacity() * 100.0,
        c.ok_latency.p99_ms,
        share(c.refused, c.calls),
        share(c.timed_out, c.calls),
        c.server.wasted_share * 100.0,
        c.attempts_per_call,
    )
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64 * 100.0
    }
}

/// The Markdown table: one row per cell, grouped by policy.
pub fn table(config: &Config, cells: &[Cell]) -> String {
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

#[derive(Serialize)]
struct Results<'a> {
    meta: RunMeta,
    config: &'a Config,
    capacity_per_s: f64,
    cells: &'a [Cell],
}

/// cells.csv, results.json, results.md and the charts.
pub fn write_results(config: &Config, cells: &[Cell]) -> anyhow::Result<()> {
    let out = &config.out;
    let mut csv = String::from(
        "policy,load,offered_per_s,calls,ok,goodput_per_s,ok_p50_ms,ok_p99_ms,refused,refused_p50_ms,refused_p99_ms,timed_out,other,attempts_per_call,busy_share,wasted_share,server_served,server_wasted,server_dropped,server_shed,server_never_started,queue_p50,queue_max\n",
    );
    for c in cells {
        let s = &c.server;
        let _ = writeln!(
            csv,
            "{},{},{:.1},{},{},{:.2},{:.3},{:.3},{},{:.3},{:.3},{},{},{:.4},{:.4},{:.4},{},{},{},{},{},{},{}",
            c.policy.name(),
            c.load,
            c.offered_per_s,
            c.calls,
            c.ok,
            c.goodput_per_s,
            c.ok_latency.p50_ms,
            c.ok_latency.p99_ms,
            c.refused,
            c.refused_latency.p50_ms,
            c.refused_latency.p99_ms,
            c.timed_out,
            c.other,
            c.attempts_per_call,
            s.busy_share,
            s.wasted_share,
            s.served,
            s.wasted,
            s.dropped,
            s.shed,
            s.never_started,
            s.queue_p50,
            s.queue_max,
        );
    }
    write(&out.join("cells.csv"), csv.as_bytes())?;
    write_json(
        &out.join("results.json"),
        &Results {
            meta: RunMeta::now(),
            config,
            capacity_per_s: config.capacity(),
            cells,
        },
    )?;
    let mut md = format!(
        "Capacity {} workers x {} ms = {:.0} calls/s, deadline {} ms, {:.1} s per cell ({:.1} s warm-up left out).\n\n",
        config.workers,
        config.service.as_millis(),
        config.capacity(),
        config.deadline.as_millis(),
        config.step.as_secs_f64(),
        config.warmup.as_secs_f64(),
    );
    md.push_str(&table(config, cells));
    write(&out.join("results.md"), md.as_bytes())?;
    charts(config, cells, out)
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

fn charts(config: &Config, cells: &[Cell], out: &Path) -> anyhow::Result<()> {
    let x = "offered load (x capacity)";
    let one = |y: &str, series| {
        [Panel {
            y_label: y.to_string(),
            series,
        }]
    };
    panels(
        &out.join("goodput.svg"),
        &format!(
            "Goodput: successes within the deadline (capacity {:.0}/s)",
            config.capacity()
        ),
        x,
        &one("calls/s", per_policy(config, cells, |c| c.goodput_per_s)),
    )?;
    panels(
        &out.join("wasted.svg"),
        "Wasted work: server time on calls whose caller had given up",
        x,
        &one(
            "% of busy time",
            per_policy(config, cells, |c| c.server.wasted_share * 100.0),
        ),
    )?;
    panels(
        &out.join("amplification.svg"),
        "Amplification: attempts per offered call",
        x,
        &one(
            "attempts / call",
            per_policy(config, cells, |c| c.attempts_per_call),
        ),
    )?;
    panels(
        &out.join("latency.svg"),
        "Successful calls: p99 latency from when they were due",
        x,
        &one("ms", per_policy(config, cells, |c| c.ok_latency.p99_ms)),
    )
}

/// Every call and every piece of server work of one cell, times in ms from
/// the cell's start.
fn write_raw(dir: &Path, run: &CellRun) -> anyhow::Result<()> {
    let name = format!("{}-{}x", run.cell.policy.name(), run.cell.load);
    let ms = |d: Option<std::time::Duration>| {
        d.map(|d| format!("{:.3}", d.as_secs_f64() * 1e3))
            .unwrap_or_default()
    };
    let since =
        |t: Option<tokio::time::Instant>| ms(t.map(|t| t.saturating_duration_since(run.base)));
    let mut calls = String::from("index,due_ms,started_ms,ended_ms,outcome,code,attempts\n");
    for (r, attempts) in &run.calls {
        let outcome = serde_json::to_value(r.outcome)?;
        let _ = writeln!(
            calls,
            "{},{},{},{},{},{},{}",
            r.index,
            ms(Some(r.due)),
            ms(r.started),
            ms(r.ended),
            outcome.as_str().unwrap_or_default(),
            r.code.as_deref().unwrap_or_default(),
            attempts
        );
    }
    write(&dir.join(format!("{name}-calls.csv")), calls.as_bytes())?;
    let mut work = String::from("arrived_ms,deadline_ms,started_ms,ended_ms,waiting_ahead,fate\n");
    for w in &run.work {
        let fate = serde_json::to_value(w.fate)?;
        let _ = writeln!(
            work,
            "{},{},{},{},{},{}",
            since(Some(w.arrived)),
            since(w.deadline),
            since(w.started),
            since(w.ended),
            w.waiting_ahead,
            fate.as_str().unwrap_or_default()
        );
    }
    write(&dir.join(format!("{name}-server.csv")), work.as_bytes())
}
