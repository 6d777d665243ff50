//! An open-loop load generator (chapter 11), shared by chapters 11-14.
//!
//! Sends are due at absolute times fixed before the run ([`schedule`]);
//! [`pacing`] wakes the generator at those times, to within microseconds;
//! [`open_loop`] keeps that schedule against a server that cannot keep up and
//! records what became of every slot, including the ones it could not send;
//! [`summary`] counts the records and turns their times into percentiles;
//! [`ingest`] drives chapter 11's client-streaming call; [`calibrate`]
//! measures the generator's own error against a call that does nothing. The results folder,
//! the record files and the plots are the experiment harness's ([`harness`]).

pub mod calibrate;
pub mod cli;
pub mod ingest;
pub mod open_loop;
pub mod pacing;
pub mod schedule;
pub mod summary;

pub use open_loop::{
    Counters, Outcome, SendError, SlotRecord, WhenFull, run_bounded, run_skipping,
};
pub use pacing::Timer;
pub use schedule::{Schedule, Slot, Slots, Step};
pub use summary::{Percentiles, Summary};
