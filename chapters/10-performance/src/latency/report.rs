//! What a run prints: what was measured and where, one line per arm, how far
//! apart the rounds were, and how the TLS handshakes went.

use std::fmt::Write as _;

use super::{Args, Arm, Caller, Samples};
use crate::stats::Summary;

fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

/// One arm's line, like the seed's, plus p99 and (with a floor) the multiple.
pub fn format_line(label: &str, s: &Summary, floor_p50: Option<u64>) -> String {
    let mut line = format!(
        "{label:<38} n={:<5} p50={:>7.3}ms  p95={:>7.3}ms  p99={:>7.3}ms  mean={:>7.3}ms  max={:>7.3}ms",
        s.n,
        ms(s.p50),
        ms(s.p95),
        ms(s.p99),
        s.mean / 1000.0,
        ms(s.max)
    );
    if let Some(floor) = floor_p50.filter(|f| *f > 0) {
        let _ = write!(line, "  p50 = {:.1}x floor", s.p50 as f64 / floor as f64);
    }
    line
}

/// Where client and servers ran, and what each arm is about to do.
pub(super) fn print_plan(args: &Args, placement: &str) {
    println!(
        "{placement}; CPUs allowed: {} (taskset narrows this)",
        program::proc::cpus_allowed()
    );
    let how = if args.fresh_connections {
        "a new connection per call (two arms reuse one, to compare)"
    } else {
        "one reused connection (or pool) per arm"
    };
    println!(
        "{} sequential calls per arm after {} warm-up calls, {how}, arms interleaved call by call{}:",
        args.calls,
        args.warmup,
        if args.repeat > 1 {
            format!(", {} rounds", args.repeat)
        } else {
            String::new()
        }
    );
    println!();
}

/// One line per arm, every round's samples together. With a floor (the last
/// arm), every other arm is also a multiple of the floor's p50.
pub(super) fn print_arms(arms: &[Arm], samples: &Samples, floor: bool) {
    let all = |arm: usize| samples[arm].concat();
    let floor_p50 = floor
        .then(|| Summary::of(&all(arms.len() - 1)).map(|s| s.p50))
        .flatten();
    for (a, arm) in arms.iter().enumerate() {
        let summary = Summary::of(&all(a)).expect("at least one call per arm");
        let is_floor = floor && a == arms.len() - 1;
        println!(
            "{}",
            format_line(&arm.label, &summary, floor_p50.filter(|_| !is_floor))
        );
    }
}

/// Each round's p50 per arm, and how far the slowest round was from the fastest.
pub(super) fn print_rounds(arms: &[Arm], samples: &Samples) {
    println!();
    println!("p50 of each round (ms), and how far apart the rounds were:");
    for (a, arm) in arms.iter().enumerate() {
        let p50s: Vec<u64> = samples[a]
            .iter()
            .filter_map(|r| Summary::of(r).map(|s| s.p50))
            .collect();
        let (lo, hi) = (
            p50s.iter().min().copied().unwrap_or(0),
            p50s.iter().max().copied().unwrap_or(0),
        );
        let list: Vec<String> = p50s.iter().map(|p| format!("{:.3}", ms(*p))).collect();
        println!(
            "{:<38} {}  spread {:.0}%",
            arm.label,
            list.join(" "),
            if lo > 0 {
                (hi - lo) as f64 / lo as f64 * 100.0
            } else {
                0.0
            }
        );
    }
}

/// For the fresh-connection arms: how many handshakes were full and how many
/// resumed, so that a reader can see the resumed arm really resumed.
pub(super) fn print_handshakes(arms: &[Arm]) {
    let resumable: Vec<_> = arms
        .iter()
        .filter_map(|arm| match &arm.caller {
            Caller::Fresh { handshakes, .. } => Some((arm, handshakes.counts())),
            _ => None,
        })
        .collect();
    if !resumable.is_empty() {
        println!();
        println!("TLS handshakes, warm-up included (rustls handshake_kind):");
        for (arm, (full, resumed)) in resumable {
            println!("{:<38} {full} full, {resumed} resumed", arm.label);
        }
    }
}

/// `--plot`: one row per arm, p50 and p99 over every round, and the floor's
/// p50 (the last arm, with `--floor`) as the line nothing can beat.
pub(super) fn plot(
    file: std::fs::File,
    path: &std::path::Path,
    args: &Args,
    arms: &[Arm],
    samples: &Samples,
) -> anyhow::Result<()> {
    let rows: Vec<crate::plot::Row> = arms
        .iter()
        .zip(samples)
        .filter_map(|(arm, rounds)| {
            let s = Summary::of(&rounds.concat())?;
            Some(crate::plot::Row {
                label: arm.label.clone(),
                p50: ms(s.p50),
                p99: ms(s.p99),
            })
        })
        .collect();
    let floor = args.floor.then(|| rows.last().map(|r| r.p50)).flatten();
    let title = format!(
        "latency_compare{}: p50 and p99 of {} calls per arm",
        if args.fresh_connections {
            " --fresh-connections"
        } else {
            ""
        },
        args.calls * args.repeat,
    );
    crate::plot::dots(file, path, &title, &rows, floor)
}
