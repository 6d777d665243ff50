//! `cargo run -p proto --bin wire_size`: the same greeting as Protocol Buffers
//! bytes and as JSON text, side by side.

use std::process::ExitCode;

use prost::Message;
use proto::cli::WireSizeArgs as Args;
use proto::greeter::v1::HelloRequest;

/// The REST contract's request body (chapter 5), field for field.
#[derive(serde::Serialize)]
struct JsonGreeting<'a> {
    name: &'a str,
    delay_ms: u32,
}

fn main() -> ExitCode {
    program::exit_code(wire_size(&program::args::<Args>()))
}

fn wire_size(args: &Args) -> anyhow::Result<()> {
    let (protobuf, json) = encode(&args.name, args.delay_ms);
    println!(
        "HelloRequest {{ name: {:?}, delay_ms: {} }}",
        args.name, args.delay_ms
    );
    let shown = if protobuf.is_empty() {
        "(nothing)".to_string()
    } else {
        hex(&protobuf)
    };
    println!("  protobuf: {:>4} bytes  {shown}", protobuf.len());
    println!("  JSON:     {:>4} bytes  {json}", json.len());
    println!();
    if protobuf.is_empty() {
        println!("every field holds its default value (\"\" and 0), and defaults are not sent:");
        println!("the protobuf encoding is empty.");
    } else {
        println!("protobuf, field by field:");
        for line in explain(&protobuf) {
            println!("  {line}");
        }
    }
    if let Some(path) = &args.plot {
        plot(path, args.delay_ms)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        println!();
        println!(
            "plot of both sizes for names of 0 to {PLOT_MAX_NAME} characters: {}",
            path.display()
        );
    }
    Ok(())
}

// ANCHOR: encode
/// The same greeting in both encodings: protobuf bytes and JSON text.
fn encode(name: &str, delay_ms: u32) -> (Vec<u8>, String) {
    let protobuf = HelloRequest {
        name: name.to_string(),
        delay_ms,
    }
    .encode_to_vec();
    let json = serde_json::to_string(&JsonGreeting { name, delay_ms })
        .expect("a struct of a string and a number always serializes");
    (protobuf, json)
}
// ANCHOR_END: encode

const PLOT_MAX_NAME: usize = 100;

/// Encoded size against name length, for both encodings, as an SVG line chart.
fn plot(path: &std::path::Path, delay_ms: u32) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let series: Vec<(usize, usize, usize)> = (0..=PLOT_MAX_NAME)
        .map(|n| {
            let (protobuf, json) = encode(&"x".repeat(n), delay_ms);
            (n, protobuf.len(), json.len())
        })
        .collect();
    let top = series.iter().map(|&(_, _, j)| j).max().unwrap_or(1) + 10;

    let root = SVGBackend::new(path, (720, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("HelloRequest size, delay_ms = {delay_ms}"),
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0..PLOT_MAX_NAME, 0..top)?;
    chart
        .configure_mesh()
        .x_desc("name length (characters)")
        .y_desc("encoded size (bytes)")
        .draw()?;
    let styles = [("JSON", RED), ("protobuf", BLUE)];
    for (label, color) in styles {
        let points = series
            .iter()
            .map(|&(n, p, j)| (n, if label == "JSON" { j } else { p }));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
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

// ANCHOR: varint
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
// ANCHOR_END: varint

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
