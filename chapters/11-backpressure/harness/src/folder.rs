//! The results folder: where one run of an experiment leaves everything, with
//! a `meta.json` saying where and how it ran.

use std::{
    path::{Path, PathBuf},
    time::{SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, bail};
use program::proc::Machine;
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::records;

/// The file that marks a folder as a run's results.
pub const META: &str = "meta.json";

/// The program, its arguments, its build, and the machine it ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    pub program: String,
    pub args: Vec<String>,
    pub version: String,
    /// `debug` or `release`: timings differ several-fold between them.
    pub build: String,
    pub started_unix_s: u64,
    pub machine: Machine,
    /// The machine's 1-minute load average as the run started. On a machine
    /// of two cores, anything much above 0 is other work sharing them.
    pub loadavg_1m: Option<f64>,
}

impl RunMeta {
    /// Describes the running process, now.
    pub fn now() -> RunMeta {
        let mut args = std::env::args();
        RunMeta {
            program: args.next().unwrap_or_default(),
            args: args.collect(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            build: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
            .to_string(),
            started_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            machine: Machine::this(),
            loadavg_1m: program::proc::loadavg_1m(),
        }
    }
}

/// A run's folder.
#[derive(Debug, Clone)]
pub struct Folder {
    dir: PathBuf,
}

impl Folder {
    /// A fresh folder for a new run, with this process's `meta.json`. A folder
    /// already at `dir` is emptied if it holds an earlier run (it has a
    /// `meta.json`) or sits under a `target/` folder; anything else is refused,
    /// so that a mistyped `--out` never deletes someone's files.
    pub fn create(dir: &Path) -> anyhow::Result<Folder> {
        if dir.exists() {
            let ours = dir.join(META).exists()
                || dir.components().any(|c| c.as_os_str() == "target")
                || std::fs::read_dir(dir)?.next().is_none();
            if !ours {
                bail!(
                    "{} holds files that are not an earlier run's; give --out an empty or new folder",
                    dir.display()
                );
            }
            std::fs::remove_dir_all(dir)
                .with_context(|| format!("cannot empty {}", dir.display()))?;
        }
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let folder = Folder {
            dir: dir.to_path_buf(),
        };
        folder.write_json(META, &RunMeta::now())?;
        Ok(folder)
    }

    /// The folder of an earlier run, as it is (to render it, or to continue it).
    pub fn open(dir: &Path) -> anyhow::Result<Folder> {
        if !dir.join(META).is_file() {
            bail!(
                "{} is not a finished run's folder (it has no {META})",
                dir.display()
            );
        }
        Ok(Folder {
            dir: dir.to_path_buf(),
        })
    }

    /// A folder inside this one, for one arm or one attempt: created, and
    /// emptied if an earlier attempt left something there.
    pub fn sub(&self, name: &str) -> anyhow::Result<Folder> {
        let dir = self.dir.join(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("cannot empty {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Folder { dir })
    }

    /// A folder inside this one that an earlier run wrote, as it is.
    pub fn existing(&self, name: &str) -> anyhow::Result<Folder> {
        let dir = self.dir.join(name);
        if !dir.is_dir() {
            bail!("{} is missing", dir.display());
        }
        Ok(Folder { dir })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.dir.join(name)
    }

    pub fn meta(&self) -> anyhow::Result<RunMeta> {
        self.read_json(META)
    }

    pub fn write_json(&self, name: &str, value: &impl Serialize) -> anyhow::Result<()> {
        records::write_json(&self.join(name), value)
    }

    pub fn read_json<T: DeserializeOwned>(&self, name: &str) -> anyhow::Result<T> {
        records::read_json(&self.join(name))
    }

    pub fn write_csv<T: Serialize + DeserializeOwned>(
        &self,
        name: &str,
        rows: &[T],
    ) -> anyhow::Result<()> {
        records::write_csv(&self.join(name), rows)
    }

    pub fn read_csv<T: DeserializeOwned>(&self, name: &str) -> anyhow::Result<Vec<T>> {
        records::read_csv(&self.join(name))
    }

    pub fn write_text(&self, name: &str, text: &str) -> anyhow::Result<()> {
        records::write(&self.join(name), text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_run_replaces_an_old_one_but_never_a_stranger() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let folder = Folder::create(&out).unwrap();
        folder.write_text("old.csv", "x\n").unwrap();
        assert_eq!(
            folder.meta().unwrap().build,
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
        );
        // An earlier run (it has meta.json) is emptied.
        let again = Folder::create(&out).unwrap();
        assert!(!again.join("old.csv").exists());
        assert!(again.join(META).exists());
        // A folder of someone else's files is not touched.
        let other = dir.path().join("photos");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("cat.jpg"), "meow").unwrap();
        let error = Folder::create(&other).unwrap_err().to_string();
        assert!(error.contains("not an earlier run"), "{error}");
        assert!(other.join("cat.jpg").exists());
        assert!(Folder::open(&other).is_err());
        assert!(Folder::open(&out).is_ok());
    }
}
