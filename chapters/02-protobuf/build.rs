//! Generates Rust code for the workshop's `.proto` files at build time.
//!
//! `protox` parses and type-checks the files in pure Rust, so a fresh machine needs
//! no `protoc` binary. Its output is the same `FileDescriptorSet` that `protoc`
//! would produce; `tonic-prost-build` turns it into messages, clients and servers,
//! and we keep the encoded set so the gRPC server can answer reflection queries.

use std::{env, fs, path::PathBuf};

use prost::Message;

// ANCHOR: build
const PROTOS: &[&str] = &[
    "greeter/v1/greeter.proto",
    "streaming/v1/streaming.proto",
    "ingest/v1/ingest.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let out = PathBuf::from(env::var("OUT_DIR")?);

    let descriptors = protox::compile(PROTOS, [&root])?;
    fs::write(out.join("descriptors.bin"), descriptors.encode_to_vec())?;

    tonic_prost_build::configure().compile_fds(descriptors)?;

    for proto in PROTOS {
        println!("cargo:rerun-if-changed={}", root.join(proto).display());
    }
    Ok(())
}
// ANCHOR_END: build
