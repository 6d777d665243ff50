//! The command lines of this crate's programs. They live in the library so that
//! the book's checks (`cargo xtask check-book`) can parse every command the book
//! shows against the real definitions.

use clap::Parser;

/// Prints the encoded size of one HelloRequest in protobuf and in JSON, and the
/// protobuf bytes themselves, field by field.
#[derive(Parser, Debug)]
#[command(name = "wire_size", version)]
pub struct WireSizeArgs {
    /// The name to greet
    #[arg(long, default_value = "Ada")]
    pub name: String,
    /// The server-side delay, in milliseconds
    #[arg(long, default_value_t = 800)]
    pub delay_ms: u32,
    /// Also draw both encodings' sizes for names of 0 to 100 characters, as an SVG file
    #[arg(long, value_name = "FILE")]
    pub plot: Option<std::path::PathBuf>,
}

/// Writes a HelloRequest as a gRPC frame (uncompressed flag, length, protobuf)
/// to stdout, for use with `curl --data-binary @-`.
#[derive(Parser, Debug)]
#[command(name = "grpc_frame", version)]
pub struct GrpcFrameArgs {
    /// The name to greet
    #[arg(long, default_value = "Ada")]
    pub name: String,
    /// The server-side delay, in milliseconds
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u32,
}

/// Prints the table of gRPC status codes (from `proto::status`) as Markdown:
/// each code's meaning to a caller, its HTTP twin, and whether to retry it.
#[derive(Parser, Debug)]
#[command(name = "status_table", version)]
pub struct StatusTableArgs {}
