//! `cargo run -p proto --bin grpc_frame`: writes one gRPC message frame to stdout.
//!
//! A gRPC request body on HTTP/2 is a sequence of frames: one byte saying
//! whether the message is compressed, four bytes of big-endian length, then the
//! protobuf bytes. Writing that frame by hand lets `curl --http2` call a gRPC
//! server, which shows that gRPC is ordinary HTTP/2 with a framing convention.

use std::io::Write;

use clap::Parser;
use prost::Message;
use proto::cli::GrpcFrameArgs as Args;
use proto::greeter::v1::HelloRequest;

// ANCHOR: frame
/// The 5-byte gRPC message prefix followed by the message itself.
pub fn frame(message: &[u8]) -> Vec<u8> {
    let mut framed = Vec::with_capacity(5 + message.len());
    framed.push(0); // 0 = not compressed
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(message);
    framed
}
// ANCHOR_END: frame

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let request = HelloRequest {
        name: args.name,
        delay_ms: args.delay_ms,
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&frame(&request.encode_to_vec()))?;
    stdout.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_a_greeting_with_a_big_endian_length() {
        let message = HelloRequest {
            name: "Ada".into(),
            delay_ms: 0,
        }
        .encode_to_vec();
        assert_eq!(frame(&message), [0, 0, 0, 0, 5, 0x0a, 3, b'A', b'd', b'a']);
    }

    #[test]
    fn an_empty_message_is_just_the_prefix() {
        assert_eq!(frame(&[]), [0, 0, 0, 0, 0]);
    }
}
