//! The template every experiment of chapters 11-16 follows:
//!
//! ```text
//! Args (clap) --config()--> Config --run--> raw records --reduce--> tables --render--> report, plots
//! ```
//!
//! `Args::config` checks the flags and fills in defaults (`--quick` changes
//! only defaults, so a quick run is the same experiment, smaller). The
//! `Config` is stored in the results folder before anything runs; `run`
//! writes typed raw records (a row per call, per message...); `reduce` turns
//! them into the small typed tables the report is drawn from; `render` reads
//! the config and those tables back from disk and writes the report. Then
//! the raw records are packed: compressed, in the folder or in `--raw-out`.
//!
//! Because a run renders itself the same way, `--render DIR` re-creates a
//! finished run's report byte for byte from its tables, without running
//! anything, and `--render DIR --from-raw` reduces the raw records again
//! first: the proof that the tables are what the records say.

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
    /// With --render: reduce the raw records again before drawing, from
    /// DIR's own or from RAW (a run's --raw-out)
    #[arg(long, value_name = "RAW", requires = "render")]
    pub from_raw: Option<Option<PathBuf>>,
    /// Keep the raw records, compressed, in this folder instead of the
    /// results folder (the book keeps its runs' in book/raw/, which the
    /// published book leaves out)
    #[arg(long, value_name = "DIR", conflicts_with = "render")]
    pub raw_out: Option<PathBuf>,
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
    /// Reads the raw records in the first folder and writes the tables the
    /// report is drawn from into the second (the same folder after a run).
    pub reduce: fn(&E, &Folder, &Folder) -> anyhow::Result<()>,
    /// Reads the tables in the folder and writes the report files there;
    /// returns what to print (the tables a reader looks at first).
    pub render: fn(&E, &Folder) -> anyhow::Result<String>,
    /// The raw records: the files whose path in the folder starts with one
    /// of these, packed once the run is reduced.
    pub raw: &'static [&'static str],
}

/// The `reduce` of an experiment whose run writes its tables itself: it
/// keeps no record per call, or its records are the tables.
pub fn nothing_to_reduce<E>(_: &E, _: &Folder, _: &Folder) -> anyhow::Result<()> {
    Ok(())
}

/// Whether a run starts afresh or continues an interrupted one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Fresh,
    /// Keep the folder of an interrupted run with the same configuration;
    /// `run` skips what it finds done.
    Resume,
}

/// [`main`] on a current-thread runtime of its own, for an experiment whose
/// generator is pinned to one core: the runtime starts no thread, and the
/// generator's timing thread is its only other one.
pub fn main_on_one_thread<E: Experiment>(
    flags: &Flags,
    config: impl FnOnce() -> anyhow::Result<E>,
    start: Start,
    steps: Steps<E, impl AsyncFnOnce(&E, &Folder) -> anyhow::Result<()>>,
) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(main(flags, config, start, steps))
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
        let from = match &flags.from_raw {
            Some(raw) => {
                let raw = raw.as_deref().map_or(Ok(folder.clone()), Folder::open)?;
                (steps.reduce)(&config, &raw, &folder)?;
                format!("its raw records in {}", raw.path().display())
            }
            None => "its tables".to_string(),
        };
        print!("{}", (steps.render)(&config, &folder)?);
        println!("rendered again from {from}: {}", dir.display());
        return Ok(());
    }
    let config = config()?;
    if let Some(dir) = &flags.raw_out
        && (dir.starts_with(config.out()) || config.out().starts_with(dir))
    {
        bail!(
            "--raw-out {} and --out {} are one inside the other; give --raw-out a folder \
             of its own, or leave it out to keep the raw records in the results folder",
            dir.display(),
            config.out().display()
        );
    }
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
    // Made before the run, so that a mistyped --raw-out is refused at once.
    let raw_out = match &flags.raw_out {
        Some(dir) => Folder::create_for("--raw-out", dir)?,
        None => folder.clone(),
    };
    let mut signals = program::stop_signals();
    let ran = tokio::select! {
        ran = async {
            (steps.run)(&config, &folder).await?;
            (steps.reduce)(&config, &folder, &folder)?;
            let report = (steps.render)(&config, &folder)?;
            if !steps.raw.is_empty() {
                eprintln!("packing the raw records (zstd) ...");
            }
            let packed = folder.pack(steps.raw, &raw_out)?;
            raw_out.set_state(State::Finished, None)?;
            if packed.files > 0 {
                eprintln!(
                    "raw records: {} files, {:.1} MB, kept as {:.1} MB in {}",
                    packed.files,
                    packed.bytes as f64 / 1e6,
                    packed.compressed as f64 / 1e6,
                    raw_out.path().display()
                );
            }
            anyhow::Ok(report)
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
