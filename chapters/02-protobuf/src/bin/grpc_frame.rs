//! `cargo run -p proto --bin grpc_frame`: writes one gRPC message frame to stdout.
//!
//! A gRPC request body on HTTP/2 is a sequence of frames: one byte saying
//! whether the message is compressed, four bytes of big-endian length, then the
//! protobuf bytes. Writing that frame by hand lets `curl --http2` call a gRPC
//! server, which shows that gRPC is ordinary HTTP/2 with a framing convention.
//! The frame itself is written by [`proto::grpc_frame`].

use std::{io::Write, process::ExitCode};

use proto::cli::GrpcFrameArgs as Args;
use proto::greeter::v1::HelloRequest;

fn main() -> ExitCode {
    program::exit_code(write_frame(program::args::<Args>()))
}

fn write_frame(args: Args) -> anyhow::Result<()> {
    let request = HelloRequest {
        name: args.name,
        delay_ms: args.delay_ms,
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&proto::grpc_frame(&request))?;
    stdout.flush()?;
    Ok(())
}
