//! From the records on disk to `summary.md`, `restart-timeline.svg` and
//! `shares.svg`. Everything here reads files only, so `--render DIR` redraws
//! a finished run.

use std::{collections::BTreeMap, fmt::Write as _};

use harness::{
    Folder,
    plot::{self, Panel, Series},
};
use loadgen::Outcome;
use perf::stats::nearest_rank;

use super::{CallRow, Config, EventRow, Part, age, restart, slow, tail};

const NAMES: [&str; 3] = ["a", "b", "c"];

pub fn render(config: &Config, folder: &Folder) -> anyhow::Result<String> {
    let meta = folder.meta()?;
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
        match part {
            Part::Restart => restart_section(config, folder, &mut md)?,
            Part::Age => age_section(config, folder, &mut md)?,
            Part::Slow => slow_section(config, folder, &mut md)?,
            Part::Tail => tail_section(folder, &mut md)?,
        }
    }
    folder.write_text("summary.md", &md)?;
    Ok(md)
}

/// The nearest-rank percentile `p` (0-100): a latency that really happened.
fn pct(values: &[f64], p: f64) -> f64 {
    nearest_rank(values, p).unwrap_or(f64::NAN)
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

fn restart_section(config: &Config, folder: &Folder, md: &mut String) -> anyhow::Result<()> {
    let calls: Vec<CallRow> = folder.read_csv(restart::CALLS)?;
    let events: Vec<EventRow> = folder.read_csv(restart::EVENTS)?;
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
    let mut panels = Vec::new();
    for arm in [restart::Arm::Drained, restart::Arm::Killed].map(restart::Arm::name) {
        let rows = arms(&calls, arm);
        let ok = ok_latencies(rows.iter().copied());
        writeln!(
            md,
            "| {arm} | {} | {} | {} | {:.2} | {:.2} | {:.2} |",
            rows.len(),
            failed(&rows),
            codes(&rows),
            pct(&ok, 50.0),
            pct(&ok, 99.0),
            pct(&ok, 100.0)
        )?;
        panels.extend(timeline(arm, &rows, &events));
    }
    writeln!(md, "\nTimeline (first repeat): `restart-timeline.svg`.\n")?;
    plot::panels(
        &folder.join("restart-timeline.svg"),
        "Rolling restart: drained vs killed",
        "seconds since the load started",
        &panels,
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

fn age_section(config: &Config, folder: &Folder, md: &mut String) -> anyhow::Result<()> {
    let calls: Vec<CallRow> = folder.read_csv(age::CALLS)?;
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
    let counts: Vec<age::Counts> = folder.read_csv(age::COUNTS)?;
    writeln!(
        md,
        "| arm | calls | failed | failures | started by the replicas | share a | share b | share c |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|---|")?;
    let last_third = super::ms(config.duration) * 2.0 / 3.0;
    let mut panels = Vec::new();
    for arm in age::ARMS {
        let rows = arms(&calls, arm);
        let late: Vec<&CallRow> = rows
            .iter()
            .copied()
            .filter(|r| r.due_ms >= last_third)
            .collect();
        let share = shares(&late);
        let started: u64 = counts
            .iter()
            .filter(|c| c.arm == arm)
            .map(|c| c.server_started)
            .sum();
        writeln!(
            md,
            "| {arm} | {} | {} | {} | {started} | {:.3} | {:.3} | {:.3} |",
            rows.len(),
            failed(&rows),
            codes(&rows),
            share[0],
            share[1],
            share[2]
        )?;
        panels.push(share_panel(arm, &rows));
    }
    writeln!(md, "\nShares per second (first repeat): `shares.svg`.\n")?;
    plot::panels(
        &folder.join("shares.svg"),
        "Each replica's share of calls, per second",
        "seconds since the load started",
        &panels,
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

fn slow_section(config: &Config, folder: &Folder, md: &mut String) -> anyhow::Result<()> {
    let calls: Vec<CallRow> = folder.read_csv(slow::CALLS)?;
    let warmup = super::ms(config.warmup);
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
    for strategy in slow::ARMS {
        let arm = slow::name(strategy);
        let rows: Vec<&CallRow> = arms(&calls, arm)
            .into_iter()
            .filter(|r| r.due_ms >= warmup)
            .collect();
        let ok = ok_latencies(rows.iter().copied());
        let share = shares(&rows);
        writeln!(
            md,
            "| {arm} | {} | {} | {:.3} | {:.3} | {:.3} | {:.2} | {:.2} |",
            rows.len(),
            failed(&rows),
            share[0],
            share[1],
            share[2],
            pct(&ok, 50.0),
            pct(&ok, 99.0)
        )?;
    }
    writeln!(md)?;
    Ok(())
}

fn tail_section(folder: &Folder, md: &mut String) -> anyhow::Result<()> {
    let calls: Vec<CallRow> = folder.read_csv(tail::CALLS)?;
    let counts: Vec<tail::Counts> = folder.read_csv(tail::COUNTS)?;
    let config: Config = folder.read_json(harness::experiment::CONFIG)?;
    let warmup = super::ms(config.warmup);
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
    for arm in tail::ARMS {
        let rows: Vec<&CallRow> = arms(&calls, arm)
            .into_iter()
            .filter(|r| r.due_ms >= warmup)
            .collect();
        let ok = ok_latencies(rows.iter().copied());
        let of_arm = counts.iter().filter(|c| c.arm == arm);
        let total = |f: fn(&tail::Counts) -> u64| of_arm.clone().map(f).sum::<u64>();
        let made = total(|c| c.calls).max(1) as f64;
        writeln!(
            md,
            "| {arm} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.3} | {:.3} | {} |",
            rows.len(),
            failed(&rows),
            pct(&ok, 50.0),
            pct(&ok, 90.0),
            pct(&ok, 95.0),
            pct(&ok, 99.0),
            pct(&ok, 100.0),
            total(|c| c.copies) as f64 / made,
            total(|c| c.server_started) as f64 / made,
            total(|c| c.server_cancelled)
        )?;
    }
    writeln!(md)?;
    Ok(())
}
