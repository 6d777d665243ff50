//! `cargo run -p streaming --bin flow_control`: HTTP/2 flow control made
//! visible. The work is in `streaming::flow`; this is its command line.

use std::{fs, io::Write, process::ExitCode};

use clap::Parser;
use streaming::{
    cli::Args,
    flow::{self, Direction, Sample},
};

fn main() -> ExitCode {
    program::init_tracing();
    let args = Args::parse();
    let config = args.config();
    if let Err(e) = config.check() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the Tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };

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
    let result = runtime.block_on(flow::run(&config, |sample| {
        println!("{}", sample.line());
        let _ = std::io::stdout().flush();
        csv.push_str(&sample.csv());
        csv.push('\n');
    }));
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    println!("\n{}", report.summary());
    if let Some(path) = args.csv {
        match fs::write(&path, csv) {
            Ok(()) => println!("samples written to {}", path.display()),
            Err(e) => {
                eprintln!("error: cannot write {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
