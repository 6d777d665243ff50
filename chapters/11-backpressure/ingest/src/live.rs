//! What `--live` draws while an ingest run goes on (chapters 11 and 12): the
//! server's `timeline.csv` and the client's `sends*.csv`, read as they grow
//! in the folder of the arm or attempt that is running.

use std::path::Path;

use harness::{
    live::Figure,
    plot::{Panel, Series},
    records::read_csv_so_far,
};
use loadgen::{Outcome, SlotRecord};

use crate::record::{Sample, TIMELINE};

/// The figure of one running arm or attempt. Server samples are placed by
/// the server's clock (from its start), sends by the client's (from its first
/// slot); the two start within a connection set-up of each other.
pub fn view(dir: &Path) -> anyhow::Result<Figure> {
    let samples: Vec<Sample> = read_csv_so_far(&dir.join(TIMELINE))?;
    let mut sends: Vec<SlotRecord> = Vec::new();
    // One file per call: sends.csv (chapter 11), sends-0.csv ... (chapter 12).
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.starts_with("sends") && name.ends_with(".csv") {
            sends.extend(read_csv_so_far::<SlotRecord>(&dir.join(name))?);
        }
    }
    sends.sort_by_key(|r| r.due);
    let at = |s: &Sample| s.at.as_secs_f64();
    let line = |name: &str, f: &dyn Fn(&Sample) -> f64| {
        Series::line(name, samples.iter().map(|s| (at(s), f(s))).collect())
    };
    let mut waiting = vec![
        line("queued Q", &|s| s.queued as f64),
        line("pending Q + R", &|s| s.pending as f64),
    ];
    // An unbounded queue has no budget (0): no line for it.
    if samples.iter().any(|s| s.budget > 0) {
        waiting.push(line("budget B", &|s| s.budget as f64));
    }
    let mut skipped = 0.0;
    Ok(Figure {
        title: "The run so far".into(),
        x_label: "seconds (server: since it started; client: since its first slot)".into(),
        panels: vec![
            Panel {
                y_label: "messages waiting".into(),
                series: waiting,
            },
            Panel {
                y_label: "messages per second".into(),
                series: vec![
                    Series::line("received", per_second(&samples, |s| s.received)),
                    Series::line("processed", per_second(&samples, |s| s.processed)),
                ],
            },
            Panel {
                y_label: "client send duration (ms)".into(),
                series: vec![Series::dots(
                    "send",
                    sends
                        .iter()
                        .filter_map(|r| {
                            let send = r.send_duration()?;
                            Some((r.due.as_secs_f64(), send.as_secs_f64() * 1e3))
                        })
                        .collect(),
                )],
            },
            Panel {
                y_label: "skipped slots (cumulative)".into(),
                series: vec![Series::line(
                    "skipped",
                    sends
                        .iter()
                        .map(|r| {
                            skipped += f64::from(u8::from(r.outcome == Outcome::Skipped));
                            (r.due.as_secs_f64(), skipped)
                        })
                        .collect(),
                )],
            },
        ],
    })
}

/// A counter's rate over the second before each sample.
fn per_second(samples: &[Sample], count: impl Fn(&Sample) -> u64) -> Vec<(f64, f64)> {
    let mut from = 0;
    samples
        .iter()
        .filter_map(|s| {
            let now = s.at.as_secs_f64();
            while samples[from].at.as_secs_f64() < now - 1.0 {
                from += 1;
            }
            let then = &samples[from];
            let span = now - then.at.as_secs_f64();
            (span > 0.0).then(|| (now, (count(s) - count(then)) as f64 / span))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use harness::records::write_csv;

    use super::*;

    fn sample(at_ms: u64, received: u64, processed: u64) -> Sample {
        Sample {
            at: Duration::from_millis(at_ms),
            queued: (received - processed) as usize,
            pending: (received - processed) as usize,
            budget: 8,
            received,
            processed,
            rss_kib: 1024,
        }
    }

    #[test]
    fn rates_are_over_the_second_before_each_sample() {
        // 100 received and 50 processed per second, sampled every 250 ms.
        let samples: Vec<Sample> = (0..=8)
            .map(|i| sample(250 * i, 25 * i, 12 * i + i / 2))
            .collect();
        let rates = per_second(&samples, |s| s.received);
        assert_eq!(rates.len(), 8, "no rate at the first sample");
        assert_eq!(rates[3], (1.0, 100.0));
        assert_eq!(rates[7], (2.0, 100.0));
        let processed = per_second(&samples, |s| s.processed);
        assert!(
            processed[4..].iter().all(|p| (p.1 - 50.0).abs() <= 2.0),
            "{processed:?}"
        );
    }

    #[test]
    fn the_view_reads_every_stream_and_counts_skips_in_order_of_due() {
        let dir = tempfile::tempdir().unwrap();
        write_csv(
            &dir.path().join(TIMELINE),
            &[sample(0, 0, 0), sample(500, 10, 4)],
        )
        .unwrap();
        let ms = Duration::from_millis;
        let slot = |index: u64, due: u64, sent: bool| SlotRecord {
            index,
            step: 0,
            due: ms(due),
            started: sent.then(|| ms(due)),
            ended: sent.then(|| ms(due + 3)),
            outcome: if sent { Outcome::Ok } else { Outcome::Skipped },
            deferred: false,
            code: None,
        };
        write_csv(
            &dir.path().join("sends-0.csv"),
            &[slot(0, 0, true), slot(2, 20, false)],
        )
        .unwrap();
        write_csv(
            &dir.path().join("sends-1.csv"),
            &[slot(1, 10, false), slot(3, 30, true)],
        )
        .unwrap();
        let figure = view(dir.path()).unwrap();
        let names: Vec<&str> = figure.panels[0]
            .series
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(names, ["queued Q", "pending Q + R", "budget B"]);
        assert_eq!(figure.panels[2].series[0].points, [(0.0, 3.0), (0.03, 3.0)]);
        assert_eq!(
            figure.panels[3].series[0].points,
            [(0.0, 0.0), (0.01, 1.0), (0.02, 2.0), (0.03, 2.0)]
        );
        // A folder the run has not written into yet draws empty panels.
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(view(empty.path()).unwrap().points(), 0);
    }
}
