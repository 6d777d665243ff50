//! System calls per unary call and per streamed message, counted by
//! `strace -c -f` around the server process, when strace is installed.
//!
//! strace stops the server at every system call, so it runs several times
//! slower; its *counts* are still right, its times are not, and this module
//! keeps only the counts. Each arm and shape runs twice, one run twice as
//! long as the other, and the difference between them is divided by the
//! difference in units answered: starting up, connecting and opening streams
//! cost the same in both runs and cancel out.

use std::{collections::BTreeMap, path::Path, sync::Arc, time::Duration};

use anyhow::Context;
use loadgen::{Counters, Schedule, WhenFull};
use serde::{Deserialize, Serialize};

use crate::{
    arm::Arm,
    load::{Load, connect},
    ramp::Shape,
    run::{snapshot, start_server},
};

/// System calls per unit of one arm and shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyscallCount {
    pub arm: String,
    pub shape: Shape,
    pub rate: f64,
    pub per_unit: f64,
    /// The five most frequent system calls, per unit.
    pub top: Vec<(String, f64)>,
}

/// Reads the table `strace -c` writes: system call name -> calls.
pub fn parse_strace(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // % time, seconds, usecs/call, calls, [errors,] syscall
            if fields.len() < 5 || fields[0].parse::<f64>().is_err() {
                return None;
            }
            let calls = fields[3].parse().ok()?;
            Some((fields.last()?.to_string(), calls))
        })
        .collect()
}

struct Run {
    calls: BTreeMap<String, u64>,
    units: u64,
}

/// Which server is counted, and under what load.
#[derive(Debug, Clone, Copy)]
pub struct Probe<'a> {
    /// The per-call server binary, started as a child under strace.
    pub exe: &'a Path,
    pub arm: Arm,
    pub shape: Shape,
    /// The core the server is pinned to, if any.
    pub cpu: Option<usize>,
    pub rate: f64,
}

async fn one(p: Probe<'_>, length: Duration, file: &Path) -> anyhow::Result<Run> {
    let wrapper = ["strace", "-f", "-c", "-o"].map(String::from).to_vec();
    let wrapper = [wrapper, vec![file.display().to_string()]].concat();
    let mut server = start_server(p.exe, p.arm, p.cpu, wrapper).await?;
    let channel = connect(server.ready.addr).await?;
    let slots = Schedule::constant(p.rate, length).slots();
    let deadline = Duration::from_secs(5);
    let counters = Arc::new(Counters::default());
    Load::open(p.shape, channel, 20, deadline)
        .await?
        .run(&slots, 128, WhenFull::Defer, deadline, counters)
        .await;
    let stats = snapshot(&mut server).await?;
    server.stop().await?;
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("strace wrote no {}", file.display()))?;
    Ok(Run {
        calls: parse_strace(&text),
        units: match p.shape {
            Shape::Unary => stats.unary_calls,
            Shape::Stream => stats.messages,
            Shape::RestH1 | Shape::RestH2 => stats.rest_requests,
        },
    })
}

/// Counts for `probe`, from a run of `length` and one of twice that; strace's
/// tables are kept in `dir`.
pub async fn count(probe: Probe<'_>, length: Duration, dir: &Path) -> anyhow::Result<SyscallCount> {
    std::fs::create_dir_all(dir)?;
    let Probe {
        arm, shape, rate, ..
    } = probe;
    let file = |n: u32| dir.join(format!("strace-{arm}-{shape}-{n}.txt"));
    let short = one(probe, length, &file(1)).await?;
    let long = one(probe, length * 2, &file(2)).await?;
    let units = long.units.saturating_sub(short.units).max(1) as f64;
    let mut per: Vec<(String, f64)> = long
        .calls
        .iter()
        .filter(|(name, _)| *name != "total")
        .map(|(name, &n)| {
            let before = short.calls.get(name).copied().unwrap_or(0);
            (name.clone(), (n as f64 - before as f64) / units)
        })
        .collect();
    per.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(SyscallCount {
        arm: arm.to_string(),
        shape,
        rate,
        per_unit: per.iter().map(|p| p.1).sum(),
        top: per.into_iter().take(5).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_strace_summary_table() {
        let text = "\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 45.00    0.004500           2      2001           sendto
 30.00    0.003000           1      2400       399 recvfrom
 25.00    0.002500           5       500           epoll_wait
------ ----------- ----------- --------- --------- ----------------
100.00    0.010000           2      4901       399 total
";
        let calls = parse_strace(text);
        assert_eq!(calls["sendto"], 2001);
        assert_eq!(calls["recvfrom"], 2400);
        assert_eq!(calls["epoll_wait"], 500);
        assert_eq!(calls["total"], 4901);
        assert_eq!(calls.len(), 4);
    }
}
