//! From the records on disk to `summary.md`, `restart-timeline.svg` and
//! `shares.svg`, in two steps: [`reduce`] turns every call's row (2 MB for a
//! full run, kept compressed as raw records) into `tables.json`, every table
//! row and plotted point; [`render`] draws the report from that alone, so
//! `--render DIR` redraws a finished run and `--from-raw` proves the tables.

use std::{collections::BTreeMap, fmt::Write as _};

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use harness::{
    Folder,
    plot::{self, Panel, Series},
};
use loadgen::Outcome;
use perf::stats::nearest_rank;

use super::{CallRow, Config, EventRow, Part, age, restart, slow, tail};
use crate::balance::Strategy;

const NAMES: [&str; 3] = ["a", "b", "c"];

/// The tables the report is drawn from.
pub const TABLES: &str = "tables.json";

/// Every row of the report's tables and every point of its plots.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Tables {
    restart: Option<(Vec<RestartRow>, Vec<Panel>)>,
    age: Option<(Vec<AgeRow>, Vec<Panel>)>,
    slow: Option<Vec<SlowRow>>,
    tail: Option<Vec<TailRow>>,
}

/// Reads the calls in `raw` (and the events and counts in `out`) and writes
/// `out`'s `tables.json`.
pub fn reduce(config: &Config, raw: &Folder, out: &Folder) -> anyhow::Result<()> {
    let mut tables = Tables::default();
    for part in &config.parts {
        match part {
            Part::Restart => tables.restart = Some(restart_table(raw, out)?),
            Part::Age => tables.age = Some(age_table(config, raw, out)?),
            Part::Slow => tables.slow = Some(slow_table(config, raw)?),
            Part::Tail => tables.tail = Some(tail_table(config, raw, out)?),
        }
    }
    out.write_json(TABLES, &tables)
}

pub fn render(config: &Config, folder: &Folder) -> anyhow::Result<String> {
    let meta = folder.meta()?;
    let tables: Tables = folder.read_json(TABLES)?;
    let mut md = String::new();
    // Bold captions, never headings: the chapter's page includes this file,
    // and its headings would land in the page's outline.
    writeln!(md, "**Chapter 16: more than one server**\n")?;
    writeln!(
        md,
        "{} calls/s open loop, {} per arm ({} not counted in the slow and tail parts), {} repeat(s) interleaved, deadline {}. Machine: {} CPUs, {}; {} build; load average at the start {}.\n",
        config.rate,
        program::duration::Show(config.duration),
        program::duration::Show(config.warmup),
        config.repeats,
        program::duration::Show(config.deadline),
        meta.machine.cpus,
        meta.machine.cpu_model,
        meta.build,
        meta.loadavg_1m
            .map_or("unknown".into(), |l| format!("{l:.2}")),
    )?;
    for part in &config.parts {
        let missing = || anyhow::anyhow!("{TABLES} has no table for the {part:?} part");
        match part {
            Part::Restart => {
                let (rows, panels) = tables.restart.as_ref().ok_or_else(missing)?;
                restart_section(config, folder, rows, panels, &mut md)?
            }
            Part::Age => {
                let (rows, panels) = tables.age.as_ref().ok_or_else(missing)?;
                age_section(config, folder, rows, panels, &mut md)?
            }
            Part::Slow => slow_section(config, tables.slow.as_ref().ok_or_else(missing)?, &mut md)?,
            Part::Tail => tail_section(config, tables.tail.as_ref().ok_or_else(missing)?, &mut md)?,
        }
    }
    folder.write_text("summary.md", &md)?;
    Ok(md)
}

/// A percentile as the table prints it; `None` (no successful call) as NaN.
fn ms(value: Option<f64>) -> String {
    value.map_or("NaN".into(), |v| format!("{v:.2}"))
}

/// The nearest-rank percentile `p` (0-100): a latency that really happened.
fn pct(values: &[f64], p: f64) -> Option<f64> {
    nearest_rank(values, p)
}

fn ok_latencies<'a>(rows: impl Iterator<Item = &'a CallRow>) -> Vec<f64> {
    rows.filter(|r| r.outcome == Outcome::Ok)
        .filter_map(|r| r.latency_ms)
        .collect()
}

fn failed(rows: &[&CallRow]) -> usize {
    rows.iter().filter(|r| r.outcome != Outcome::Ok).count()
}

/// Failure codes and their counts: `UNAVAILABLE 12, CANCELLED 1`.
fn codes(rows: &[&CallRow]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.outcome != Outcome::Ok) {
        *counts
            .entry(r.code.as_deref().unwrap_or("unsent"))
            .or_default() += 1;
    }
    if counts.is_empty() {
        return "none".into();
    }
    counts
        .iter()
        .map(|(c, n)| format!("{c} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn arms<'a>(rows: &'a [CallRow], arm: &str) -> Vec<&'a CallRow> {
    rows.iter().filter(|r| r.arm == arm).collect()
}

#[derive(Debug, Serialize, Deserialize)]
struct RestartRow {
    arm: String,
    calls: usize,
    failed: usize,
    failures: String,
    p50: Option<f64>,
    p99: Option<f64>,
    max: Option<f64>,
}

fn restart_table(raw: &Folder, out: &Folder) -> anyhow::Result<(Vec<RestartRow>, Vec<Panel>)> {
    let calls: Vec<CallRow> = raw.read_csv(restart::CALLS)?;
    let events: Vec<EventRow> = out.read_csv(restart::EVENTS)?;
    let (mut rows, mut panels) = (Vec::new(), Vec::new());
    for arm in [restart::Arm::Drained, restart::Arm::Killed].map(restart::Arm::name) {
        let of_arm = arms(&calls, arm);
        let ok = ok_latencies(of_arm.iter().copied());
        rows.push(RestartRow {
            arm: arm.to_string(),
            calls: of_arm.len(),
            failed: failed(&of_arm),
            failures: codes(&of_arm),
            p50: pct(&ok, 50.0),
            p99: pct(&ok, 99.0),
            max: pct(&ok, 100.0),
        });
        panels.extend(timeline(arm, &of_arm, &events));
    }
    Ok((rows, panels))
}

fn restart_section(
    config: &Config,
    folder: &Folder,
    rows: &[RestartRow],
    panels: &[Panel],
    md: &mut String,
) -> anyhow::Result<()> {
    writeln!(md, "**Rolling restart (p2c fed by health Watch)**\n")?;
    writeln!(
        md,
        "Three replicas stopped one after the other, each back {} later; drained: NOT_SERVING, {} of grace, GOAWAY, wait.\n",
        program::duration::Show(config.restart_after),
        program::duration::Show(config.grace)
    )?;
    writeln!(
        md,
        "| arm | calls | failed | failures | p50 ms | p99 ms | max ms |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|")?;
    for r in rows {
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.arm,
            r.calls,
            r.failed,
            r.failures,
            ms(r.p50),
            ms(r.p99),
            ms(r.max)
        )?;
    }
    writeln!(md, "\nTimeline (first repeat): `restart-timeline.svg`.\n")?;
    plot::panels(
        &folder.join("restart-timeline.svg"),
        "Rolling restart: drained vs killed",
        "seconds since the load started",
        panels,
    )
}

/// Two panels for one arm's first repeat: calls that failed per 100 ms, and
/// the slowest successful call per 100 ms; the replicas' events as dots.
fn timeline(arm: &str, rows: &[&CallRow], events: &[EventRow]) -> Vec<Panel> {
    const BIN_MS: f64 = 100.0;
    let first: Vec<&&CallRow> = rows.iter().filter(|r| r.repeat == 0).collect();
    let bins = first
        .iter()
        .map(|r| (r.due_ms / BIN_MS) as usize)
        .max()
        .map_or(0, |b| b + 1);
    let mut failed = vec![0.0; bins];
    let mut slowest = vec![0.0f64; bins];
    for r in &first {
        let bin = (r.due_ms / BIN_MS) as usize;
        match (r.outcome, r.latency_ms) {
            (Outcome::Ok, Some(ms)) => slowest[bin] = slowest[bin].max(ms),
            _ => failed[bin] += 1.0,
        }
    }
    let x = |bin: usize| bin as f64 * BIN_MS / 1e3;
    // Each kind of event on a level of its own, in the order they happen,
    // so that a drain's three steps stand apart.
    let top = failed.iter().copied().fold(1.0, f64::max);
    let level = |kind: &str| {
        top * match kind {
            "not_serving" | "killed" => 0.9,
            "goaway" => 0.7,
            "closed" => 0.5,
            _ => 0.3,
        }
    };
    // A vertical tick per event: up from 0 and back, joined along 0, where
    // the failed-calls line is drawn over the joins.
    let mut by_kind: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.arm == arm && e.repeat == 0) {
        let t = e.at_ms / 1e3;
        let tick = [(t, 0.0), (t, level(&e.event)), (t, 0.0)];
        by_kind.entry(&e.event).or_default().extend(tick);
    }
    let failed_line = Series::line(
        format!("{arm}: failed calls per 100 ms"),
        (0..bins).map(|b| (x(b), failed[b])).collect(),
    );
    // Drawn last, over the ticks' joins.
    let fails: Vec<Series> = by_kind
        .into_iter()
        .map(|(kind, points)| Series::line(kind, points))
        .chain([failed_line])
        .collect();
    vec![
        Panel {
            y_label: format!("{arm}: failed / 100 ms"),
            series: fails,
        },
        Panel {
            y_label: format!("{arm}: slowest ms"),
            series: vec![Series::line(
                format!("{arm}: slowest successful call per 100 ms"),
                (0..bins).map(|b| (x(b), slowest[b])).collect(),
            )],
        },
    ]
}

#[derive(Debug, Serialize, Deserialize)]
struct AgeRow {
    arm: String,
    calls: usize,
    failed: usize,
    failures: String,
    started: u64,
    share: [f64; 3],
}

fn age_table(
    config: &Config,
    raw: &Folder,
    out: &Folder,
) -> anyhow::Result<(Vec<AgeRow>, Vec<Panel>)> {
    let calls: Vec<CallRow> = raw.read_csv(age::CALLS)?;
    let counts: Vec<age::Counts> = out.read_csv(age::COUNTS)?;
    let last_third = super::ms(config.duration) * 2.0 / 3.0;
    let (mut rows, mut panels) = (Vec::new(), Vec::new());
    for arm in age::ARMS {
        let of_arm = arms(&calls, arm);
        let late: Vec<&CallRow> = of_arm
            .iter()
            .copied()
            .filter(|r| r.due_ms >= last_third)
            .collect();
        rows.push(AgeRow {
            arm: arm.to_string(),
            calls: of_arm.len(),
            failed: failed(&of_arm),
            failures: codes(&of_arm),
            started: counts
                .iter()
                .filter(|c| c.arm == arm)
                .map(|c| c.server_started)
                .sum(),
            share: shares(&late),
        });
        panels.push(share_panel(arm, &of_arm));
    }
    Ok((rows, panels))
}

fn age_section(
    config: &Config,
    folder: &Folder,
    rows: &[AgeRow],
    panels: &[Panel],
    md: &mut String,
) -> anyhow::Result<()> {
    let added = super::ms(age::added_at(config));
    writeln!(md, "**Connection age and a replica added later**\n")?;
    writeln!(
        md,
        "{} clients with a connection each through a layer-4 balancer; replica c added at {:.1} s; max_age {}, max_age_grace: the same age with tonic's grace of {}; shares over the last third of the run.\n",
        config.clients,
        added / 1e3,
        program::duration::Show(config.max_age),
        program::duration::Show(config.age_grace)
    )?;
    writeln!(
        md,
        "| arm | calls | failed | failures | started by the replicas | share a | share b | share c |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|---|")?;
    for r in rows {
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} |",
            r.arm, r.calls, r.failed, r.failures, r.started, r.share[0], r.share[1], r.share[2]
        )?;
    }
    writeln!(md, "\nShares per second (first repeat): `shares.svg`.\n")?;
    plot::panels(
        &folder.join("shares.svg"),
        "Each replica's share of calls, per second",
        "seconds since the load started",
        panels,
    )
}

/// Each replica's share of the answered calls in `rows`, a to c.
fn shares(rows: &[&CallRow]) -> [f64; 3] {
    let answered = rows
        .iter()
        .filter_map(|r| r.replica.as_deref())
        .count()
        .max(1) as f64;
    NAMES.map(|n| {
        rows.iter()
            .filter(|r| r.replica.as_deref() == Some(n))
            .count() as f64
            / answered
    })
}

fn share_panel(arm: &str, rows: &[&CallRow]) -> Panel {
    let first: Vec<&CallRow> = rows.iter().copied().filter(|r| r.repeat == 0).collect();
    let seconds = first
        .iter()
        .map(|r| r.due_ms / 1e3)
        .fold(0.0, f64::max)
        .ceil() as usize;
    let series = NAMES
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let points = (0..seconds)
                .map(|s| {
                    let in_second: Vec<&CallRow> = first
                        .iter()
                        .copied()
                        .filter(|r| (r.due_ms / 1e3) as usize == s)
                        .collect();
                    (s as f64 + 0.5, shares(&in_second)[i])
                })
                .collect();
            Series::line(format!("replica {name}"), points)
        })
        .collect();
    Panel {
        y_label: format!("{arm}: share"),
        series,
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct SlowRow {
    arm: String,
    calls: usize,
    failed: usize,
    share: [f64; 3],
    p50: Option<f64>,
    p99: Option<f64>,
}

fn slow_table(config: &Config, raw: &Folder) -> anyhow::Result<Vec<SlowRow>> {
    let calls: Vec<CallRow> = raw.read_csv(slow::CALLS)?;
    let warmup = super::ms(config.warmup);
    Ok(Strategy::value_variants()
        .iter()
        .map(|strategy| {
            let arm = strategy.to_string();
            let rows: Vec<&CallRow> = arms(&calls, &arm)
                .into_iter()
                .filter(|r| r.due_ms >= warmup)
                .collect();
            let ok = ok_latencies(rows.iter().copied());
            SlowRow {
                arm,
                calls: rows.len(),
                failed: failed(&rows),
                share: shares(&rows),
                p50: pct(&ok, 50.0),
                p99: pct(&ok, 99.0),
            }
        })
        .collect())
}

fn slow_section(config: &Config, rows: &[SlowRow], md: &mut String) -> anyhow::Result<()> {
    writeln!(md, "**Balancing around a slow replica**\n")?;
    writeln!(
        md,
        "Replica c adds {} to every call.\n",
        program::duration::Show(config.slower_by)
    )?;
    writeln!(
        md,
        "| strategy | calls | failed | share a | share b | share c | p50 ms | p99 ms |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|---|")?;
    for r in rows {
        writeln!(
            md,
            "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {} | {} |",
            r.arm,
            r.calls,
            r.failed,
            r.share[0],
            r.share[1],
            r.share[2],
            ms(r.p50),
            ms(r.p99)
        )?;
    }
    writeln!(md)?;
    Ok(())
}

#[derive(Debug, Serialize, Deserialize)]
struct TailRow {
    arm: String,
    calls: usize,
    failed: usize,
    p50: Option<f64>,
    p90: Option<f64>,
    p95: Option<f64>,
    p99: Option<f64>,
    max: Option<f64>,
    copies_per_call: f64,
    server_calls_per_call: f64,
    cancelled: u64,
}

fn tail_table(config: &Config, raw: &Folder, out: &Folder) -> anyhow::Result<Vec<TailRow>> {
    let calls: Vec<CallRow> = raw.read_csv(tail::CALLS)?;
    let counts: Vec<tail::Counts> = out.read_csv(tail::COUNTS)?;
    let warmup = super::ms(config.warmup);
    Ok(tail::ARMS
        .into_iter()
        .map(|arm| {
            let rows: Vec<&CallRow> = arms(&calls, arm)
                .into_iter()
                .filter(|r| r.due_ms >= warmup)
                .collect();
            let ok = ok_latencies(rows.iter().copied());
            let of_arm = counts.iter().filter(|c| c.arm == arm);
            let total = |f: fn(&tail::Counts) -> u64| of_arm.clone().map(f).sum::<u64>();
            let made = total(|c| c.calls).max(1) as f64;
            TailRow {
                arm: arm.to_string(),
                calls: rows.len(),
                failed: failed(&rows),
                p50: pct(&ok, 50.0),
                p90: pct(&ok, 90.0),
                p95: pct(&ok, 95.0),
                p99: pct(&ok, 99.0),
                max: pct(&ok, 100.0),
                copies_per_call: total(|c| c.copies) as f64 / made,
                server_calls_per_call: total(|c| c.server_started) as f64 / made,
                cancelled: total(|c| c.server_cancelled),
            }
        })
        .collect())
}

fn tail_section(config: &Config, rows: &[TailRow], md: &mut String) -> anyhow::Result<()> {
    writeln!(md, "**Hedging a tail**\n")?;
    writeln!(
        md,
        "10% of calls at least 20 ms, 5% at least 50 ms, 1% 100 ms; hedged after the {:.0}th percentile of recent answers. Latencies leave out the warm-up; the copies and the server's counts are over the whole arm, warm-up included (the hedge sends no copy before its histogram has a full period).\n",
        config.hedge_percentile * 100.0
    )?;
    writeln!(
        md,
        "| arm | calls | failed | p50 ms | p90 ms | p95 ms | p99 ms | max ms | copies per call | server calls per call | cancelled by the server |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|")?;
    for r in rows {
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {} |",
            r.arm,
            r.calls,
            r.failed,
            ms(r.p50),
            ms(r.p90),
            ms(r.p95),
            ms(r.p99),
            ms(r.max),
            r.copies_per_call,
            r.server_calls_per_call,
            r.cancelled
        )?;
    }
    writeln!(md)?;
    Ok(())
}
