//! The two processes of every run: `admission serve` (chapter 11's ingest
//! server with a controller on its gate) and `admission client` (one or more
//! open-loop Ingest calls). The runner re-executes its own binary for each, so
//! no run inherits memory, connections or timers from the one before.

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::Context;
use grpc_client::channel::{Target, endpoint};
use loadgen::{
    Counters, Schedule, Slot, Summary,
    ingest::ingest,
    meta::RunMeta,
    report::{write, write_csv, write_json},
};
use serde_json::json;

use crate::controller::{
    Controller, SeedController, SeedRule, TargetController, TargetRule, drive, log_csv,
};

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControllerKind {
    /// Fixed budget: nothing changes it
    None,
    /// The seed's rule
    Seed,
    /// The delay-target rule
    Target,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ServeChild {
    #[command(flatten)]
    pub serve: ingest::server::ServeArgs,
    #[arg(long, value_enum, default_value = "none")]
    pub controller: ControllerKind,
    /// Time scale of the controllers' ticks and thresholds
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Delay target of the target rule, ms at scale 1
    #[arg(long, default_value_t = 100.0)]
    pub target_ms: f64,
}

// ANCHOR: serve
/// Serves `--calls` calls with the controller driving the gate from the
/// start, then writes the server's records and the controller's log.
pub async fn serve(args: ServeChild) -> anyhow::Result<()> {
    let controller = match args.controller {
        ControllerKind::None => None,
        ControllerKind::Seed => Some(Controller::Seed(SeedController::new(SeedRule::seed(
            args.scale,
        )))),
        ControllerKind::Target => Some(Controller::Target(TargetController::new(TargetRule::new(
            args.target_ms,
            args.scale,
        )))),
    };
    let log = Arc::new(Mutex::new(Vec::new()));
    let record = args.serve.record.clone();
    ingest::server::serve(args.serve, |ingestor| {
        if let Some(controller) = controller {
            tokio::spawn(drive(ingestor.clone(), controller, log.clone()));
        }
    })
    .await?;
    let rows = log.lock().expect("log lock").clone();
    write(&record.join("controller.csv"), log_csv(&rows).as_bytes())
}
// ANCHOR_END: serve

#[derive(clap::Args, Debug, Clone)]
pub struct ClientChild {
    #[arg(long)]
    pub addr: SocketAddr,
    /// CA that signed the server's certificate
    #[arg(long)]
    pub ca: PathBuf,
    /// Scheduled sends per second, over all streams
    #[arg(long)]
    pub rate: f64,
    /// How long the schedule runs, seconds
    #[arg(long)]
    pub duration_s: f64,
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
    #[arg(long, default_value_t = 16 * 1024)]
    pub message_bytes: usize,
    /// Seed of the payload bytes
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Folder for sends-N.csv and client.json
    #[arg(long)]
    pub out: PathBuf,
}

/// Stream `i` of `n`: every n-th slot of the whole schedule, so the streams
/// together keep the schedule's rate and spacing.
pub fn stream_slots(all: &[Slot], i: usize, n: usize) -> Vec<Slot> {
    all.iter().skip(i).step_by(n.max(1)).copied().collect()
}

/// Runs the calls, each on its own schedule share, over one TLS connection.
pub async fn client(args: ClientChild) -> anyhow::Result<()> {
    anyhow::ensure!(args.streams > 0, "--streams must be at least 1");
    let target = Target {
        url: format!("https://localhost:{}", args.addr.port()),
        ca: args.ca.clone(),
        identity: None,
    };
    let channel = endpoint(&target)?
        .connect()
        .await
        .context("cannot connect to the ingest server")?;
    let all = Schedule::constant(args.rate, Duration::from_secs_f64(args.duration_s)).slots();
    let counters = Arc::new(Counters::default());
    let progress = tokio::spawn(loadgen::cli::progress(counters.clone()));
    let mut calls = Vec::new();
    for i in 0..args.streams {
        let slots = stream_slots(&all, i, args.streams);
        let (channel, counters) = (channel.clone(), counters.clone());
        let (bytes, seed) = (args.message_bytes, args.seed + i as u64);
        calls.push(tokio::spawn(async move {
            ingest(channel, &slots, bytes, seed, &counters).await
        }));
    }
    let mut streams = Vec::new();
    let mut all_ok = true;
    for (i, call) in calls.into_iter().enumerate() {
        let run = call.await.context("a call's task failed")?;
        write_csv(&args.out.join(format!("sends-{i}.csv")), &run.records)?;
        let (ok, call) = match &run.reply {
            Ok(r) => (
                true,
                format!("OK: received {}, processed {}", r.received, r.processed),
            ),
            Err(s) => (false, format!("{:?}: {}", s.code(), s.message())),
        };
        all_ok &= ok;
        streams.push(json!({
            "ok": ok,
            "call": call,
            "call_s": run.call_duration.as_secs_f64(),
            "summary": Summary::of(&run.records),
        }));
    }
    progress.abort();
    write_json(
        &args.out.join("client.json"),
        &json!({ "meta": RunMeta::now(), "all_ok": all_ok, "streams": streams }),
    )?;
    anyhow::ensure!(all_ok, "a call failed: see client.json");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_share_the_schedule_without_overlap() {
        let all = Schedule::constant(80.0, Duration::from_secs(1)).slots();
        let parts: Vec<Vec<Slot>> = (0..3).map(|i| stream_slots(&all, i, 3)).collect();
        assert_eq!(parts.iter().map(Vec::len).sum::<usize>(), 80);
        assert_eq!(parts[1][0].index, 1);
        assert_eq!(parts[1][1].index, 4);
        assert_eq!(stream_slots(&all, 0, 1).len(), 80);
    }
}
