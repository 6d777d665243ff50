//! An open-loop load generator (chapter 11), shared by chapters 11-14.
//!
//! Sends are due at absolute times fixed before the run ([`schedule`]);
//! [`open_loop`] keeps that schedule against a server that cannot keep up and
//! records what became of every slot, including the ones it could not send;
//! [`report`] turns records into percentiles and files; [`plot`] draws them.

pub mod cli;
pub mod ingest;
pub mod meta;
pub mod open_loop;
pub mod plot;
pub mod report;
pub mod schedule;

pub use open_loop::{
    Counters, Outcome, SendError, SlotRecord, WhenFull, run_bounded, run_skipping,
};
pub use report::{Percentiles, Summary};
pub use schedule::{Schedule, Slot, Step};
