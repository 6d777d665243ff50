//! From slot records to numbers: every slot counted once, and percentiles.

use std::fmt;

pub use perf::stats::Percentiles;
use serde::{Deserialize, Serialize};

use crate::open_loop::{Outcome, SlotRecord};

/// Every slot is counted once: `scheduled = ok + failed + skipped + shed +
/// aborted + unfinished`. Nothing the schedule asked for disappears.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub scheduled: u64,
    pub ok: u64,
    pub failed: u64,
    pub skipped: u64,
    pub shed: u64,
    pub aborted: u64,
    pub unfinished: u64,
    /// Sent, but only after waiting for a free place.
    pub deferred: u64,
    /// Successful calls, from when they were due to when they ended.
    pub latency: Percentiles,
    /// Every send, from its start to its end: how long the sender was blocked.
    pub send: Percentiles,
    /// Every send, from due to start: the generator's own accuracy (and deferrals).
    pub lateness: Percentiles,
}

impl Summary {
    pub fn of<'a>(records: impl IntoIterator<Item = &'a SlotRecord>) -> Summary {
        let records: Vec<&SlotRecord> = records.into_iter().collect();
        let count = |o: Outcome| records.iter().filter(|r| r.outcome == o).count() as u64;
        let sent = || records.iter().filter(|r| r.started.is_some());
        Summary {
            scheduled: records.len() as u64,
            ok: count(Outcome::Ok),
            failed: count(Outcome::Failed),
            skipped: count(Outcome::Skipped),
            shed: count(Outcome::Shed),
            aborted: count(Outcome::Aborted),
            unfinished: count(Outcome::Unfinished),
            deferred: records.iter().filter(|r| r.deferred).count() as u64,
            latency: Percentiles::of(
                records
                    .iter()
                    .filter(|r| r.outcome == Outcome::Ok)
                    .filter_map(|r| r.latency()),
            ),
            send: Percentiles::of(sent().filter_map(|r| r.send_duration())),
            lateness: Percentiles::of(sent().filter_map(|r| r.lateness())),
        }
    }

    /// One summary per step of a ramp, in step order.
    pub fn by_step(records: &[SlotRecord]) -> Vec<Summary> {
        let steps = records.iter().map(|r| r.step + 1).max().unwrap_or(0);
        (0..steps)
            .map(|step| Summary::of(records.iter().filter(|r| r.step == step)))
            .collect()
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "slots: {} scheduled, {} ok, {} failed, {} skipped, {} shed, {} deferred{}{}",
            self.scheduled,
            self.ok,
            self.failed,
            self.skipped,
            self.shed,
            self.deferred,
            match self.aborted {
                0 => String::new(),
                n => format!(", {n} aborted"),
            },
            match self.unfinished {
                0 => String::new(),
                n => format!(", {n} unfinished"),
            },
        )?;
        writeln!(f, "latency from due (ok): {}", self.latency)?;
        writeln!(f, "send duration:         {}", self.send)?;
        write!(f, "lateness of sends:     {}", self.lateness)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rec(index: u64, outcome: Outcome, started: Option<u64>, ended: Option<u64>) -> SlotRecord {
        let ms = Duration::from_millis;
        SlotRecord {
            index,
            step: (index / 2) as usize,
            due: ms(index * 10),
            started: started.map(ms),
            ended: ended.map(ms),
            outcome,
            deferred: false,
            code: (outcome == Outcome::Failed).then(|| "UNAVAILABLE".to_string()),
        }
    }

    #[test]
    fn every_slot_is_counted_once_and_latency_runs_from_due() {
        let records = [
            rec(0, Outcome::Ok, Some(0), Some(5)),
            rec(1, Outcome::Ok, Some(11), Some(40)),
            rec(2, Outcome::Skipped, None, None),
            rec(3, Outcome::Failed, Some(30), Some(31)),
        ];
        let s = Summary::of(&records);
        assert_eq!((s.scheduled, s.ok, s.failed, s.skipped), (4, 2, 1, 1));
        assert_eq!(s.latency.count, 2);
        assert_eq!(s.latency.max_ms, 30.0); // slot 1: due 10, ended 40
        assert_eq!(s.send.count, 3);
        assert_eq!(s.lateness.max_ms, 1.0);
        let steps = Summary::by_step(&records);
        assert_eq!(steps.len(), 2);
        assert_eq!((steps[1].skipped, steps[1].failed), (1, 1));
    }

    #[test]
    fn csv_has_one_row_per_slot_with_every_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sends.csv");
        let records = [
            rec(0, Outcome::Ok, Some(0), Some(5)),
            rec(1, Outcome::Failed, Some(10), Some(12)),
        ];
        harness::records::write_csv(&path, &records).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "index,step,due_ms,started_ms,ended_ms,outcome,deferred,code"
        );
        assert_eq!(lines[1], "0,0,0.000,0.000,5.000,ok,false,");
        assert_eq!(
            lines[2],
            "1,0,10.000,10.000,12.000,failed,false,UNAVAILABLE"
        );
    }
}
