//! `cargo run -p loadgen -- ...`: the generator on its own, against a server
//! you started yourself.

use std::{ops::Deref, path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context;
use clap::{ArgMatches, FromArgMatches, Parser, Subcommand, error::ErrorKind};
use grpc_client::channel::{Target, endpoint};
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use tonic::Code;

use harness::{Folder, State};
use serde::{Deserialize, Serialize};

use crate::{
    calibrate::{Calibration, calibrate},
    ingest::ingest,
    open_loop::{Counters, SendError, WhenFull, run_bounded},
    pacing::Timer,
    schedule::{MAX_SLOTS, Schedule, Step, check_rate, too_many},
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
    #[command(flatten)]
    pub schedule: Checked<Steps>,
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
    Calibrate(Checked<CalibrateArgs>),
}

/// The schedule (`--step`), refused as a whole once each step has parsed.
#[derive(clap::Args, Debug, Clone)]
pub struct Steps {
    /// One step of the schedule, RATE/s:DURATION; repeat for a ramp
    // A step that starts with `-` (`--step -5/s:1s`) is a step, refused for
    // its rate, not an unknown flag.
    #[arg(
        long = "step",
        global = true,
        value_name = "RATE/s:DURATION",
        default_value = "80/s:10s",
        allow_hyphen_values = true
    )]
    pub steps: Vec<Step>,
}

impl Steps {
    pub fn schedule(&self) -> Schedule {
        Schedule {
            steps: self.steps.clone(),
        }
    }
}

impl Check for Steps {
    fn check(&self) -> Result<(), String> {
        self.schedule().check()
    }
}

/// `loadgen calibrate`'s arguments, refused as a whole once each has parsed.
#[derive(clap::Args, Debug, Clone)]
pub struct CalibrateArgs {
    /// Sends per second; repeat for several rates, run in the order given
    #[arg(
        long = "rate",
        value_name = "PER_S",
        value_parser = parse_rate,
        allow_hyphen_values = true,
        default_values_t = [100.0, 1000.0, 10000.0, 30000.0]
    )]
    pub rates: Vec<f64>,
    /// How long each rate runs
    #[arg(long, value_parser = parse_run_length, default_value = "3s")]
    pub duration: Duration,
}

impl CalibrateArgs {
    /// The timers each rate runs with, one after the other.
    pub const TIMERS: [Timer; 2] = [Timer::Tokio, Timer::Precise];

    /// Every run of the calibration, one after the other, as one schedule.
    pub fn schedule(&self) -> Schedule {
        let runs = self.rates.iter().flat_map(|&rate| {
            Self::TIMERS.map(|_| Step {
                rate,
                duration: self.duration,
            })
        });
        Schedule {
            steps: runs.collect(),
        }
    }
}

impl Check for CalibrateArgs {
    fn check(&self) -> Result<(), String> {
        for &rate in &self.rates {
            Step {
                rate,
                duration: self.duration,
            }
            .check()
            .map_err(|e| {
                format!(
                    "--rate {rate} --duration {}: {e}",
                    program::duration::Show(self.duration)
                )
            })?;
        }
        match self.schedule().count() {
            n if n > MAX_SLOTS => Err(too_many(
                n,
                "--rate x --duration, summed over the rates and run with each timer, makes",
            )),
            _ => Ok(()),
        }
    }
}

/// A sending rate, per second: above 0, and at most
/// [`MAX_RATE`](crate::schedule::MAX_RATE).
fn parse_rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a rate; write sends per second, e.g. 1000"))?;
    check_rate(rate).map_err(|e| format!("rate `{text}` {e}"))?;
    Ok(rate)
}

/// How long a run lasts: a duration above 0.
fn parse_run_length(text: &str) -> Result<Duration, String> {
    match program::duration::parse(text)? {
        d if d.is_zero() => Err(format!(
            "`{text}` must be above 0: a run of no time sends nothing"
        )),
        d => Ok(d),
    }
}

/// Arguments that can only be judged together, once clap has parsed each:
/// [`Checked`] refuses them with a clap error, before anything runs.
pub trait Check {
    fn check(&self) -> Result<(), String>;
}

/// Clap arguments `T`, parsed as `T` is, then refused if [`Check::check`]
/// says so: `Args::try_parse_from` returns the error, and `Args::parse`
/// prints it with the usage and exits with status 2, as for any bad value.
/// Only parsing makes one, so whatever holds one holds checked arguments.
#[derive(Debug, Clone)]
pub struct Checked<T>(T);

impl<T> Deref for Checked<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: clap::Args + Check> FromArgMatches for Checked<T> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let args = T::from_arg_matches(matches)?;
        args.check()
            .map_err(|e| clap::Error::raw(ErrorKind::ValueValidation, e))?;
        Ok(Checked(args))
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl<T: clap::Args + Check> clap::Args for Checked<T> {
    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }

    fn augment_args(command: clap::Command) -> clap::Command {
        T::augment_args(command)
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        T::augment_args_for_update(command)
    }
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
        Command::Calibrate(calibration) => {
            return run_calibration(&folder, calibration).await;
        }
    };
    // Checked when parsed: nothing the generator cannot keep gets this far.
    let schedule = args.schedule.schedule();
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
    eprintln!(
        "{} slots over {:.1} s against {}",
        schedule.count(),
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
                &schedule,
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
                &schedule,
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
        Command::Calibrate(_) => return Ok(()),
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
    folder.set_state(State::Finished, None)?;
    println!(
        "wrote {} and {}",
        folder.join("sends.csv").display(),
        folder.join("summary.json").display()
    );
    Ok(())
}

/// Runs `loadgen calibrate`: prints a line per rate and timer, writes every
/// slot and the figures.
async fn run_calibration(folder: &Folder, args: &CalibrateArgs) -> anyhow::Result<()> {
    let CalibrateArgs { rates, duration } = args;
    eprintln!(
        "the generator against a call that does nothing, {:.1} s at each of {} rates with each timer",
        duration.as_secs_f64(),
        rates.len()
    );
    let counters = Arc::new(Counters::default());
    let progress = tokio::spawn(progress(counters.clone()));
    let (calibrations, records) =
        calibrate(rates, &CalibrateArgs::TIMERS, *duration, counters).await;
    progress.abort();
    println!("{}", Calibration::header());
    for calibration in &calibrations {
        println!("{}", calibration.line());
    }
    folder.write_csv("sends.csv", &records)?;
    folder.write_json("calibration.json", &calibrations)?;
    folder.set_state(State::Finished, None)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("loadgen").chain(args.iter().copied()))
    }

    /// Each is refused by the parser the program uses, so before anything
    /// connects or writes, with a usage error's status and its reason.
    #[test]
    fn loads_the_generator_cannot_keep_are_refused_when_parsed() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["--step", "1e9/s:1s", "ingest"],
                "rate in `1e9/s:1s` is above 1000000/s, the most the generator can time",
            ),
            (
                &["hello", "--step", "2e6/s:1s"],
                "rate in `2e6/s:1s` is above 1000000/s",
            ),
            (
                &["--step", "80/s:0s", "ingest"],
                "duration in `80/s:0s` must be above 0",
            ),
            (
                &["--step", "-5/s:1s", "ingest"],
                "rate in `-5/s:1s` must be above 0; write RATE/s:DURATION, e.g. 80/s:36s",
            ),
            (
                &["--step", "-5/s", "ingest"],
                "`-5/s` is not a step; write RATE/s:DURATION",
            ),
            (
                &["--step", "0.4/s:1s", "ingest"],
                "`0.4/s:1s` holds no slot",
            ),
            (
                &["--step", "1e6/s:1000s", "ingest"],
                "`1e6/s:1000s` holds 1000000000 slots, more than the 10000000 a run can hold",
            ),
            (
                &["--step", "1e6/s:6s", "--step", "1e6/s:6s", "hello"],
                "the steps hold 12000000 slots, more than the 10000000 a run can hold",
            ),
            (
                &["calibrate", "--rate", "1e9"],
                "rate `1e9` is above 1000000/s",
            ),
            (&["calibrate", "--rate", "-5"], "rate `-5` must be above 0"),
            (&["calibrate", "--duration", "0s"], "`0s` must be above 0"),
            (
                &["calibrate", "--rate", "0.1", "--duration", "1s"],
                "`0.1/s:1s` holds no slot",
            ),
            (
                &["calibrate", "--rate", "1e6", "--duration", "6s"],
                "makes 12000000 slots, more than the 10000000 a run can hold",
            ),
        ];
        for (args, expected) in cases {
            let error = parse(args).expect_err(&args.join(" "));
            assert_eq!(
                error.kind(),
                ErrorKind::ValueValidation,
                "{args:?}: {error}"
            );
            assert_eq!(error.exit_code(), 2, "{args:?}");
            let text = error.to_string();
            assert!(text.contains(expected), "{args:?}: {text}");
        }
    }

    #[test]
    fn loads_within_the_bounds_are_accepted() {
        let args = parse(&["--step", "80/s:3s", "--step", "1e6/s:9s", "ingest"]).unwrap();
        let schedule = args.schedule.schedule();
        assert_eq!(schedule.count(), 240 + 9_000_000);
        // The bound itself is allowed; the default schedule too.
        parse(&["--step", "1e6/s:10s", "hello"]).unwrap();
        let args = parse(&["ingest"]).unwrap();
        assert_eq!(args.schedule.schedule().count(), 800);
        let Command::Calibrate(calibration) = parse(&["calibrate"]).unwrap().command else {
            panic!("not calibrate");
        };
        assert_eq!(calibration.rates, [100.0, 1000.0, 10000.0, 30000.0]);
        assert_eq!(calibration.schedule().count(), 2 * 3 * 41_100);
    }
}
