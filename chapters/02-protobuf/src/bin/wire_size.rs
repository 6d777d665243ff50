//! `cargo run -p proto --bin wire_size`: the same greeting as Protocol Buffers
//! bytes and as JSON text, side by side.

use clap::Parser;
use prost::Message;
use proto::greeter::v1::HelloRequest;

/// Prints the encoded size of one HelloRequest in protobuf and in JSON, and the
/// protobuf bytes themselves, field by field.
#[derive(Parser)]
#[command(name = "wire_size", version)]
struct Args {
    /// The name to greet
    #[arg(long, default_value = "Ada")]
    name: String,
    /// The server-side delay, in milliseconds
    #[arg(long, default_value_t = 800)]
    delay_ms: u32,
}

/// The REST contract's request body (chapter 5), field for field.
#[derive(serde::Serialize)]
struct JsonGreeting<'a> {
    name: &'a str,
    delay_ms: u32,
}

fn main() {
    let args = Args::parse();
    // ANCHOR: encode
    let request = HelloRequest {
        name: args.name.clone(),
        delay_ms: args.delay_ms,
    };
    let protobuf = request.encode_to_vec();
    let json = serde_json::to_string(&JsonGreeting {
        name: &args.name,
        delay_ms: args.delay_ms,
    })
    .expect("a struct of a string and a number always serializes");
    // ANCHOR_END: encode

    println!(
        "HelloRequest {{ name: {:?}, delay_ms: {} }}",
        args.name, args.delay_ms
    );
    println!(
        "  protobuf: {:>4} bytes  {}",
        protobuf.len(),
        hex(&protobuf)
    );
    println!("  JSON:     {:>4} bytes  {json}", json.len());
    println!();
    println!("protobuf, field by field:");
    for line in explain(&protobuf) {
        println!("  {line}");
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Walks the wire format by hand: each field is a key (field number and wire
/// type, as a varint) followed by a varint value or a length and that many bytes.
/// A field holding its default (0, "") is not on the wire at all.
fn explain(mut bytes: &[u8]) -> Vec<String> {
    let mut lines = Vec::new();
    while !bytes.is_empty() {
        let Some((key, used)) = varint(bytes) else {
            break;
        };
        let (field, wire_type) = (key >> 3, key & 7);
        let key_hex = hex(&bytes[..used]);
        bytes = &bytes[used..];
        match wire_type {
            0 => {
                let Some((value, n)) = varint(bytes) else {
                    break;
                };
                lines.push(format!(
                    "{key_hex} | {}  field {field}, varint = {value}",
                    hex(&bytes[..n])
                ));
                bytes = &bytes[n..];
            }
            2 => {
                let Some((len, n)) = varint(bytes) else { break };
                let end = (n + len as usize).min(bytes.len());
                let text = String::from_utf8_lossy(&bytes[n..end]);
                lines.push(format!(
                    "{key_hex} | {} | {}  field {field}, {len} bytes = {text:?}",
                    hex(&bytes[..n]),
                    hex(&bytes[n..end])
                ));
                bytes = &bytes[end..];
            }
            other => {
                lines.push(format!(
                    "{key_hex}  field {field}, wire type {other} (not used by this message)"
                ));
                break;
            }
        }
    }
    lines
}

fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, b) in bytes.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explains_both_fields_of_a_greeting() {
        let bytes = HelloRequest {
            name: "Ada".into(),
            delay_ms: 800,
        }
        .encode_to_vec();
        assert_eq!(bytes, [0x0a, 3, b'A', b'd', b'a', 0x10, 0xa0, 0x06]);
        let lines = explain(&bytes);
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].ends_with("field 1, 3 bytes = \"Ada\""),
            "{}",
            lines[0]
        );
        assert!(lines[1].ends_with("field 2, varint = 800"), "{}", lines[1]);
    }

    #[test]
    fn default_values_are_not_on_the_wire() {
        assert!(
            HelloRequest {
                name: String::new(),
                delay_ms: 0
            }
            .encode_to_vec()
            .is_empty()
        );
    }
}
