//! What every experiment of chapters 11-14 needs besides the thing it
//! measures, written once (chapter 11) so that each later chapter keeps only
//! its measurement. An experiment reads as
//! `config -> run -> raw records -> reduce -> tables -> render`:
//!
//! - [`experiment`]: the template. `Args` (the command line) become a checked
//!   `Config` (`--quick` only changes defaults); the config is stored with the
//!   run; `run` measures and writes typed raw records; `reduce` turns them
//!   into small tables; `render` turns the tables on disk into the report and
//!   plots; the raw records are then kept compressed. `--render DIR`
//!   re-creates the report of a finished run without running anything, byte
//!   for byte, and `--from-raw` reduces its raw records again first.
//! - [`folder`]: the results folder and its `meta.json` (program, arguments,
//!   build, machine, load average at the start, and whether the run is
//!   running, finished, interrupted or failed). A mistyped `--out` is
//!   refused rather than emptied: only an earlier run is ever deleted.
//! - [`records`]: typed rows to and from CSV, and typed JSON, through one
//!   path: a reader never looks a column up by position or a field up by name.
//! - [`child`]: a process the experiment starts from its own executable,
//!   configured by a typed value and answering with a typed ready record, so
//!   that every run gets fresh memory, connections and timers.
//! - [`pod`]: a CPU quota for a child, as Kubernetes limits a pod's CPU, so
//!   that the server saturates before the load generator does.
//! - [`plot`]: SVG charts without fonts.
//! - [`live`]: `--live`, a page that draws the run while it goes on, from
//!   the records it is writing.

pub mod child;
pub mod experiment;
pub mod folder;
pub mod live;
pub mod plot;
pub mod pod;
pub mod records;
pub mod report;

pub use experiment::{Experiment, Start};
pub use folder::{Folder, RunMeta, State};
