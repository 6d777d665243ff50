//! The two processes of every run: `admission serve` (chapter 11's ingest
//! server with a controller on its gate) and `admission client` (one or more
//! open-loop Ingest calls). The runner re-executes its own binary for each,
//! configured by the typed values below over stdin, so no run inherits
//! memory, connections or timers from the one before.

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::Context;
use grpc_client::channel::{Target, endpoint};
use harness::{RunMeta, child::Role, records};
use ingest::server::{Listening, ServeConfig};
use loadgen::{Counters, Schedule, Slot, Timer, ingest::CallRecord, ingest::ingest};
use serde::{Deserialize, Serialize};

use crate::{
    controller::{Controller, SeedController, SeedRule, TargetController, TargetRule, drive},
    records::{CLIENT, CONTROLLER, ClientFile, sends_file},
};

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControllerKind {
    /// Fixed budget: nothing changes it
    None,
    /// Part 2's rule
    Seed,
    /// The delay-target rule
    Target,
}

/// The server of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeChild {
    pub serve: ServeConfig,
    pub controller: ControllerKind,
    /// Time scale of the controllers' ticks and thresholds
    pub scale: f64,
    /// Delay target of the target rule, ms at scale 1
    pub target_ms: f64,
}

impl Role for ServeChild {
    const COMMAND: &'static [&'static str] = &["serve"];
    type Ready = Listening;
    type Ask = ();
    type Answer = ();
}

/// Serves its calls with the controller driving the gate from the start,
/// then writes the server's records and the controller's log.
pub async fn serve() -> anyhow::Result<()> {
    let config: ServeChild = harness::child::config()?;
    let controller = match config.controller {
        ControllerKind::None => None,
        ControllerKind::Seed => Some(Controller::Seed(SeedController::new(SeedRule::seed(
            config.scale,
        )))),
        ControllerKind::Target => Some(Controller::Target(TargetController::new(TargetRule::new(
            config.target_ms,
            config.scale,
        )))),
    };
    let log = Arc::new(Mutex::new(Vec::new()));
    ingest::server::serve(
        &config.serve,
        |ingestor| {
            if let Some(controller) = controller {
                tokio::spawn(drive(ingestor.clone(), controller, log.clone()));
            }
        },
        |addr| harness::child::ready::<ServeChild>(&Listening { addr }),
    )
    .await?;
    let rows = log.lock().expect("log lock").clone();
    records::write_csv(&config.serve.record.join(CONTROLLER), &rows)
}

/// The client of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientChild {
    pub addr: SocketAddr,
    /// CA that signed the server's certificate
    pub ca: PathBuf,
    /// Scheduled sends per second, over all streams
    pub rate: f64,
    /// How long the schedule runs
    pub duration: Duration,
    pub streams: usize,
    pub message_bytes: usize,
    /// Seed of the payload bytes
    pub seed: u64,
    /// Folder for sends-N.csv and client.json
    pub out: PathBuf,
}

impl Role for ClientChild {
    const COMMAND: &'static [&'static str] = &["client"];
    type Ready = ();
    type Ask = ();
    type Answer = ();
}

/// Stream `i` of `n`: every n-th slot of the whole schedule, so the streams
/// together keep the schedule's rate and spacing.
pub fn stream_slots(all: &[Slot], i: usize, n: usize) -> Vec<Slot> {
    all.iter().skip(i).step_by(n.max(1)).copied().collect()
}

/// Runs the calls, each on its own share of the schedule, over one TLS connection.
pub async fn client() -> anyhow::Result<()> {
    let config: ClientChild = harness::child::config()?;
    anyhow::ensure!(config.streams > 0, "streams must be at least 1");
    harness::child::ready::<ClientChild>(&())?;
    let target = Target {
        url: format!("https://localhost:{}", config.addr.port()),
        ca: config.ca.clone(),
        identity: None,
    };
    let channel = endpoint(&target)?
        .connect()
        .await
        .context("cannot connect to the ingest server")?;
    let all = Schedule::constant(config.rate, config.duration).slots();
    let counters = Arc::new(Counters::default());
    let progress = tokio::spawn(loadgen::cli::progress(counters.clone()));
    let mut calls = Vec::new();
    for i in 0..config.streams {
        let slots = stream_slots(&all, i, config.streams);
        let (channel, counters) = (channel.clone(), counters.clone());
        let (bytes, seed) = (config.message_bytes, config.seed + i as u64);
        // Each slot's record reaches sends-N.csv as it ends (a live view reads it).
        let sends = records::Growing::create(&config.out.join(sends_file(i)))?;
        calls.push(tokio::spawn(async move {
            // Tokio's 1 ms timer is enough here: this chapter measures queue
            // residence in tens to hundreds of milliseconds, and one precise
            // timing thread per stream would compete for the two cores.
            let run = ingest(
                channel,
                &slots,
                Timer::Tokio,
                bytes,
                seed,
                &counters,
                Some(&sends),
            )
            .await;
            sends.finish().map(|()| run)
        }));
    }
    let mut streams: Vec<CallRecord> = Vec::new();
    for call in calls {
        let run = call.await.context("a call's task failed")??;
        streams.push(run.record());
    }
    progress.abort();
    let all_ok = streams.iter().all(|s| s.ok);
    records::write_json(
        &config.out.join(CLIENT),
        &ClientFile {
            meta: RunMeta::now(),
            all_ok,
            streams,
        },
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
