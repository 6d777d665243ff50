//! The results folder: where one run of an experiment leaves everything, with
//! a `meta.json` saying where and how it ran.

use std::{
    path::{Component, Path, PathBuf},
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
            started_unix_s: unix_now(),
            machine: Machine::this(),
            loadavg_1m: program::proc::loadavg_1m(),
        }
    }
}

/// How far a run got: `meta.json` says it beside the run's description, so a
/// folder left by a Ctrl-C or a crash never passes for a finished run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Started and not ended: still going, or killed before it could say so.
    Running,
    Finished,
    /// Stopped by Ctrl-C or SIGTERM.
    Interrupted,
    /// Stopped by an error, which `meta.json` keeps.
    Failed,
}

/// The part of `meta.json` that changes as the run goes on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Runs recorded before states were kept have none; all of them finished.
    #[serde(default = "finished")]
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_unix_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn finished() -> State {
    State::Finished
}

/// All of `meta.json`: what ran, and how far it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Meta {
    #[serde(flatten)]
    run: RunMeta,
    #[serde(flatten)]
    progress: Progress,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A run's folder.
#[derive(Debug, Clone)]
pub struct Folder {
    dir: PathBuf,
}

impl Folder {
    /// A fresh folder for a new run, with this process's `meta.json` saying it
    /// is running. `dir` is typed by a reader (`--out`), so it is emptied only
    /// when that cannot lose anything: it is empty, or it holds an earlier run
    /// (its `meta.json` reads as one). Everything else is refused before a
    /// file is touched: a path with `..`, a symbolic link, a file, a folder of
    /// other files.
    pub fn create(dir: &Path) -> anyhow::Result<Folder> {
        Folder::create_for("--out", dir)
    }

    /// [`Folder::create`] for a folder typed after another flag (`--raw-out`),
    /// which the messages name.
    pub fn create_for(flag: &str, dir: &Path) -> anyhow::Result<Folder> {
        if dir.components().any(|c| c == Component::ParentDir) {
            // What the path names, for the message: by the file system where
            // it exists, else by dropping each `..` with the name before it.
            let resolved = dir.canonicalize().unwrap_or_else(|_| {
                let mut path = PathBuf::new();
                for c in dir.components() {
                    match c {
                        Component::ParentDir if path.file_name().is_some() => {
                            path.pop();
                        }
                        c => path.push(c),
                    }
                }
                path
            });
            bail!(
                "{flag} {}: a path with `..` is refused, so that a slip of the keyboard \
                 cannot name a folder above the one meant; write it without `..` \
                 (here: {})",
                dir.display(),
                resolved.display()
            );
        }
        match std::fs::symlink_metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(e).with_context(|| format!("cannot look at {flag} {}", dir.display()));
            }
            Ok(m) if m.file_type().is_symlink() => bail!(
                "{flag} {} is a symbolic link{}; a run's folder is emptied before it starts, \
                 so give {flag} the folder itself, or a new one",
                dir.display(),
                std::fs::read_link(dir).map_or(String::new(), |to| format!(" to {}", to.display()))
            ),
            Ok(m) if !m.is_dir() => bail!(
                "{flag} {} is a file, not a folder; give {flag} a new folder, \
                 an empty one or an earlier run's",
                dir.display()
            ),
            Ok(_) => empty_earlier_run(flag, dir)?,
        }
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create {flag} {}", dir.display()))?;
        let folder = Folder {
            dir: dir.to_path_buf(),
        };
        folder.write_meta(&Meta {
            run: RunMeta::now(),
            progress: Progress {
                state: State::Running,
                ended_unix_s: None,
                error: None,
            },
        })?;
        Ok(folder)
    }

    /// The folder of an earlier run, as it is (to render it, or to continue it).
    pub fn open(dir: &Path) -> anyhow::Result<Folder> {
        if !dir.join(META).is_file() {
            bail!(
                "{} is not a run's folder (it has no {META}); give the folder a run printed \
                 at its end (\"results in ...\")",
                dir.display()
            );
        }
        Ok(Folder {
            dir: dir.to_path_buf(),
        })
    }

    /// How far the run in this folder got.
    pub fn progress(&self) -> anyhow::Result<Progress> {
        self.read_json(META)
    }

    /// Records how the run ended (or that it runs again, when resumed).
    pub fn set_state(&self, state: State, error: Option<String>) -> anyhow::Result<()> {
        let mut meta: Meta = self.read_json(META)?;
        meta.progress = Progress {
            state,
            ended_unix_s: (state != State::Running).then(unix_now),
            error,
        };
        self.write_meta(&meta)
    }

    /// Fails, saying what happened to the run and what would finish it, unless
    /// the run in this folder finished. `resume` is the flag that continues an
    /// unfinished run, for the experiments that have one.
    pub fn check_finished(&self, resume: Option<&str>) -> anyhow::Result<()> {
        let Progress {
            state,
            ended_unix_s,
            error,
        } = self.progress()?;
        let run = self.meta()?;
        let how = match state {
            State::Finished => return Ok(()),
            State::Running => format!(
                "is marked running, last written {}: it was killed, or is still going",
                ago(last_written(&self.dir))
            ),
            State::Interrupted => format!("was interrupted {}", ago(ended_unix_s)),
            State::Failed => format!(
                "failed {}: {}",
                ago(ended_unix_s),
                error.as_deref().unwrap_or("(no reason kept)")
            ),
        };
        let command = std::iter::once(run.program.as_str())
            .chain(run.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        let next = match resume {
            Some(flag) => format!("continue it with the same flags and {flag}"),
            None => "run it again".to_string(),
        };
        bail!(
            "{} holds a run that did not finish, so its records are incomplete and there is \
             nothing to render. The run (`{command}`, started {}) {how}. To render it, {next}.",
            self.dir.display(),
            ago(Some(run.started_unix_s)),
        )
    }

    fn write_meta(&self, meta: &Meta) -> anyhow::Result<()> {
        self.write_json(META, meta)
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

    /// Moves the raw records, the files whose path in this folder starts
    /// with one of `raw`, into `to` (this folder itself, or another run
    /// folder), compressed as `NAME.zst` under the same path: what the report
    /// is drawn from stays readable, and a run of 60 MB of rows keeps about a
    /// sixth of it. [`records::read_csv`] reads them back as they were.
    pub fn pack(&self, raw: &[&str], to: &Folder) -> anyhow::Result<Packed> {
        let mut packed = Packed {
            files: 0,
            bytes: 0,
            compressed: 0,
        };
        if raw.is_empty() {
            return Ok(packed);
        }
        for name in self.files()? {
            let inside = name.to_string_lossy();
            let packed_already = inside.ends_with(".zst");
            if packed_already || !raw.iter().any(|prefix| inside.starts_with(prefix)) {
                continue;
            }
            let (from, into) = (self.join(&name), records::compressed(&to.join(&name)));
            let bytes =
                std::fs::read(&from).map_err(|e| records::cannot("read", &from, e.into()))?;
            let small = zstd::encode_all(bytes.as_slice(), PACK_LEVEL)
                .map_err(|e| records::cannot("compress", &from, e.into()))?;
            records::write(&into, &small)?;
            std::fs::remove_file(&from).map_err(|e| records::cannot("remove", &from, e.into()))?;
            packed.files += 1;
            packed.bytes += bytes.len() as u64;
            packed.compressed += small.len() as u64;
        }
        // The folders the raw records leave empty go with them.
        let mut folders: Vec<PathBuf> = self.folders()?;
        folders.sort_by_key(|f| std::cmp::Reverse(f.components().count()));
        for folder in folders {
            let _ = std::fs::remove_dir(self.join(folder)); // fails, as meant, unless empty
        }
        Ok(packed)
    }

    /// Every file below this folder, as a path inside it, in a stable order.
    fn files(&self) -> anyhow::Result<Vec<PathBuf>> {
        Ok(self
            .walk()?
            .into_iter()
            .filter(|(_, dir)| !dir)
            .map(|(p, _)| p)
            .collect())
    }

    fn folders(&self) -> anyhow::Result<Vec<PathBuf>> {
        Ok(self
            .walk()?
            .into_iter()
            .filter(|(_, dir)| *dir)
            .map(|(p, _)| p)
            .collect())
    }

    /// Every entry below this folder: its path inside it, and whether it is a folder.
    fn walk(&self) -> anyhow::Result<Vec<(PathBuf, bool)>> {
        let mut found = Vec::new();
        let mut pending = vec![PathBuf::new()];
        while let Some(inside) = pending.pop() {
            let dir = self.dir.join(&inside);
            for entry in
                std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))?
            {
                let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
                let name = inside.join(entry.file_name());
                let is_dir = entry.file_type()?.is_dir();
                if is_dir {
                    pending.push(name.clone());
                }
                found.push((name, is_dir));
            }
        }
        found.sort();
        Ok(found)
    }
}

/// zstd's level for raw records: slow to write (about 45 s for chapter 13's
/// 58 MB of rows, once per run) and a third smaller than zstd's default.
const PACK_LEVEL: i32 = 19;

/// What [`Folder::pack`] did, for the line the run prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packed {
    pub files: usize,
    pub bytes: u64,
    pub compressed: u64,
}

/// Makes way for a new run in `dir`, an existing folder, if that loses
/// nothing: an empty folder stays as it is, an earlier run (its `meta.json`
/// reads as one) is deleted, and anything else is refused.
fn empty_earlier_run(flag: &str, dir: &Path) -> anyhow::Result<()> {
    let mut entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {flag} {}", dir.display()))?;
    if entries.next().is_none() {
        return Ok(());
    }
    if records::read_json::<Meta>(&dir.join(META)).is_err() {
        bail!(
            "{flag} {} holds files that no run wrote (it has no {META} of a run), \
             and a new run would delete them, so nothing was touched; \
             give {flag} a new or empty folder, or an earlier run's",
            dir.display()
        );
    }
    std::fs::remove_dir_all(dir)
        .with_context(|| format!("cannot delete the earlier run in {}", dir.display()))
}

/// When a file in `dir` (or below it) was last written, in Unix seconds.
fn last_written(dir: &Path) -> Option<u64> {
    let mut newest = None;
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                folders.push(entry.path());
            } else if let Ok(at) = meta.modified() {
                let s = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
                newest = newest.max(Some(s));
            }
        }
    }
    newest
}

/// "12 min ago", for a message a reader reads now.
fn ago(unix_s: Option<u64>) -> String {
    let Some(then) = unix_s else {
        return "at a time not recorded".to_string();
    };
    let s = unix_now().saturating_sub(then);
    match s {
        0..120 => format!("{s} s ago"),
        120..7200 => format!("{} min ago", s / 60),
        7200..172_800 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stranger(dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let file = dir.join("thesis.tex");
        std::fs::write(&file, "years of work").unwrap();
        file
    }

    fn refused(out: &Path) -> String {
        format!("{:#}", Folder::create(out).unwrap_err())
    }

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
        // So is an empty folder taken as it is.
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        Folder::create(&empty).unwrap();
        // A folder of someone else's files is not touched.
        let other = dir.path().join("photos");
        let file = stranger(&other);
        let error = refused(&other);
        assert!(
            error.contains("no run wrote") && error.contains("--out"),
            "{error}"
        );
        assert!(file.exists());
        assert!(Folder::open(&other).is_err());
        assert!(Folder::open(&out).is_ok());
    }

    #[test]
    fn a_folder_named_target_is_not_special() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        let file = stranger(&target);
        let error = refused(&target);
        assert!(error.contains("no run wrote"), "{error}");
        assert!(file.exists());
        // Nor is one below it that a run did not write.
        let below = target.join("experiments");
        let file = stranger(&below);
        refused(&below);
        assert!(file.exists());
    }

    #[test]
    fn a_path_that_climbs_is_refused_before_anything_is_touched() {
        let dir = tempfile::tempdir().unwrap();
        let file = stranger(dir.path());
        std::fs::create_dir(dir.path().join("target")).unwrap();
        // `DIR/target/..` is DIR itself, which holds the reader's files.
        let climbing = dir.path().join("target").join("..");
        let error = refused(&climbing);
        assert!(error.contains("`..`"), "{error}");
        // The message names the folder it resolves to.
        let resolved = dir.path().canonicalize().unwrap();
        assert!(error.contains(&resolved.display().to_string()), "{error}");
        assert!(file.exists());
        assert!(dir.path().join("target").is_dir());
        // A path that does not exist is resolved by its names.
        let error = refused(&dir.path().join("not-yet").join(".."));
        assert!(
            error.contains(&format!("(here: {})", dir.path().display())),
            "{error}"
        );
        // Even when the folder it names is an earlier run.
        let run = dir.path().join("run");
        Folder::create(&run).unwrap();
        refused(&run.join("sub").join(".."));
        assert!(run.join(META).exists());
    }

    #[test]
    fn a_symbolic_link_is_refused_and_what_it_points_to_kept() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        let file = stranger(&elsewhere);
        let link = dir.path().join("results");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        let error = refused(&link);
        assert!(error.contains("symbolic link"), "{error}");
        assert!(error.contains(&elsewhere.display().to_string()), "{error}");
        assert!(file.exists());
        assert!(link.is_symlink());
        // A link to an earlier run is refused too: the run is kept.
        let run = dir.path().join("run");
        Folder::create(&run).unwrap();
        let to_run = dir.path().join("latest");
        std::os::unix::fs::symlink(&run, &to_run).unwrap();
        refused(&to_run);
        assert!(run.join(META).exists());
    }

    #[test]
    fn a_file_is_not_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("notes.txt");
        std::fs::write(&file, "mine").unwrap();
        let error = refused(&file);
        assert!(
            error.contains("is a file") && error.contains("--out"),
            "{error}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
        // A path through a file cannot be created either, and says which.
        let error = refused(&file.join("run"));
        assert!(error.contains("notes.txt"), "{error}");
    }

    #[test]
    fn a_run_says_how_far_it_got_and_only_a_finished_one_renders() {
        let dir = tempfile::tempdir().unwrap();
        let folder = Folder::create(&dir.path().join("run")).unwrap();
        assert_eq!(folder.progress().unwrap().state, State::Running);
        let error = format!("{:#}", folder.check_finished(None).unwrap_err());
        assert!(error.contains("marked running"), "{error}");
        folder.set_state(State::Interrupted, None).unwrap();
        let error = format!("{:#}", folder.check_finished(Some("--resume")).unwrap_err());
        assert!(error.contains("interrupted"), "{error}");
        assert!(error.contains("--resume"), "{error}");
        // The message names the command that made the run.
        let program = folder.meta().unwrap().program;
        assert!(error.contains(&program), "{error}");
        folder
            .set_state(State::Failed, Some("cannot reach the server".into()))
            .unwrap();
        let error = format!("{:#}", folder.check_finished(None).unwrap_err());
        assert!(error.contains("cannot reach the server"), "{error}");
        assert!(error.contains("run it again"), "{error}");
        folder.set_state(State::Finished, None).unwrap();
        folder.check_finished(None).unwrap();
        assert!(folder.progress().unwrap().ended_unix_s.is_some());
        // A run recorded before states were kept has none, and finished.
        let mut old: serde_json::Value = folder.read_json(META).unwrap();
        old.as_object_mut().unwrap().remove("state");
        folder.write_json(META, &old).unwrap();
        assert_eq!(folder.progress().unwrap().state, State::Finished);
        assert_eq!(folder.meta().unwrap().program, program);
    }
}
