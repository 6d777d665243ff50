//! `cargo run -p perf --bin retry_storm -- --policy naive|...|budgeted`:
//! open-loop callers against an in-process slow server, and what their retries
//! do to it; `--compare` runs every policy and prints a row for each, and
//! with `--plot FILE.svg` draws their runs over time.

use std::{process::ExitCode, time::Duration};

use anyhow::Context;
use perf::retry::{
    Args, Config, Policy, Snapshot, comparison, plot, progress_line, run, run_sampled, summary,
};

fn main() -> ExitCode {
    program::exit_code(retry_storm(&program::args::<Args>()))
}

fn retry_storm(args: &Args) -> anyhow::Result<()> {
    let config = args.config();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(args.virtual_time)
        .build()
        .context("cannot start the Tokio runtime")?;
    if args.compare {
        // Before the runs: a plot that cannot be written fails at once.
        let file = args.plot.as_deref().map(perf::plot::create).transpose()?;
        let (mut rows, mut runs) = (Vec::new(), Vec::new());
        for policy in Policy::ALL {
            let config = Config {
                policy,
                ..config.clone()
            };
            eprintln!("running {policy:?} ...");
            let (last, timeline) = runtime.block_on(run_sampled(config));
            rows.push((policy, last));
            runs.push((policy, timeline));
        }
        println!("{}", comparison(&rows));
        if let (Some(file), Some(path)) = (file, &args.plot) {
            plot(file, path, &config, &runs)?;
            println!("plot: {}", path.display());
        }
        return Ok(());
    }
    let mut before = Snapshot::default();
    let last = runtime.block_on(run(config.clone(), Duration::from_secs(1), |now| {
        println!("{}", progress_line(now, &before));
        before = *now;
    }));
    println!("{}", summary(&config, &last));
    Ok(())
}
