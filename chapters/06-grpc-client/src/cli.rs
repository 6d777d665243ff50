//! The command lines of `grpc-client` and of the REST client example. They live
//! in the library so that tests, the book's checks and later chapters parse
//! exactly what the programs parse.

use std::{path::PathBuf, time::Duration};

use clap::{Args as ClapArgs, Parser, Subcommand, ValueEnum};

/// Where the stack serves gRPC (chapter 9), by the name its certificate carries.
pub const DEFAULT_TARGET: &str = "https://localhost:50051";

/// The stack's REST greetings endpoint, where `cargo run` serves it.
pub const DEFAULT_REST_URL: &str = "https://localhost:8443/v1/greetings";

/// Calls the Greeter and the Streamer over gRPC, on one channel, and explains
/// any failure with the status table.
#[derive(Parser, Debug, Clone)]
#[command(name = "grpc-client", version)]
pub struct Args {
    /// Server to call
    #[arg(long, env = "GRPC_TARGET", default_value = DEFAULT_TARGET)]
    pub target: String,
    /// CA certificate to trust for the server's certificate [default: certs/ca.pem]
    #[arg(long, env = "GRPC_CA", value_name = "PATH")]
    pub ca: Option<PathBuf>,
    /// Client certificate to present, for a server started with --mtls
    #[arg(long, value_name = "PATH", requires = "key")]
    pub cert: Option<PathBuf>,
    /// Private key of --cert
    #[arg(long, value_name = "PATH", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Deadline of each call, in seconds; sent to the server as grpc-timeout
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub deadline: Option<Seconds>,
    /// Report statuses exactly as tonic gives them, without telling an expired
    /// deadline apart from a cancellation (to see tonic's CANCELLED for yourself)
    #[arg(long)]
    pub raw_status: bool,
    /// Connect before the first call (eager) or on it (lazy)
    #[arg(long, value_enum, default_value_t = Connect::Lazy)]
    pub connect: Connect,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connect {
    /// The channel connects when the first call needs it
    Lazy,
    /// Connect (TCP, TLS, HTTP/2) first, and fail before any call if that fails
    Eager,
}

#[derive(Subcommand, Debug, Clone)]
pub enum Command {
    /// Unary SayHello
    Hello(HelloArgs),
    /// Server streaming: COUNT ticks, one every INTERVAL_MS
    Countdown(CountdownArgs),
    /// Client streaming: send CHUNKS chunks, get one summary
    Upload(UploadArgs),
    /// Bidirectional streaming: every chunk comes back
    Echo(EchoArgs),
    /// CALLS concurrent SayHello calls on the one channel, with a tally of the outcomes
    Burst(BurstArgs),
}

#[derive(ClapArgs, Debug, Clone)]
pub struct HelloArgs {
    /// The name to greet
    #[arg(long, default_value = "Ada")]
    pub name: String,
    /// How long the server waits before it answers, in milliseconds
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u32,
    /// Pad the name with 'x' to this many bytes (to try the server's message size limit)
    #[arg(long, value_name = "N")]
    pub name_bytes: Option<usize>,
    /// Cancel the call from this side after this many seconds (no deadline is
    /// sent for it: the server only sees the stream reset)
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub cancel_after: Option<Seconds>,
    /// Make the call this many times, one after the other, and time each
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// A new channel (new TCP connection and TLS handshake) for every call:
    /// the mistake this chapter warns about, here to be measured
    #[arg(long)]
    pub fresh_channel: bool,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct CountdownArgs {
    /// Ticks to receive
    #[arg(long, default_value_t = 5)]
    pub count: u32,
    /// Pause between ticks, in milliseconds
    #[arg(long, default_value_t = 200)]
    pub interval_ms: u32,
    /// Filler bytes in each tick
    #[arg(long, default_value_t = 0)]
    pub payload_bytes: u32,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct UploadArgs {
    /// Chunks to send
    #[arg(long, default_value_t = 10)]
    pub chunks: u64,
    /// Bytes in each chunk
    #[arg(long, default_value_t = 1024)]
    pub chunk_bytes: usize,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct EchoArgs {
    /// Chunks to send, each after the previous one came back
    #[arg(long, default_value_t = 5)]
    pub chunks: u64,
    /// Bytes in each chunk
    #[arg(long, default_value_t = 16)]
    pub chunk_bytes: usize,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct BurstArgs {
    /// Calls to start at once
    #[arg(long, default_value_t = 10)]
    pub calls: u32,
    /// The name to greet
    #[arg(long, default_value = "Ada")]
    pub name: String,
    /// How long the server holds each call, in milliseconds, so that they overlap
    #[arg(long, default_value_t = 500)]
    pub delay_ms: u32,
}

/// A duration given in (possibly fractional) seconds, remembered as typed so
/// that messages can say "0.5s" back to the reader.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seconds {
    pub secs: f64,
    pub duration: Duration,
}

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}s", self.secs)
    }
}

pub fn parse_secs(text: &str) -> Result<Seconds, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if secs.is_nan() || secs <= 0.0 {
        return Err(format!("must be more than 0 seconds, got {text}"));
    }
    let duration =
        Duration::try_from_secs_f64(secs).map_err(|_| format!("`{text}` seconds is too long"))?;
    Ok(Seconds { secs, duration })
}

/// `cargo run --example rest_client`: one REST greeting with reqwest, one
/// client reused for every request.
#[derive(Parser, Debug, Clone)]
#[command(name = "rest_client", version)]
pub struct RestArgs {
    /// The greetings endpoint
    #[arg(default_value = DEFAULT_REST_URL)]
    pub url: String,
    /// The name to greet
    #[arg(long, default_value = "Ada")]
    pub name: String,
    /// How long the server waits before it answers, in milliseconds
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u32,
    /// Give up on a request after this many seconds
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub timeout: Option<Seconds>,
    /// CA certificate to trust for the server's certificate [default: certs/ca.pem]
    #[arg(long, value_name = "PATH")]
    pub ca: Option<PathBuf>,
    /// Offer only HTTP/1.1 in ALPN (the default offers h2 first, then http/1.1)
    #[arg(long)]
    pub http1: bool,
    /// Send the request this many times on the one client, and time each
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Send the --repeat requests all at once instead of one after the other
    #[arg(long)]
    pub parallel: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_keep_their_spelling_and_refuse_nonsense() {
        assert_eq!(parse_secs("0.5").unwrap().to_string(), "0.5s");
        assert_eq!(parse_secs("2").unwrap().to_string(), "2s");
        assert_eq!(
            parse_secs("0.25").unwrap().duration,
            Duration::from_millis(250)
        );
        for bad in ["0", "-1", "soon", "NaN", "inf", "1e300"] {
            assert!(parse_secs(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_book_commands_parse() {
        Args::try_parse_from([
            "grpc-client",
            "--deadline",
            "0.5",
            "hello",
            "--delay-ms",
            "800",
        ])
        .unwrap();
        Args::try_parse_from(["grpc-client", "hello", "--name", ""]).unwrap();
        assert!(Args::try_parse_from(["grpc-client", "--cert", "c.pem", "hello"]).is_err());
        RestArgs::try_parse_from([
            "rest_client",
            "https://localhost:8443/v1/greetings",
            "--name",
            "Ada",
            "--timeout",
            "0.5",
            "--http1",
        ])
        .unwrap();
    }
}
