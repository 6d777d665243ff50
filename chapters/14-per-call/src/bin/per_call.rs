//! `cargo run --release -p per-call --bin per_call`: the chapter 14 experiment.

use std::process::ExitCode;

use clap::Parser;
use per_call::{
    experiment::{Args, run},
    server::{Placement, have, pin_self, serve_process},
};

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match args.serve {
        Some(arm) => serve_process(arm),
        None => experiment(args),
    };
    program::exit_code(result)
}

// ANCHOR: placement
fn experiment(args: Args) -> anyhow::Result<()> {
    args.check()?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Pinned before the runtime exists: its threads inherit this process's CPU set.
    let placement = if args.no_pin {
        Placement {
            pinned: false,
            note: "not pinned (--no-pin): server and generator share every CPU".into(),
        }
    } else if cpus < 2 {
        Placement {
            pinned: false,
            note: format!(
                "not pinned: only {cpus} CPU available, so server and generator share it"
            ),
        }
    } else if !have("taskset") {
        Placement { pinned: false, note: "not pinned: taskset not found (Debian: util-linux); server and generator share every CPU".into() }
    } else {
        pin_self(1)?;
        Placement {
            pinned: true,
            note: "server on CPU 0, generator on CPU 1 (taskset)".into(),
        }
    };
    let exe = std::env::current_exe()?;
    // The generator runs on one core: a current-thread runtime suits it.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run(args, exe, placement))
}
// ANCHOR_END: placement
