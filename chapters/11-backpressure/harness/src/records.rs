//! Typed records on disk, written and read through one path. A row type is a
//! `Serialize + Deserialize` struct; its field names are the CSV header, so
//! the writer and every reader agree on columns by construction, never by
//! position. Single records (a summary, a contract) are pretty JSON.

use std::{
    fs::File,
    marker::PhantomData,
    path::{Path, PathBuf},
    sync::Mutex,
    time::{Duration, Instant},
};

use anyhow::Context;
use serde::{Serialize, de::DeserializeOwned};

#[doc(hidden)]
pub use serde as __serde;

/// On disk, a type is written as it is typed on the command line: serde
/// goes through its `Display` and `FromStr`, so a `config.json` or a CSV
/// column says `mt2-spawn`, not a nested object. `harness::text_serde!(Arm);`
#[macro_export]
macro_rules! text_serde {
    ($type:ty) => {
        impl $crate::records::__serde::Serialize for $type {
            fn serialize<S: $crate::records::__serde::Serializer>(
                &self,
                s: S,
            ) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> $crate::records::__serde::Deserialize<'de> for $type {
            fn deserialize<D: $crate::records::__serde::Deserializer<'de>>(
                d: D,
            ) -> Result<$type, D::Error> {
                <String as $crate::records::__serde::Deserialize>::deserialize(d)?
                    .parse()
                    .map_err(<D::Error as $crate::records::__serde::de::Error>::custom)
            }
        }
    };
}

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

/// Where a record is kept compressed (zstd) once its run was reduced:
/// `NAME.zst` beside `NAME`.
pub fn compressed(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".zst");
    PathBuf::from(name)
}

/// `path`'s bytes, or those of [`compressed`]`(path)` decompressed when only that is
/// there: every reader of records reads a packed run's raw records as if
/// they had never been compressed.
pub fn read_bytes(path: &Path) -> anyhow::Result<Vec<u8>> {
    let packed = compressed(path);
    if !path.exists() && packed.exists() {
        let file = File::open(&packed).map_err(|e| cannot("read", &packed, e.into()))?;
        return zstd::decode_all(file).map_err(|e| cannot("decompress", &packed, e.into()));
    }
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Reads a CSV file that [`write_csv`] wrote (or its compressed copy); a bad
/// row names its line.
pub fn read_csv<T: DeserializeOwned>(path: &Path) -> anyhow::Result<Vec<T>> {
    let bytes = read_bytes(path)?;
    csv::Reader::from_reader(bytes.as_slice())
        .deserialize()
        .enumerate()
        .map(|(i, row)| row.with_context(|| format!("{}: row {}", path.display(), i + 1)))
        .collect()
}

/// A CSV table that grows on disk while the run goes on, row by row, so that
/// a reader (the live view) can follow a run that has not ended. The file is
/// the one [`write_csv`] would write from the same rows; rows reach it at
/// least every [`Growing::FLUSH_EVERY`], so a reader is never more than that
/// behind. Shared by reference: the writer is behind a lock, held only to
/// format a row.
pub struct Growing<T> {
    path: std::path::PathBuf,
    state: Mutex<GrowingState>,
    row: PhantomData<fn(&T)>,
}

impl<T> std::fmt::Debug for Growing<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Growing").field("path", &self.path).finish()
    }
}

struct GrowingState {
    out: csv::Writer<File>,
    flushed: Instant,
    /// The first error, kept for [`Growing::finish`]: a measurement in
    /// progress is not stopped by a full disk, but its result is not trusted.
    error: Option<anyhow::Error>,
}

impl<T: Serialize + DeserializeOwned> Growing<T> {
    pub const FLUSH_EVERY: Duration = Duration::from_millis(200);

    /// Creates the file (and its folder) with the header alone.
    pub fn create(path: &Path) -> anyhow::Result<Growing<T>> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let file = File::create(path).map_err(|e| cannot("write", path, e.into()))?;
        let mut out = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(file);
        out.write_record(field_names::<T>())
            .map_err(csv_error)
            .and_then(|()| Ok(out.flush()?))
            .map_err(|e| cannot("write", path, e))?;
        Ok(Growing {
            path: path.to_path_buf(),
            state: Mutex::new(GrowingState {
                out,
                flushed: Instant::now(),
                error: None,
            }),
            row: PhantomData,
        })
    }

    pub fn push(&self, row: &T) {
        let mut state = self.state.lock().expect("growing table lock");
        let result = state.out.serialize(row).map_err(csv_error).and_then(|()| {
            if state.flushed.elapsed() >= Self::FLUSH_EVERY {
                state.flushed = Instant::now();
                state.out.flush()?;
            }
            Ok(())
        });
        if let Err(e) = result {
            state.error.get_or_insert(e);
        }
    }

    /// Writes what is still buffered; fails if any row could not be written.
    pub fn finish(self) -> anyhow::Result<()> {
        let mut state = self.state.into_inner().expect("growing table lock");
        if let Some(e) = state.error {
            return Err(cannot("write", &self.path, e));
        }
        state
            .out
            .flush()
            .map_err(|e| cannot("write", &self.path, e.into()))
    }
}

/// Reads a table that may still be growing: the rows whole so far (a last
/// line without its newline is still being written, and is left for the next
/// read). No file yet is no rows yet.
pub fn read_csv_so_far<T: DeserializeOwned>(path: &Path) -> anyhow::Result<Vec<T>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    csv::Reader::from_reader(&bytes[..whole])
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
    serde_json::from_slice(&read_bytes(path)?)
        .with_context(|| format!("{} is not what it should be", path.display()))
}

/// Writes a file whole or not at all, creating its folder first: the bytes go
/// to `NAME.partial`, which is renamed to `NAME` once all of them are on
/// disk, so a run stopped by a full disk or a signal leaves no half file that
/// a reader would take for the whole.
pub fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| cannot("create", dir, e.into()))?;
    }
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let written = std::fs::write(&partial, bytes).and_then(|()| std::fs::rename(&partial, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(cannot("write", path, e.into()));
    }
    Ok(())
}

/// The error of a file that could not be written: which file, and, when the
/// disk is full, what to do about it (a bare "No space left on device" names
/// neither the file nor the way out).
pub fn cannot(doing: &str, path: &Path, error: anyhow::Error) -> anyhow::Error {
    let full = error.chain().any(|e| {
        e.downcast_ref::<std::io::Error>().is_some_and(|e| {
            matches!(
                e.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            )
        })
    });
    let what = format!("cannot {doing} {}", path.display());
    if full {
        error.context(format!(
            "{what}: the disk is full; free some space, or give --out a folder on \
             another disk, and run again"
        ))
    } else {
        error.context(what)
    }
}

/// A CSV writer's error, with the I/O error inside it as the cause, so that
/// [`cannot`] can tell a full disk.
fn csv_error(error: csv::Error) -> anyhow::Error {
    if error.is_io_error() {
        std::io::Error::from(error).into()
    } else {
        error.into()
    }
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
    fn a_growing_table_is_read_as_it_grows_and_ends_as_write_csv_would_write_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("growing.csv");
        let row = |index| Row {
            index,
            due: Duration::from_millis(index),
            ended: None,
            code: None,
        };
        let table = Growing::<Row>::create(&path).unwrap();
        assert!(read_csv_so_far::<Row>(&path).unwrap().is_empty());
        table.push(&row(0));
        std::thread::sleep(Growing::<Row>::FLUSH_EVERY);
        table.push(&row(1)); // a flush is due: both rows reach the file
        assert_eq!(read_csv_so_far::<Row>(&path).unwrap(), [row(0), row(1)]);
        // A row caught half written is left for the next read.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("2,2.0");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(read_csv_so_far::<Row>(&path).unwrap().len(), 2);
        let whole = dir.path().join("whole.csv");
        let table = Growing::<Row>::create(&whole).unwrap();
        table.push(&row(0));
        table.push(&row(1));
        table.finish().unwrap();
        let written = dir.path().join("written.csv");
        write_csv(&written, &[row(0), row(1)]).unwrap();
        assert_eq!(
            std::fs::read(&whole).unwrap(),
            std::fs::read(&written).unwrap()
        );
        assert!(
            read_csv_so_far::<Row>(&dir.path().join("none.csv"))
                .unwrap()
                .is_empty()
        );
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

    #[test]
    fn a_file_is_written_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deep").join("summary.json");
        write_json(&path, &vec![1, 2, 3]).unwrap();
        assert_eq!(read_json::<Vec<u32>>(&path).unwrap(), [1, 2, 3]);
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["summary.json"], "no .partial file is left behind");
        // A folder that cannot be made is named, and the old file stays.
        let blocked = dir.path().join("deep").join("summary.json").join("x.csv");
        let error = format!("{:#}", write(&blocked, b"x").unwrap_err());
        assert!(error.contains("summary.json"), "{error}");
        assert_eq!(read_json::<Vec<u32>>(&path).unwrap(), [1, 2, 3]);
    }

    #[test]
    fn a_full_disk_names_the_file_and_the_way_out() {
        // /dev/full fails every write with ENOSPC, as a full disk does.
        if !Path::new("/dev/full").exists() {
            return;
        }
        let table = Growing::<Row>::create(Path::new("/dev/full"));
        let error = match table {
            Ok(table) => {
                table.push(&Row {
                    index: 0,
                    due: Duration::ZERO,
                    ended: None,
                    code: None,
                });
                format!("{:#}", table.finish().unwrap_err())
            }
            Err(e) => format!("{e:#}"),
        };
        assert!(error.contains("/dev/full"), "{error}");
        assert!(
            error.contains("disk is full") && error.contains("--out"),
            "{error}"
        );
        // The same words for any write that meets a full disk.
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        let error = format!("{:#}", cannot("write", Path::new("a.csv"), full.into()));
        assert!(
            error.contains("a.csv") && error.contains("disk is full"),
            "{error}"
        );
        let other = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let error = format!("{:#}", cannot("write", Path::new("a.csv"), other.into()));
        assert!(!error.contains("disk is full"), "{error}");
    }
}
