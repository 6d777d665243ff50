//! `cargo run -p streaming --bin slow_reader`: a client that never reads,
//! with the Streamer's reply budget and without. The work is in
//! `streaming::slow_reader`; this is its command line and its table.

use std::{io::Write, process::ExitCode, time::Duration};

use anyhow::Context;
use streaming::{
    flow::size,
    slow_reader::{self, Args, Sample},
};

fn main() -> ExitCode {
    // At `info` the server would log every one of the streams it ends.
    program::init_tracing_at("warn");
    program::exit_code(slow_reader(program::args::<Args>()))
}

fn slow_reader(args: Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the Tokio runtime")?;
    let mut reports = Vec::new();
    for config in args.configs() {
        println!(
            "budget {}: {} Countdowns of {} ticks on one connection, none read, for {:.1} s",
            config.budget,
            config.streams,
            size(config.payload_bytes.into()),
            config.hold.as_secs_f64(),
        );
        println!(
            "{:>8}  {:>7}  {:>12}  {:>10}",
            "at", "streams", "replies held", "RSS"
        );
        let report = runtime.block_on(slow_reader::run(&config, |s: &Sample| {
            println!(
                "{:>6.2} s  {:>7}  {:>12}  {:>10}",
                s.at.as_secs_f64(),
                s.open_streams,
                size(s.held_bytes as u64),
                size(s.rss_kib * 1024),
            );
            let _ = std::io::stdout().flush();
        }))?;
        println!();
        reports.push(report);
    }
    println!(
        "{:<6}  {:>10}  {:>10}  {:>10}  {:>20}  {:>22}",
        "budget",
        "RSS before",
        "at peak",
        "after",
        "replies held at peak",
        "well-behaved Countdown"
    );
    for r in &reports {
        println!(
            "{:<6}  {:>10}  {:>10}  {:>10}  {:>20}  {:>22}",
            r.budget,
            size(r.baseline_kib * 1024),
            size(r.peak_kib * 1024),
            size(r.after_kib * 1024),
            size(r.peak_held_bytes as u64),
            ms(r.legitimate),
        );
    }
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}
