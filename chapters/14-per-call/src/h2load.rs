//! The independent cross-check: nghttp2's `h2load` (Debian: nghttp2-client)
//! hammering the same unary method closed-loop, when it is installed.
//!
//! h2load knows nothing about gRPC, but a gRPC call is an HTTP/2 POST whose
//! body is a 5-byte frame header and the protobuf message, so it can send one
//! from a file. It speaks plaintext HTTP/2 with prior knowledge to an
//! `http://` URL, which is what our server listens for.

use std::{net::SocketAddr, path::Path, process::Command};

use anyhow::Context;
use proto::greeter::v1::HelloRequest;
use serde::{Deserialize, Serialize};

/// What h2load reported, or why it did not run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossCheck {
    pub ran: bool,
    pub calls_per_s: Option<f64>,
    pub succeeded: Option<u64>,
    pub command: String,
    pub note: String,
}

/// A gRPC request body for SayHello: one frame (chapter 2).
pub fn grpc_body(name: &str) -> Vec<u8> {
    proto::grpc_frame(&HelloRequest {
        name: name.into(),
        delay_ms: 0,
    })
}

/// Runs `h2load` against `addr` for `calls` calls with `streams` in flight on
/// one connection, if it is installed.
pub fn cross_check(addr: SocketAddr, calls: u64, streams: usize, dir: &Path) -> CrossCheck {
    if !crate::placement::have("h2load") {
        return CrossCheck {
            ran: false,
            calls_per_s: None,
            succeeded: None,
            command: String::new(),
            note: "skipped: h2load not installed (Debian/Ubuntu: apt install nghttp2-client)"
                .into(),
        };
    }
    match run(addr, calls, streams, dir) {
        Ok(check) => check,
        Err(e) => CrossCheck {
            ran: false,
            calls_per_s: None,
            succeeded: None,
            command: String::new(),
            note: format!("h2load failed: {e:#}"),
        },
    }
}

fn run(addr: SocketAddr, calls: u64, streams: usize, dir: &Path) -> anyhow::Result<CrossCheck> {
    let body = dir.join("h2load-body.bin");
    std::fs::create_dir_all(dir)?;
    std::fs::write(&body, grpc_body("h2load"))?;
    let args = vec![
        "-n".to_string(),
        calls.to_string(),
        "-c".into(),
        "1".into(),
        "-m".into(),
        streams.to_string(),
        "-H".into(),
        "content-type: application/grpc".into(),
        "-H".into(),
        "te: trailers".into(),
        "-d".into(),
        body.display().to_string(),
        format!("http://{addr}/greeter.v1.Greeter/SayHello"),
    ];
    let command = format!("h2load {}", args.join(" "));
    let output = Command::new("h2load")
        .args(&args)
        .output()
        .context("cannot run h2load")?;
    let text = String::from_utf8_lossy(&output.stdout);
    let calls_per_s = text
        .lines()
        .find_map(|l| l.strip_prefix("finished in "))
        .and_then(|l| l.split(", ").nth(1))
        .and_then(|r| r.strip_suffix(" req/s"))
        .and_then(|r| r.trim().parse().ok());
    let succeeded = text
        .lines()
        .find_map(|l| l.strip_prefix("requests: "))
        .and_then(|l| l.split(", ").find_map(|p| p.strip_suffix(" succeeded")))
        .and_then(|n| n.trim().parse().ok());
    Ok(CrossCheck {
        ran: output.status.success() && calls_per_s.is_some(),
        calls_per_s,
        succeeded,
        command,
        note: if output.status.success() {
            "closed loop: as many calls as h2load can keep in flight, so this is a capacity, not a latency".into()
        } else {
            format!("h2load exited with {}", output.status)
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn the_body_is_one_grpc_frame() {
        let body = grpc_body("Ada");
        assert_eq!(body[0], 0);
        let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
        assert_eq!(body.len(), 5 + len);
        assert_eq!(HelloRequest::decode(&body[5..]).unwrap().name, "Ada");
    }
}
