//! `cargo run -p ingest -- compare`: chapter 11's experiment. The same offered
//! load against an unbounded server and a reserve-before-receive server, each
//! a fresh process; then the numbers side by side and two plots.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::Arc,
    time::Duration,
};

use anyhow::{Context, bail};
use grpc_client::channel::{Target, endpoint};
use loadgen::{
    Counters, Outcome, Percentiles, Schedule, Summary,
    ingest::ingest,
    meta::RunMeta,
    plot::{Panel, Series, panels},
    report::{write, write_csv, write_json},
};
use program::duration::Show;
use serde_json::json;
use tokio::process::Command;

use crate::{plan::ServicePlan, server::PolicyName};

/// Runs both servers against the same open-loop stream and compares them.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// Scheduled sends per second
    #[arg(long, default_value_t = 80.0)]
    pub rate: f64,
    /// How long the client sends [default: 24s, 12s with --quick]
    #[arg(long, value_parser = program::duration::parse)]
    pub duration: Option<Duration>,
    /// The worker's service time by phase
    /// [default: 10ms@0s,40ms@6s,10ms@18s; 10ms@0s,40ms@3s,10ms@9s with --quick]
    #[arg(long)]
    pub plan: Option<ServicePlan>,
    /// Queue capacity K of the reserve-before-receive server
    #[arg(long, default_value_t = 32)]
    pub capacity: usize,
    #[arg(long, default_value_t = 16 * 1024)]
    pub message_bytes: usize,
    /// A shorter run with the same shape (about 30 s in all)
    #[arg(long)]
    pub quick: bool,
    /// Folder for every file of the run
    #[arg(long, default_value = "target/experiments/ch11")]
    pub out: PathBuf,
}

impl CompareArgs {
    fn duration(&self) -> Duration {
        self.duration
            .unwrap_or(Duration::from_secs(if self.quick { 12 } else { 24 }))
    }

    fn plan(&self) -> ServicePlan {
        let default = if self.quick {
            "10ms@0s,40ms@3s,10ms@9s"
        } else {
            "10ms@0s,40ms@6s,10ms@18s"
        };
        self.plan
            .clone()
            .unwrap_or_else(|| default.parse().expect("a valid plan"))
    }
}

/// What one arm measured, client and server side.
struct Arm {
    policy: PolicyName,
    client: Summary,
    records: Vec<loadgen::SlotRecord>,
    call: String,
    call_s: f64,
    /// (seconds since the first call, queued, RSS MiB)
    timeline: Vec<(f64, f64, f64)>,
    max_pending: f64,
    queue: Percentiles,
    received: usize,
}

pub async fn compare(args: CompareArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.rate > 0.0, "--rate must be above 0");
    let pki = certs::Pki::new(program::certs_dir());
    pki.generate(false)?;
    let schedule = Schedule::constant(args.rate, args.duration());
    let plan = args.plan();
    println!(
        "{} sends of {} bytes ({}/s for {}), worker plan {}, K = {}",
        schedule.slots().len(),
        args.message_bytes,
        args.rate,
        Show(args.duration()),
        plan,
        args.capacity
    );
    let mut arms = Vec::new();
    for policy in [PolicyName::Unbounded, PolicyName::Reserve] {
        arms.push(run_arm(&args, policy, &schedule, &plan, &pki.ca_cert()).await?);
    }
    let table = table(&arms, args.capacity);
    println!("\n{table}");
    let summary = args.out.join("summary.md");
    write(&summary, table.as_bytes())?;
    let queue_svg = args.out.join("queue.svg");
    let sends_svg = args.out.join("sends.svg");
    plot(&arms, &queue_svg, &sends_svg, args.capacity)?;
    write_json(
        &args.out.join("run.json"),
        &json!({
            "meta": RunMeta::now(),
            "rate": args.rate,
            "duration_s": args.duration().as_secs_f64(),
            "plan": plan.to_string(),
            "capacity": args.capacity,
            "message_bytes": args.message_bytes,
            "arms": arms.iter().map(|a| json!({
                "policy": format!("{:?}", a.policy),
                "client": a.client,
                "call": a.call,
                "queue_residence": a.queue,
            })).collect::<Vec<_>>(),
        }),
    )?;
    println!(
        "wrote {}, {}, {} and each arm's records under {}",
        summary.display(),
        queue_svg.display(),
        sends_svg.display(),
        args.out.display()
    );
    Ok(())
}

// ANCHOR: arm
async fn run_arm(
    args: &CompareArgs,
    policy: PolicyName,
    schedule: &Schedule,
    plan: &ServicePlan,
    ca: &Path,
) -> anyhow::Result<Arm> {
    let name = format!("{policy:?}").to_lowercase();
    let dir = args.out.join(&name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let ready = dir.join("ready");
    // A fresh server process per arm: its memory is its own to measure.
    let mut server = Command::new(std::env::current_exe()?)
        .args(["serve", "--addr", "127.0.0.1:0", "--calls", "1"])
        .args(["--policy", &name, "--capacity", &args.capacity.to_string()])
        .args(["--plan", &plan.to_string()])
        .arg("--record")
        .arg(&dir)
        .arg("--ready-file")
        .arg(&ready)
        .stdout(std::fs::File::create(dir.join("server.log"))?)
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .context("cannot start the ingest server")?;
    let addr = wait_for_ready(&ready, &mut server).await?;
    println!("\n{name}: server on {addr}");
    let target = Target {
        url: format!("https://localhost:{}", addr.port()),
        ca: ca.to_path_buf(),
        identity: None,
    };
    let channel = endpoint(&target)?.connect().await?;
    let counters = Arc::new(Counters::default());
    let progress = tokio::spawn(loadgen::cli::progress(counters.clone()));
    let run = ingest(channel, &schedule.slots(), args.message_bytes, 1, &counters).await;
    progress.abort();
    let status = tokio::time::timeout(Duration::from_secs(60), server.wait())
        .await
        .context("the server did not stop within 60 s of its call ending")??;
    anyhow::ensure!(status.success(), "the {name} server failed ({status})");
    // ANCHOR_END: arm
    let call = match &run.reply {
        Ok(r) => format!("OK: received {}, processed {}", r.received, r.processed),
        Err(s) => format!("{:?}: {}", s.code(), s.message()),
    };
    write_csv(&dir.join("sends.csv"), &run.records)?;
    let client = Summary::of(&run.records);
    write_json(
        &dir.join("client.json"),
        &json!({ "summary": client, "call": call }),
    )?;
    let server_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("server.json"))?)?;
    let epoch_ms = server_json["epoch_ms"].as_f64().unwrap_or(0.0);
    let at = column(&dir.join("timeline.csv"), "at_ms")?;
    let queued = column(&dir.join("timeline.csv"), "queued")?;
    let pending = column(&dir.join("timeline.csv"), "pending")?;
    let rss = column(&dir.join("timeline.csv"), "rss_kib")?;
    let residence = column(&dir.join("messages.csv"), "queue_ms")?;
    Ok(Arm {
        policy,
        call,
        call_s: run.call_duration.as_secs_f64(),
        timeline: at
            .iter()
            .zip(&queued)
            .zip(&rss)
            .map(|((t, q), r)| ((t - epoch_ms) / 1e3, *q, r / 1024.0))
            .filter(|p| p.0 >= 0.0)
            .collect(),
        max_pending: pending.iter().copied().fold(0.0, f64::max),
        queue: Percentiles::of(residence.iter().map(|ms| Duration::from_secs_f64(ms / 1e3))),
        received: residence.len(),
        records: run.records,
        client,
    })
}

/// Waits (at most 60 s) for a server started with `--ready-file PATH` to
/// publish its address. The server writes the file elsewhere and renames it,
/// so a file that exists is complete, never half-written; a server that exits
/// first is reported at once.
pub async fn wait_for_ready(
    path: &Path,
    server: &mut tokio::process::Child,
) -> anyhow::Result<std::net::SocketAddr> {
    for _ in 0..600 {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text
                .trim()
                .parse()
                .context("the ready file holds no address");
        }
        if let Some(status) = server.try_wait()? {
            bail!("the ingest server exited before it was ready ({status}); its log says why");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the ingest server was not ready within 60 s")
}

/// One numeric column of a CSV file we wrote ourselves.
pub fn column(path: &Path, name: &str) -> anyhow::Result<Vec<f64>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let index = header
        .split(',')
        .position(|c| c == name)
        .with_context(|| format!("{} has no column {name}", path.display()))?;
    lines
        .map(|l| {
            l.split(',')
                .nth(index)
                .unwrap_or_default()
                .parse::<f64>()
                .with_context(|| format!("{}: bad {name} in `{l}`", path.display()))
        })
        .collect()
}

fn table(arms: &[Arm], capacity: usize) -> String {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |label: &str, f: &dyn Fn(&Arm) -> String| {
        rows.push((label.to_string(), arms.iter().map(f).collect()));
    };
    row("slots scheduled", &|a| a.client.scheduled.to_string());
    row("sent", &|a| (a.client.ok + a.client.failed).to_string());
    row("skipped (never sent)", &|a| a.client.skipped.to_string());
    row("client send p50 / p99 (ms)", &|a| {
        format!("{:.2} / {:.1}", a.client.send.p50_ms, a.client.send.p99_ms)
    });
    row("longest client send (ms)", &|a| {
        format!("{:.1}", a.client.send.max_ms)
    });
    row("messages the server took", &|a| a.received.to_string());
    row("max queued Q", &|a| {
        format!("{:.0}", a.timeline.iter().map(|p| p.1).fold(0.0, f64::max))
    });
    row("max pending Q+R", &|a| format!("{:.0}", a.max_pending));
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
    row("the call", &|a| a.call.clone());
    row("call duration (s)", &|a| format!("{:.1}", a.call_s));
    let mut out =
        format!("| | unbounded | reserve before receive, K = {capacity} |\n|---|---:|---:|\n");
    for (label, values) in rows {
        out.push_str(&format!("| {label} | {} |\n", values.join(" | ")));
    }
    out
}

fn plot(arms: &[Arm], queue_svg: &Path, sends_svg: &Path, capacity: usize) -> anyhow::Result<()> {
    let label = |a: &Arm| match a.policy {
        PolicyName::Unbounded => "unbounded".to_string(),
        PolicyName::Reserve => format!("reserve, K = {capacity}"),
    };
    let series = |f: &dyn Fn(&(f64, f64, f64)) -> f64| -> Vec<Series> {
        arms.iter()
            .map(|a| Series::line(label(a), a.timeline.iter().map(|p| (p.0, f(p))).collect()))
            .collect()
    };
    panels(
        queue_svg,
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
    let sends = arms
        .iter()
        .map(|a| {
            let points = a
                .records
                .iter()
                .filter_map(|r| Some((r.due.as_secs_f64(), r.send_duration()?.as_secs_f64() * 1e3)))
                .collect();
            Series::dots(label(a), points)
        })
        .collect();
    let skipped = arms
        .iter()
        .map(|a| {
            let mut total = 0.0;
            let points = a
                .records
                .iter()
                .map(|r| {
                    total += f64::from(u8::from(r.outcome == Outcome::Skipped));
                    (r.due.as_secs_f64(), total)
                })
                .collect();
            Series::line(label(a), points)
        })
        .collect();
    panels(
        sends_svg,
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
