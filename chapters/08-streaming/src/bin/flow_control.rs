//! `cargo run -p streaming --bin flow_control`: HTTP/2 flow control made
//! visible. The work is in `streaming::flow`; this is its command line.

use std::{fs, io::Write, process::ExitCode};

use anyhow::Context;
use program::Exit;
use streaming::{
    cli::Args,
    flow::{self, Direction, Sample},
};

/// Flags that each parse but do not go together (a window below HTTP/2's
/// minimum, say) are a bad command line: the status clap exits with for one.
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    program::init_tracing();
    program::exit_code(flow_control(program::args::<Args>()))
}

fn flow_control(args: Args) -> anyhow::Result<()> {
    let config = args.config();
    config.check().map_err(|e| Exit::error(EXIT_USAGE, e))?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the Tokio runtime")?;

    let (sender, reader) = match config.direction {
        Direction::Upload => (
            "the client (Upload)",
            "the server's Upload handler".to_string(),
        ),
        Direction::Download => ("the server's Countdown task", "the client".to_string()),
    };
    println!("{}", config.describe_windows());
    println!(
        "sender: {sender}, as fast as tonic takes messages of {} payload ({} on the wire)",
        flow::size(config.message_bytes.into()),
        flow::size(config.message_wire()),
    );
    println!(
        "reader: {reader}, one message every {} ms, for {:.1} s\n",
        config.read_every.as_millis(),
        config.duration.as_secs_f64(),
    );
    println!("{}", Sample::HEADER);

    let mut csv = String::from(Sample::CSV_HEADER);
    csv.push('\n');
    let report = runtime.block_on(flow::run(&config, |sample| {
        println!("{}", sample.line());
        let _ = std::io::stdout().flush();
        csv.push_str(&sample.csv());
        csv.push('\n');
    }))?;
    println!("\n{}", report.summary());
    if let Some(path) = args.csv {
        fs::write(&path, csv).with_context(|| format!("cannot write {}", path.display()))?;
        println!("samples written to {}", path.display());
    }
    Ok(())
}
