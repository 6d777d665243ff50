//! The measurement: the interleaved schedule, the loop that follows it, and
//! every sample it keeps, written out as CSV.

use std::time::{Duration, Instant};

use anyhow::Context;

use super::Arm;

// ANCHOR: schedule
/// One step of a round: call number `i` of arm `arm`, counted or warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub arm: usize,
    pub i: u32,
    pub warmup: bool,
}

/// The order of one round: every arm's call 0, then every arm's call 1, ...,
/// warm-up calls first. Interleaving call by call means a slow patch of the
/// machine hits every arm, instead of whichever arm happened to run then.
pub fn schedule(arms: usize, warmup: u32, calls: u32) -> impl Iterator<Item = Step> {
    (0..warmup + calls).flat_map(move |k| {
        (0..arms).map(move |arm| Step {
            arm,
            i: k.saturating_sub(warmup),
            warmup: k < warmup,
        })
    })
}
// ANCHOR_END: schedule

/// Every measured sample of a run: `samples[arm][round]` in microseconds.
pub type Samples = Vec<Vec<Vec<u64>>>;

/// Runs `rounds` rounds of the interleaved schedule. `progress` is called
/// every couple of seconds with (round, calls done per arm, calls per arm).
pub async fn measure(
    arms: &[Arm],
    warmup: u32,
    calls: u32,
    rounds: u32,
    mut progress: impl FnMut(u32, u32, u32),
) -> anyhow::Result<Samples> {
    let mut samples: Samples =
        vec![vec![Vec::with_capacity(calls as usize); rounds as usize]; arms.len()];
    let mut last_report = Instant::now();
    for round in 0..rounds {
        for (k, step) in schedule(arms.len(), warmup, calls).enumerate() {
            let arm = &arms[step.arm];
            let took = arm
                .caller
                .call()
                .await
                .with_context(|| format!("arm `{}`", arm.label))?;
            if !step.warmup {
                samples[step.arm][round as usize].push(took.as_micros() as u64);
            }
            if last_report.elapsed() >= Duration::from_secs(2) {
                last_report = Instant::now();
                progress(round + 1, (k / arms.len()) as u32, warmup + calls);
            }
        }
    }
    Ok(samples)
}

/// Every sample as CSV, one line each: which arm, which round (from 1), which
/// call of the round (from 0, warm-up not counted) and how long it took.
pub fn write_csv(
    out: &mut impl std::io::Write,
    arms: &[Arm],
    samples: &Samples,
) -> std::io::Result<()> {
    writeln!(out, "arm,round,i,micros")?;
    for (arm, rounds) in arms.iter().zip(samples) {
        for (round, values) in rounds.iter().enumerate() {
            for (i, micros) in values.iter().enumerate() {
                writeln!(out, "\"{}\",{},{i},{micros}", arm.label, round + 1)?;
            }
        }
    }
    Ok(())
}
