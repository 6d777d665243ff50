//! From the records of both arms to the table and the two plots. Everything
//! here reads files (`harness --render` runs only this).

use std::time::Duration;

use harness::{
    Folder,
    plot::{Panel, Series, panels},
};
use loadgen::{
    Outcome, Percentiles, SlotRecord,
    ingest::{CallRecord, SENDS},
};

use super::{
    ARMS, Config,
    run::{CLIENT, arm_name},
};
use crate::{
    record::{MESSAGES, MessageRow, SERVER, Sample, ServerSummary, TIMELINE},
    server::PolicyName,
};

/// What one arm measured, read back from its folder.
struct Arm {
    policy: PolicyName,
    sends: Vec<SlotRecord>,
    client: CallRecord,
    /// (seconds since the call reached the server, queued, RSS MiB)
    timeline: Vec<(f64, f64, f64)>,
    max_pending: usize,
    queue: Percentiles,
    received: usize,
}

impl Arm {
    fn read(folder: &Folder, policy: PolicyName) -> anyhow::Result<Arm> {
        let arm = folder.existing(arm_name(policy))?;
        let server: ServerSummary = arm.read_json(SERVER)?;
        let samples: Vec<Sample> = arm.read_csv(TIMELINE)?;
        let messages: Vec<MessageRow> = arm.read_csv(MESSAGES)?;
        // The plan's zero: the first call's arrival at the server.
        let epoch = server.epoch_ms.unwrap_or(0.0) / 1e3;
        Ok(Arm {
            policy,
            sends: arm.read_csv(SENDS)?,
            client: arm.read_json(CLIENT)?,
            timeline: samples
                .iter()
                .map(|s| {
                    let t = s.at.as_secs_f64() - epoch;
                    (t, s.queued as f64, s.rss_kib as f64 / 1024.0)
                })
                .filter(|p| p.0 >= 0.0)
                .collect(),
            max_pending: samples.iter().map(|s| s.pending).max().unwrap_or(0),
            queue: Percentiles::of(messages.iter().map(MessageRow::queue_residence)),
            received: messages.len(),
        })
    }

    fn label(&self, capacity: usize) -> String {
        match self.policy {
            PolicyName::Unbounded => "unbounded".to_string(),
            PolicyName::Reserve => format!("reserve, K = {capacity}"),
        }
    }
}

pub fn render(config: &Config, folder: &Folder) -> anyhow::Result<String> {
    let arms = ARMS
        .iter()
        .map(|&p| Arm::read(folder, p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let table = table(&arms, config.capacity);
    folder.write_text("summary.md", &table)?;
    plot(&arms, folder, config.capacity)?;
    Ok(format!("\n{table}"))
}

fn table(arms: &[Arm], capacity: usize) -> String {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |label: &str, f: &dyn Fn(&Arm) -> String| {
        rows.push((label.to_string(), arms.iter().map(f).collect()));
    };
    let client = |a: &Arm| a.client.summary.clone();
    row("slots scheduled", &|a| client(a).scheduled.to_string());
    row("sent", &|a| (client(a).ok + client(a).failed).to_string());
    row("skipped (never sent)", &|a| client(a).skipped.to_string());
    row("client send p50 / p99 (ms)", &|a| {
        let send = client(a).send;
        format!("{:.2} / {:.1}", send.p50_ms, send.p99_ms)
    });
    row("longest client send (ms)", &|a| {
        format!("{:.1}", client(a).send.max_ms)
    });
    row("messages the server took", &|a| a.received.to_string());
    row("max queued Q", &|a| {
        format!("{:.0}", a.timeline.iter().map(|p| p.1).fold(0.0, f64::max))
    });
    row("max pending Q+R", &|a| a.max_pending.to_string());
    row("server RSS first -> max (MiB)", &|a| {
        let first = a.timeline.first().map_or(0.0, |p| p.2);
        let max = a.timeline.iter().map(|p| p.2).fold(0.0, f64::max);
        format!("{first:.1} -> {max:.1}")
    });
    row("queue residence p50 / p99 / max (ms)", &|a| {
        format!(
            "{:.0} / {:.0} / {:.0}",
            a.queue.p50_ms, a.queue.p99_ms, a.queue.max_ms
        )
    });
    row("the call", &|a| a.client.call.clone());
    row("call duration (s)", &|a| format!("{:.1}", a.client.call_s));
    let mut out =
        format!("| | unbounded | reserve before receive, K = {capacity} |\n|---|---:|---:|\n");
    for (label, values) in rows {
        out.push_str(&format!("| {label} | {} |\n", values.join(" | ")));
    }
    out
}

fn plot(arms: &[Arm], folder: &Folder, capacity: usize) -> anyhow::Result<()> {
    let series = |f: &dyn Fn(&(f64, f64, f64)) -> f64| -> Vec<Series> {
        arms.iter()
            .map(|a| {
                let points = a.timeline.iter().map(|p| (p.0, f(p))).collect();
                Series::line(a.label(capacity), points)
            })
            .collect()
    };
    panels(
        &folder.join("queue.svg"),
        "Server side: messages waiting, and the process's memory",
        "seconds since the call started",
        &[
            Panel {
                y_label: "messages queued (Q)".into(),
                series: series(&|p| p.1),
            },
            Panel {
                y_label: "server RSS (MiB)".into(),
                series: series(&|p| p.2),
            },
        ],
    )?;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let sends = arms
        .iter()
        .map(|a| {
            let points = a
                .sends
                .iter()
                .filter_map(|r| Some((r.due.as_secs_f64(), ms(r.send_duration()?))))
                .collect();
            Series::dots(a.label(capacity), points)
        })
        .collect();
    let skipped = arms
        .iter()
        .map(|a| {
            let mut total = 0.0;
            let points = a
                .sends
                .iter()
                .map(|r| {
                    total += f64::from(u8::from(r.outcome == Outcome::Skipped));
                    (r.due.as_secs_f64(), total)
                })
                .collect();
            Series::line(a.label(capacity), points)
        })
        .collect();
    panels(
        &folder.join("sends.svg"),
        "Client side: where the waiting went",
        "seconds since the call started (when the send was due)",
        &[
            Panel {
                y_label: "send duration (ms)".into(),
                series: sends,
            },
            Panel {
                y_label: "skipped slots (cumulative)".into(),
                series: skipped,
            },
        ],
    )
}
