//! Typed records on disk, written and read through one path. A row type is a
//! `Serialize + Deserialize` struct; its field names are the CSV header, so
//! the writer and every reader agree on columns by construction, never by
//! position. Single records (a summary, a contract) are pretty JSON.

use std::{path::Path, time::Duration};

use anyhow::Context;
use serde::{Serialize, de::DeserializeOwned};

/// Writes `rows` as CSV with a header. An empty table still gets its header,
/// so a reader can tell "no rows" from "no file".
pub fn write_csv<T: Serialize + DeserializeOwned>(path: &Path, rows: &[T]) -> anyhow::Result<()> {
    let mut out = csv::Writer::from_writer(Vec::new());
    if rows.is_empty() {
        out.write_record(field_names::<T>())?;
    }
    for row in rows {
        out.serialize(row)
            .with_context(|| format!("cannot write a row of {}", path.display()))?;
    }
    write(path, &out.into_inner().context("cannot finish the CSV")?)
}

/// The CSV header of a row type: its field names as serde sees them (renames
/// applied), asked of its `Deserialize` implementation, which announces them
/// before it reads anything.
fn field_names<T: DeserializeOwned>() -> Vec<&'static str> {
    struct Names(Option<&'static [&'static str]>);
    #[derive(Debug)]
    struct Stop;
    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("field names taken")
        }
    }
    impl std::error::Error for Stop {}
    impl serde::de::Error for Stop {
        fn custom<M: std::fmt::Display>(_: M) -> Stop {
            Stop
        }
    }
    impl<'de> serde::Deserializer<'de> for &mut Names {
        type Error = Stop;
        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            self.0 = Some(fields);
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }
    let mut names = Names(None);
    let _ = T::deserialize(&mut names);
    names.0.unwrap_or_default().to_vec()
}

/// Reads a CSV file that [`write_csv`] wrote; a bad row names its line.
pub fn read_csv<T: DeserializeOwned>(path: &Path) -> anyhow::Result<Vec<T>> {
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    reader
        .deserialize()
        .enumerate()
        .map(|(i, row)| row.with_context(|| format!("{}: row {}", path.display(), i + 1)))
        .collect()
}

/// Writes `value` as pretty JSON, with a final newline.
pub fn write_json(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    let mut text = serde_json::to_vec_pretty(value)?;
    text.push(b'\n');
    write(path, &text)
}

pub fn read_json<T: DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&text)
        .with_context(|| format!("{} is not what it should be", path.display()))
}

/// Writes a file, creating its folder first.
pub fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// A `Duration` in a CSV column as milliseconds with three decimals
/// (`12.345`): exact to the microsecond both ways, so a table read back is
/// the table that was written. Use as `#[serde(with = "harness::records::ms")]`.
pub mod ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_ms(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        super::parse_ms(&text)
            .ok_or_else(|| D::Error::custom(format!("`{text}` is not milliseconds")))
    }
}

/// [`ms`] for an `Option<Duration>`: an empty field is `None`.
pub mod opt_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&d.map(super::format_ms).unwrap_or_default())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text = String::deserialize(d)?;
        if text.is_empty() {
            return Ok(None);
        }
        super::parse_ms(&text)
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("`{text}` is not milliseconds")))
    }
}

fn format_ms(d: Duration) -> String {
    let us = d.as_micros();
    format!("{}.{:03}", us / 1000, us % 1000)
}

fn parse_ms(text: &str) -> Option<Duration> {
    let ms: f64 = text.trim().parse().ok()?;
    (ms.is_finite() && ms >= 0.0).then(|| Duration::from_micros((ms * 1e3).round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Row {
        index: u64,
        #[serde(rename = "due_ms", with = "ms")]
        due: Duration,
        #[serde(rename = "ended_ms", with = "opt_ms")]
        ended: Option<Duration>,
        code: Option<String>,
    }

    #[test]
    fn rows_come_back_as_they_went_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.csv");
        let rows = vec![
            Row {
                index: 0,
                due: Duration::from_micros(12_345),
                ended: Some(Duration::from_micros(5_000)),
                code: None,
            },
            Row {
                index: 1,
                due: Duration::from_nanos(1_999), // kept to the microsecond
                ended: None,
                code: Some("UNAVAILABLE: a, b".into()),
            },
        ];
        write_csv(&path, &rows).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "index,due_ms,ended_ms,code\n0,12.345,5.000,\n1,0.001,,\"UNAVAILABLE: a, b\"\n"
        );
        let back: Vec<Row> = read_csv(&path).unwrap();
        assert_eq!(back[0], rows[0]);
        assert_eq!(back[1].due, Duration::from_micros(1));
        assert_eq!(back[1].code.as_deref(), Some("UNAVAILABLE: a, b"));
    }

    #[test]
    fn an_empty_table_keeps_its_header_and_a_bad_row_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.csv");
        write_csv::<Row>(&path, &[]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "index,due_ms,ended_ms,code\n"
        );
        assert!(read_csv::<Row>(&path).unwrap().is_empty());
        std::fs::write(&path, "index,due_ms,ended_ms,code\n0,1.0,,\nx,soon,,\n").unwrap();
        let error = format!("{:#}", read_csv::<Row>(&path).unwrap_err());
        assert!(error.contains("row 2"), "{error}");
    }
}
