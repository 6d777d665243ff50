//! `cargo run -p loadgen -- ...`: the generator on its own, against a server
//! you started yourself.

use std::{path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context;
use clap::{Parser, Subcommand};
use grpc_client::channel::{Target, endpoint};
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use tonic::Code;

use harness::Folder;
use serde::{Deserialize, Serialize};

use crate::{
    calibrate::{Calibration, calibrate},
    ingest::ingest,
    open_loop::{Counters, SendError, WhenFull, run_bounded},
    pacing::Timer,
    schedule::{Schedule, Step},
    summary::Summary,
};

/// Open-loop load: sends at scheduled times whatever the server does, and
/// counts every send it could not make.
#[derive(Parser, Debug, Clone)]
#[command(name = "loadgen", version)]
pub struct Args {
    /// gRPC server to load [default: https://localhost:50071 for ingest (the
    /// ingest server), https://localhost:50051 for hello (the stack)]
    #[arg(long, global = true)]
    pub target: Option<String>,
    /// CA certificate that signed the server's [default: certs/ca.pem]
    #[arg(long, global = true)]
    pub ca: Option<PathBuf>,
    /// Folder for the results (every send as CSV, the summary as JSON); an
    /// earlier run there is replaced
    #[arg(long, global = true, default_value = "target/experiments/loadgen")]
    pub out: PathBuf,
    /// One step of the schedule, RATE/s:DURATION; repeat for a ramp
    #[arg(
        long = "step",
        global = true,
        value_name = "RATE/s:DURATION",
        default_value = "80/s:10s"
    )]
    pub steps: Vec<Step>,
    /// How the generator waits for each send's due time (calibrate runs both)
    #[arg(long, global = true, value_enum, default_value_t = Timer::Precise)]
    pub timer: Timer,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug, Clone)]
pub enum Command {
    /// One client-streaming Ingest call, a message per slot; a slot that comes
    /// due while a send is blocked is skipped
    Ingest {
        /// Bytes of pseudorandom payload per message
        #[arg(long, default_value_t = 16 * 1024)]
        message_bytes: usize,
        /// Seed of the payload bytes
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Independent unary SayHello calls, at most --max-in-flight at once
    Hello {
        #[arg(long, default_value_t = 64)]
        max_in_flight: usize,
        /// What a slot does when every place is busy
        #[arg(long, value_enum, default_value = "defer")]
        when_full: WhenFull,
        /// Each call's deadline
        #[arg(long, value_parser = program::duration::parse, default_value = "1s")]
        deadline: Duration,
        /// How long the server works on each call
        #[arg(long, default_value_t = 0)]
        delay_ms: u32,
    },
    /// The generator against a call that does nothing, in this process: its
    /// own lateness and CPU per slot at each rate (ignores --step and
    /// --target)
    Calibrate {
        /// Sends per second; repeat for several rates, run in the order given
        #[arg(long = "rate", value_name = "PER_S", default_values_t = [100.0, 1000.0, 10000.0, 30000.0])]
        rates: Vec<f64>,
        /// How long each rate runs
        #[arg(long, value_parser = program::duration::parse, default_value = "3s")]
        duration: Duration,
    },
}

/// What `summary.json` holds: the whole run, each step, and how the call ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub total: Summary,
    pub steps: Vec<Summary>,
    /// The Ingest call's reply (empty for hello).
    pub server: String,
}

/// Runs the generator, printing a progress line every second, then the
/// summary and the paths of the files written.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let folder = Folder::create(&args.out)?;
    let default_target = match &args.command {
        Command::Ingest { .. } => "https://localhost:50071",
        Command::Hello { .. } => "https://localhost:50051",
        Command::Calibrate { rates, duration } => {
            return run_calibration(&folder, rates, *duration).await;
        }
    };
    let url = args.target.clone().unwrap_or_else(|| default_target.into());
    let target = Target {
        url: url.clone(),
        ca: args.ca.clone().unwrap_or_else(program::default_ca),
        identity: None,
    };
    let channel = endpoint(&target)?
        .connect()
        .await
        .with_context(|| format!("cannot connect to {url}"))?;
    let schedule = Schedule {
        steps: args.steps.clone(),
    };
    let slots = schedule.slots();
    eprintln!(
        "{} slots over {:.1} s against {}",
        slots.len(),
        schedule.duration().as_secs_f64(),
        url
    );
    let counters = Arc::new(Counters::default());
    let progress = tokio::spawn(progress(counters.clone()));
    let (records, extra) = match args.command {
        Command::Ingest {
            message_bytes,
            seed,
        } => {
            let run = ingest(
                channel,
                &slots,
                args.timer,
                message_bytes,
                seed,
                &counters,
                None,
            )
            .await;
            let reply = match &run.reply {
                Ok(r) => format!(
                    "server: received {} processed {} bytes {}; call took {:.2} s",
                    r.received,
                    r.processed,
                    r.bytes_received,
                    run.call_duration.as_secs_f64()
                ),
                Err(status) => {
                    format!("the call failed: {:?}: {}", status.code(), status.message())
                }
            };
            (run.records, reply)
        }
        Command::Hello {
            max_in_flight,
            when_full,
            deadline,
            delay_ms,
        } => {
            let client = GreeterClient::new(channel);
            let drain = deadline + Duration::from_secs(1);
            let records = run_bounded(
                &slots,
                args.timer,
                max_in_flight,
                when_full,
                drain,
                counters.clone(),
                |slot| {
                    let mut client = client.clone();
                    let mut request = tonic::Request::new(HelloRequest {
                        name: format!("slot {}", slot.index),
                        delay_ms,
                    });
                    request.set_timeout(deadline);
                    async move {
                        client
                            .say_hello(request)
                            .await
                            .map(drop)
                            .map_err(|status| SendError {
                                code: code_name(status.code()),
                                fatal: false,
                            })
                    }
                },
            )
            .await;
            (records, String::new())
        }
        // Returned above, before connecting.
        Command::Calibrate { .. } => return Ok(()),
    };
    progress.abort();
    let summary = Summary::by_step(&records);
    let total = Summary::of(&records);
    if summary.len() > 1 {
        for (i, (step, s)) in schedule.steps.iter().zip(&summary).enumerate() {
            println!("step {i} ({step}):\n{s}");
        }
    }
    println!("{total}");
    if !extra.is_empty() {
        println!("{extra}");
    }
    folder.write_csv("sends.csv", &records)?;
    folder.write_json(
        "summary.json",
        &RunSummary {
            total,
            steps: summary,
            server: extra,
        },
    )?;
    println!(
        "wrote {} and {}",
        folder.join("sends.csv").display(),
        folder.join("summary.json").display()
    );
    Ok(())
}

/// Runs `loadgen calibrate`: prints a line per rate and timer, writes every
/// slot and the figures.
async fn run_calibration(folder: &Folder, rates: &[f64], duration: Duration) -> anyhow::Result<()> {
    eprintln!(
        "the generator against a call that does nothing, {:.1} s at each of {} rates with each timer",
        duration.as_secs_f64(),
        rates.len()
    );
    let counters = Arc::new(Counters::default());
    let progress = tokio::spawn(progress(counters.clone()));
    let (calibrations, records) =
        calibrate(rates, &[Timer::Tokio, Timer::Precise], duration, counters).await;
    progress.abort();
    println!("{}", Calibration::header());
    for calibration in &calibrations {
        println!("{}", calibration.line());
    }
    folder.write_csv("sends.csv", &records)?;
    folder.write_json("calibration.json", &calibrations)?;
    println!(
        "wrote {} and {}",
        folder.join("sends.csv").display(),
        folder.join("calibration.json").display()
    );
    Ok(())
}

/// Prints the counters once a second while a run lasts.
pub async fn progress(counters: Arc<Counters>) {
    let started = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        tick.tick().await;
        eprintln!(
            "{:5.1} s  {}",
            started.elapsed().as_secs_f64(),
            counters.line()
        );
    }
}

/// `DEADLINE_EXCEEDED`, the name every gRPC implementation prints.
pub fn code_name(code: Code) -> String {
    proto::status::info(code).name.to_string()
}
