//! From the raw records to the tables (`reduce`), and from the tables to the
//! report and its plots (`render`).
//!
//! The verdicts are rules on the per-second goodput (user requests answered
//! before their user gave up, over user requests due that second):
//! recovered once three seconds in a row reach 90 %; metastable if every
//! second of the 30 after the trigger stays below 10 %.

use std::ops::Range;

use harness::{
    Folder,
    plot::{Panel, Series},
    report::table,
};
use loadgen::{Outcome, SlotRecord};
use serde::{Deserialize, Serialize};

use crate::{
    hop::Second,
    run::{Config, Counted, LAYERS, Variant, raw_name},
};

/// One second of one variant in one block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineRow {
    pub variant: String,
    pub block: u32,
    pub second: u32,
    /// User requests due this second, and those answered in time.
    pub due: u64,
    pub good: u64,
    /// Attempts sent by the users, the frontend and the middle.
    pub user_attempts: u64,
    pub front_attempts: u64,
    pub middle_attempts: u64,
    /// Attempts the layers' throttles held back, all layers.
    pub throttled: u64,
    pub leaf_received: u64,
    pub leaf_worked: u64,
    pub leaf_worked_late: u64,
    pub leaf_orphaned: u64,
    pub leaf_shed: u64,
    pub leaf_dropped: u64,
}

/// One variant in one block, summed up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    pub variant: String,
    pub block: u32,
    /// Leaf attempts per user request before the trigger, and from its start to the end.
    pub amplification_before: f64,
    pub amplification: f64,
    /// The most leaf attempts per user request in any one second.
    pub amplification_peak: f64,
    /// Leaf attempts per user request over the last 10 s of the run.
    pub amplification_end: f64,
    pub goodput_before: f64,
    /// From the trigger's end to the end of the run.
    pub goodput_after: f64,
    /// Seconds from the trigger's end to the first of three seconds in a row
    /// at 90 % goodput; empty if that never came.
    pub recovered_s: Option<u32>,
    /// Every second of the 30 after the trigger below 10 % goodput.
    pub metastable: bool,
    /// From the trigger's start, shares of the leaf's finished work: ended
    /// when nobody waited for it any more (its caller's attempt had been
    /// abandoned), and ended after its user had given up.
    pub wasted: f64,
    pub wasted_user_gone: f64,
    /// From the trigger's start: calls the frontend and the middle finished
    /// after their caller had gone, as a share of the calls they received.
    pub orphaned_front: f64,
    pub orphaned_middle: f64,
    /// Cores busy on average over the load: the generator (the users), and
    /// the chain's three processes together.
    pub cores_users: f64,
    pub cores_chain: f64,
}

/// The name a variant has in the tables.
pub fn key(variant: Variant) -> String {
    variant.label()
}

fn sum(seconds: &[Second], range: Range<usize>, field: fn(&Second) -> u64) -> u64 {
    seconds
        .get(range.start.min(seconds.len())..range.end.min(seconds.len()))
        .map_or(0, |s| s.iter().map(field).sum())
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Raw records -> `timeline.csv`, `summary.csv`.
pub fn reduce(config: &Config, raw: &Folder, out: &Folder) -> anyhow::Result<()> {
    let mut timeline = Vec::new();
    let mut summary = Vec::new();
    let before = config.leaf.trigger_at.as_secs() as usize;
    let warmup = config.warmup.as_secs() as usize;
    let ended = (config.leaf.trigger_at + config.leaf.trigger_for).as_secs() as usize;
    let span = config.span().as_secs() as usize;
    for block in 1..=config.blocks {
        for &variant in &config.variants {
            let users: Vec<SlotRecord> =
                raw.read_csv(&format!("{}.csv", raw_name("users", variant, block)))?;
            let counted: Counted =
                raw.read_json(&format!("{}.json", raw_name("hops", variant, block)))?;
            let [user, front, middle, leaf] = &counted.layers[..] else {
                anyhow::bail!(
                    "{} layers counted, not {}",
                    counted.layers.len(),
                    LAYERS.len()
                );
            };
            let mut due = vec![0u64; span];
            let mut good = vec![0u64; span];
            for record in &users {
                let s = (record.due.as_secs() as usize).min(span - 1);
                due[s] += 1;
                good[s] += u64::from(record.outcome == Outcome::Ok);
            }
            let at = |layer: &[Second], s: usize, field: fn(&Second) -> u64| {
                layer.get(s).map_or(0, field)
            };
            for s in 0..span {
                timeline.push(TimelineRow {
                    variant: key(variant),
                    block,
                    second: s as u32,
                    due: due[s],
                    good: good[s],
                    user_attempts: at(user, s, |c| c.attempts),
                    front_attempts: at(front, s, |c| c.attempts),
                    middle_attempts: at(middle, s, |c| c.attempts),
                    throttled: [user, front, middle]
                        .iter()
                        .map(|l| at(l, s, |c| c.throttled))
                        .sum(),
                    leaf_received: at(leaf, s, |c| c.received),
                    leaf_worked: at(leaf, s, |c| c.worked),
                    leaf_worked_late: at(leaf, s, |c| c.worked_late),
                    leaf_orphaned: at(leaf, s, |c| c.orphaned),
                    leaf_shed: at(leaf, s, |c| c.shed),
                    leaf_dropped: at(leaf, s, |c| c.dropped),
                });
            }
            let goodput = |s: usize| ratio(good[s], due[s]);
            let recovered_s = (ended..span.saturating_sub(2))
                .find(|&s| (s..s + 3).all(|t| goodput(t) >= 0.9))
                .map(|s| (s - ended) as u32);
            let watched = ended..(ended + 30).min(span);
            let metastable = watched.len() >= 30 && watched.clone().all(|s| goodput(s) < 0.1);
            let due_in = |r: Range<usize>| due[r].iter().sum::<u64>();
            let good_in = |r: Range<usize>| good[r].iter().sum::<u64>();
            let storm = before..usize::MAX;
            let received = |l: &[Second]| sum(l, storm.clone(), |c| c.received);
            let orphaned = |l: &[Second]| sum(l, storm.clone(), |c| c.orphaned);
            let worked = sum(leaf, storm.clone(), |c| c.worked);
            summary.push(SummaryRow {
                variant: key(variant),
                block,
                amplification_before: ratio(
                    sum(leaf, warmup..before, |c| c.received),
                    due_in(warmup..before),
                ),
                amplification: ratio(received(leaf), due_in(before..span)),
                amplification_peak: (before..span)
                    .map(|s| ratio(at(leaf, s, |c| c.received), due[s]))
                    .fold(0.0, f64::max),
                amplification_end: ratio(
                    sum(leaf, span.saturating_sub(10)..span, |c| c.received),
                    due_in(span.saturating_sub(10)..span),
                ),
                goodput_before: ratio(good_in(warmup..before), due_in(warmup..before)),
                goodput_after: ratio(good_in(ended..span), due_in(ended..span)),
                recovered_s,
                metastable,
                wasted: ratio(orphaned(leaf), worked),
                wasted_user_gone: ratio(sum(leaf, storm.clone(), |c| c.worked_late), worked),
                orphaned_front: ratio(orphaned(front), received(front)),
                orphaned_middle: ratio(orphaned(middle), received(middle)),
                cores_users: counted.cpu_s[0] / config.span().as_secs_f64(),
                cores_chain: counted.cpu_s[1..].iter().sum::<f64>() / config.span().as_secs_f64(),
            });
        }
    }
    out.write_csv("timeline.csv", &timeline)?;
    out.write_csv("summary.csv", &summary)?;
    Ok(())
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// The verdict on one variant in one block, in words.
pub fn verdict(row: &SummaryRow, after: u32) -> String {
    match (row.recovered_s, row.metastable) {
        (Some(s), _) => format!("recovered in {s} s"),
        (None, true) => "metastable: below 10% for 30 s".into(),
        (None, false) => format!(
            "not recovered in {after} s ({} good)",
            pct(row.goodput_after)
        ),
    }
}

/// Tables -> `results.md`, `goodput.svg`, `leaf.svg`; returns the table.
pub fn render(config: &Config, folder: &Folder) -> anyhow::Result<String> {
    let summary: Vec<SummaryRow> = folder.read_csv("summary.csv")?;
    let timeline: Vec<TimelineRow> = folder.read_csv("timeline.csv")?;
    let after = config.after.as_secs() as u32;
    let mut out = String::new();
    let capacity = config.leaf.capacity();
    let range = |f: fn(&SummaryRow) -> f64| {
        let values = summary.iter().map(f);
        let low = values.clone().fold(f64::INFINITY, f64::min);
        (low, values.fold(0.0, f64::max))
    };
    // "1.00" when every variant agrees, "0.98 to 1.02" when they do not.
    let span_of = |f: fn(&SummaryRow) -> f64, show: fn(f64) -> String| {
        let (low, high) = range(f);
        match show(low) == show(high) {
            true => show(low),
            false => format!("{} to {}", show(low), show(high)),
        }
    };
    out.push_str(&format!(
        "{} user requests/s, each given up after {:?}; the leaf serves {:.0}/s ({} workers x {:?}, \
         {} queue places), {:.0}/s from second {} for {:?}. Before the trigger every variant sent \
         {} leaf attempts per user request and answered {} of them in time.{}\n\n",
        config.rate,
        config.deadline,
        capacity,
        config.leaf.workers,
        config.leaf.service,
        config.leaf.queue,
        capacity / 2.0,
        config.leaf.trigger_at.as_secs(),
        config.leaf.trigger_for,
        span_of(|r| r.amplification_before, |x| format!("{x:.2}")),
        span_of(|r| r.goodput_before, pct),
        if config.blocks > 1 {
            " Cells give block 1 · block 2 ..."
        } else {
            ""
        },
    ));
    let cells = |variant: Variant, cell: &dyn Fn(&SummaryRow) -> String| {
        summary
            .iter()
            .filter(|r| r.variant == key(variant))
            .map(cell)
            .collect::<Vec<_>>()
            .join(" · ")
    };
    table(
        &mut out,
        &[
            "variant",
            "after the trigger",
            "goodput after",
            "leaf attempts per request from the trigger",
            "in the worst second",
            "in the last 10 s",
            "leaf work nobody waited for (user gone)",
            "answers nobody waited for, frontend / middle",
            "cores busy, users / chain",
        ],
        config.variants.iter().map(|&v| {
            vec![
                v.label(),
                cells(v, &|r| verdict(r, after)),
                cells(v, &|r| pct(r.goodput_after)),
                cells(v, &|r| format!("{:.2}", r.amplification)),
                cells(v, &|r| format!("{:.1}", r.amplification_peak)),
                cells(v, &|r| format!("{:.2}", r.amplification_end)),
                cells(v, &|r| {
                    format!("{} ({})", pct(r.wasted), pct(r.wasted_user_gone))
                }),
                cells(v, &|r| {
                    format!("{} / {}", pct(r.orphaned_front), pct(r.orphaned_middle))
                }),
                cells(v, &|r| {
                    format!("{:.2} / {:.2}", r.cores_users, r.cores_chain)
                }),
            ]
        }),
    );
    folder.write_text("results.md", &out)?;

    // The plots: block 1, one panel per deadline setting.
    let mut goodput = Vec::new();
    let mut leaf = Vec::new();
    for deadlines in [false, true] {
        let variants: Vec<Variant> = config
            .variants
            .iter()
            .copied()
            .filter(|v| v.deadlines == deadlines)
            .collect();
        if variants.is_empty() {
            continue;
        }
        let series = |y: fn(&TimelineRow) -> f64| {
            variants
                .iter()
                .map(|&v| {
                    let points = timeline
                        .iter()
                        .filter(|r| r.block == 1 && r.variant == key(v))
                        .map(|r| (f64::from(r.second), y(r)))
                        .collect();
                    Series::line(v.retries.label(), points)
                })
                .collect()
        };
        let setting = if deadlines {
            "deadlines passed on"
        } else {
            "no deadlines"
        };
        goodput.push(Panel {
            y_label: format!("goodput, {setting}"),
            series: series(|r| ratio(r.good, r.due)),
        });
        leaf.push(Panel {
            y_label: format!("leaf attempts/s, {setting}"),
            series: series(|r| r.leaf_received as f64),
        });
    }
    let trigger = format!(
        "capacity halved from {} s to {} s",
        config.leaf.trigger_at.as_secs(),
        (config.leaf.trigger_at + config.leaf.trigger_for).as_secs()
    );
    harness::plot::panels(
        &folder.join("goodput.svg"),
        &format!("Share of user requests answered in time ({trigger})"),
        "seconds",
        &goodput,
    )?;
    harness::plot::panels(
        &folder.join("leaf.svg"),
        &format!("Attempts arriving at the leaf ({trigger})"),
        "seconds",
        &leaf,
    )?;
    Ok(out)
}
