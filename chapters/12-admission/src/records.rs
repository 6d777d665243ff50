//! The files an experiment leaves, as types: the exclusions ledger, each
//! run's client file, and [`load`], which reads one run's records back into
//! what the analysis and the plots need. Chapter 11's server records
//! (`messages.csv`, `timeline.csv`, `budget.csv`, `server.json`) are read
//! through chapter 11's types.

use harness::{Folder, RunMeta};
use ingest::record::{
    BUDGET, BudgetRow, MESSAGES, MessageRow, SERVER, Sample, ServerSummary, TIMELINE,
};
use loadgen::{SlotRecord, ingest::CallRecord};
use serde::{Deserialize, Serialize};

use crate::{
    PolicyKind,
    analysis::{Message, Run},
};

pub const LEDGER: &str = "ledger.csv";
pub const CLIENT: &str = "client.json";
pub const CONTROLLER: &str = "controller.csv";

/// `sends-N.csv`: every slot of stream N.
pub fn sends_file(stream: usize) -> String {
    format!("sends-{stream}.csv")
}

/// One row of the exclusions ledger: every attempt, valid or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub attempt: usize,
    pub block: usize,
    /// Position within its block, from 1.
    pub position: usize,
    pub policy: PolicyKind,
    /// Its folder, relative to the experiment's.
    pub dir: String,
    pub valid: bool,
    pub reason: String,
    /// The machine's 1-minute load average as the attempt started: a run
    /// that shared the cores with something else says so.
    #[serde(default)]
    pub loadavg_1m: Option<f64>,
}

/// `client.json`: each stream's call, and whether every one ended OK.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientFile {
    pub meta: RunMeta,
    pub all_ok: bool,
    pub streams: Vec<CallRecord>,
}

/// What a run left for the plots besides the analysis.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub block: usize,
    pub policy: PolicyKind,
    /// (s, budget, queued) on the plan's clock
    pub timeline: Vec<(f64, f64, f64)>,
    /// (due s, send ms) of stream 0
    pub sends: Vec<(f64, f64)>,
}

/// Reads one valid run's records back, on the plan's clock.
pub fn load(run: &Folder, attempt: &Attempt, workers: usize) -> anyhow::Result<(Run, Trace)> {
    let server: ServerSummary = run.read_json(SERVER)?;
    let epoch_ms = server
        .epoch_ms
        .ok_or_else(|| anyhow::anyhow!("the server saw no call (no epoch)"))?;
    let s = |d: std::time::Duration| d.as_secs_f64() - epoch_ms / 1e3;
    let messages: Vec<MessageRow> = run.read_csv(MESSAGES)?;
    anyhow::ensure!(!messages.is_empty(), "the server processed no message");
    let client: ClientFile = run.read_json(CLIENT)?;
    anyhow::ensure!(client.all_ok, "a call did not end OK");
    let sends: Vec<SlotRecord> = run.read_csv(&sends_file(0))?;
    let budget: Vec<BudgetRow> = run.read_csv(BUDGET)?;
    let timeline: Vec<Sample> = run.read_csv(TIMELINE)?;
    let run = Run {
        block: attempt.block,
        policy: attempt.policy.to_string(),
        position: attempt.position,
        messages: messages
            .iter()
            .map(|m| Message {
                enqueued_s: s(m.enqueued),
                queue_ms: m.queue_residence().as_secs_f64() * 1e3,
                end_s: s(m.service_end),
            })
            .collect(),
        scheduled: client.streams.iter().map(|c| c.summary.scheduled).sum(),
        skipped: client.streams.iter().map(|c| c.summary.skipped).sum(),
        longest_send_ms: client
            .streams
            .iter()
            .map(|c| c.summary.send.max_ms)
            .fold(0.0, f64::max),
        idle_with_backlog_ms: server.idle_with_backlog_ms,
        workers,
        budget: budget.iter().map(|b| (s(b.at), b.to)).collect(),
        start_budget: attempt.policy.start_budget(),
        call_s: client.streams.iter().map(|c| c.call_s).fold(0.0, f64::max),
    };
    let trace = Trace {
        block: attempt.block,
        policy: attempt.policy,
        timeline: timeline
            .iter()
            .map(|t| (s(t.at), t.budget as f64, t.queued as f64))
            .filter(|p| p.0 >= 0.0)
            .collect(),
        sends: sends
            .iter()
            .filter_map(|r| {
                let send = r.send_duration()?;
                Some((r.due.as_secs_f64(), send.as_secs_f64() * 1e3))
            })
            .collect(),
    };
    Ok((run, trace))
}

/// One point of a plotted budget and queue timeline: a row of `timelines.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelinePoint {
    pub block: usize,
    pub policy: PolicyKind,
    pub s: f64,
    pub budget: f64,
    pub queued: f64,
}

/// One plotted send of stream 0: a row of `sends.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendPoint {
    pub block: usize,
    pub policy: PolicyKind,
    pub due_s: f64,
    pub send_ms: f64,
}

pub const TIMELINES: &str = "timelines.csv";
pub const SENDS: &str = "sends.csv";

/// The traces as the two tables above.
pub fn trace_rows(traces: &[Trace]) -> (Vec<TimelinePoint>, Vec<SendPoint>) {
    let mut timelines = Vec::new();
    let mut sends = Vec::new();
    for t in traces {
        let (block, policy) = (t.block, t.policy);
        timelines.extend(t.timeline.iter().map(|&(s, budget, queued)| TimelinePoint {
            block,
            policy,
            s,
            budget,
            queued,
        }));
        sends.extend(t.sends.iter().map(|&(due_s, send_ms)| SendPoint {
            block,
            policy,
            due_s,
            send_ms,
        }));
    }
    (timelines, sends)
}

/// The traces back from the two tables, in the order they were written.
pub fn traces_of(timelines: &[TimelinePoint], sends: &[SendPoint]) -> Vec<Trace> {
    fn of(traces: &mut Vec<Trace>, block: usize, policy: PolicyKind) -> &mut Trace {
        match traces
            .iter()
            .position(|t| (t.block, t.policy) == (block, policy))
        {
            Some(i) => &mut traces[i],
            None => {
                traces.push(Trace {
                    block,
                    policy,
                    timeline: Vec::new(),
                    sends: Vec::new(),
                });
                traces.last_mut().expect("just pushed")
            }
        }
    }
    let mut traces = Vec::new();
    for p in timelines {
        of(&mut traces, p.block, p.policy)
            .timeline
            .push((p.s, p.budget, p.queued));
    }
    for p in sends {
        of(&mut traces, p.block, p.policy)
            .sends
            .push((p.due_s, p.send_ms));
    }
    traces
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `reduce` writes of the traces, `render` reads back as they were.
    #[test]
    fn traces_survive_their_tables() {
        let traces = vec![
            Trace {
                block: 1,
                policy: PolicyKind::Fixed8,
                timeline: vec![(0.0, 8.0, 1.0), (0.1, 8.0, 3.0)],
                sends: vec![(0.0, 0.2), (0.05, 41.5)],
            },
            Trace {
                block: 1,
                policy: PolicyKind::Fixed32,
                timeline: vec![(0.0, 32.0, 0.0)],
                sends: vec![],
            },
        ];
        let (timelines, sends) = trace_rows(&traces);
        assert_eq!((timelines.len(), sends.len()), (3, 2));
        assert_eq!(traces_of(&timelines, &sends), traces);
    }
}
