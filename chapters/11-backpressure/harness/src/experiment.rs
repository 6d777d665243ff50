//! The template every experiment of chapters 11-14 follows:
//!
//! ```text
//! Args (clap) --config()--> Config --run--> records on disk --render--> tables, plots
//! ```
//!
//! `Args::config` checks the flags and fills in defaults (`--quick` changes
//! only defaults, so a quick run is the same experiment, smaller). The
//! `Config` is stored in the results folder before anything runs; `run`
//! writes typed records; `render` reads the config and the records back from
//! disk and writes the report. Because a run renders itself the same way,
//! `--render DIR` re-creates a finished run's report byte for byte, without
//! running anything (say, after the report's layout changed).

use std::path::{Path, PathBuf};

use anyhow::bail;
use serde::{Serialize, de::DeserializeOwned};

use crate::folder::{Folder, State};

/// The flags every experiment has (flatten them into its `Args`).
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct Flags {
    /// A shorter run with the same shape
    #[arg(long)]
    pub quick: bool,
    /// Do not run anything: re-create the report, tables and plots of the
    /// finished run in DIR from its records
    #[arg(long, value_name = "DIR")]
    pub render: Option<PathBuf>,
}

/// The file in every results folder that holds the run's `Config`.
pub const CONFIG: &str = "config.json";

/// An experiment's checked configuration: stored with the run, compared
/// when a run is resumed.
pub trait Experiment: Serialize + DeserializeOwned + PartialEq {
    /// The flag that continues an interrupted run, for an experiment that can.
    const RESUME: Option<&'static str> = None;
    /// Where a new run's results go (`--out`).
    fn out(&self) -> &Path;
}

/// What an experiment does, besides being configured.
pub struct Steps<E, R> {
    /// Measures, writing typed records into the folder.
    pub run: R,
    /// Reads the records in the folder and writes the report files there;
    /// returns what to print (the tables a reader looks at first).
    pub render: fn(&E, &Folder) -> anyhow::Result<String>,
}

/// Whether a run starts afresh or continues an interrupted one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Fresh,
    /// Keep the folder of an interrupted run with the same configuration;
    /// `run` skips what it finds done.
    Resume,
}

/// Runs the experiment and renders it, or with `--render DIR` only renders.
/// Prints the folder at the end either way. The run's `meta.json` says how
/// it ended: finished, failed (with the error), or interrupted by Ctrl-C or
/// SIGTERM, which stop it at once (its children are killed as the run is
/// dropped) and exit with the signal's status (130 for Ctrl-C).
pub async fn main<E: Experiment>(
    flags: &Flags,
    config: impl FnOnce() -> anyhow::Result<E>,
    start: Start,
    steps: Steps<E, impl AsyncFnOnce(&E, &Folder) -> anyhow::Result<()>>,
) -> anyhow::Result<()> {
    if let Some(dir) = &flags.render {
        let folder = Folder::open(dir)?;
        folder.check_finished(E::RESUME)?;
        let config: E = folder.read_json(CONFIG)?;
        print!("{}", (steps.render)(&config, &folder)?);
        println!("rendered again from its records: {}", dir.display());
        return Ok(());
    }
    let config = config()?;
    let folder = match start {
        Start::Resume if config.out().join(CONFIG).exists() => {
            let folder = Folder::open(config.out())?;
            let stored: E = folder.read_json(CONFIG)?;
            if stored != config {
                bail!(
                    "the stored configuration of the run in {} differs from these flags'; \
                     resume it with the same flags, or start afresh without --resume",
                    config.out().display()
                );
            }
            folder.set_state(State::Running, None)?;
            folder
        }
        _ => {
            let folder = Folder::create(config.out())?;
            folder.write_json(CONFIG, &config)?;
            folder
        }
    };
    let mut signals = program::stop_signals();
    let ran = tokio::select! {
        ran = async {
            (steps.run)(&config, &folder).await?;
            (steps.render)(&config, &folder)
        } => ran,
        Some(signal) = signals.recv() => {
            folder.set_state(State::Interrupted, None)?;
            let next = match E::RESUME {
                Some(flag) => format!("continue it with the same flags and {flag}"),
                None => "run it again".to_string(),
            };
            return Err(program::Exit::report(
                signal.exit_status(),
                format!(
                    "interrupted by {signal}: the run in {} is incomplete, and its \
                     meta.json says so; to finish it, {next}",
                    folder.path().display()
                ),
            )
            .into());
        }
    };
    match ran {
        Ok(report) => {
            folder.set_state(State::Finished, None)?;
            print!("{report}");
            println!("results in {}", folder.path().display());
            Ok(())
        }
        Err(e) => {
            folder.set_state(State::Failed, Some(format!("{e:#}")))?;
            Err(e)
        }
    }
}
