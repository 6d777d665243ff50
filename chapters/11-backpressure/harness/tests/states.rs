//! How a run's folder records its end: finished or failed (with the error),
//! and only a finished run renders again. (Ctrl-C is tests/interrupt.rs, a
//! process of its own, so that its signal reaches no run of these tests.)
//! And what a finished run keeps: run -> raw records -> reduce -> tables ->
//! render; the raw records compressed (in the folder, or in `--raw-out`),
//! `--render` drawing from the tables alone, `--render --from-raw` rebuilding
//! the tables from the compressed records.

use std::path::{Path, PathBuf};

use harness::{
    Experiment, Folder, Start, State,
    experiment::{self, Flags, Steps},
};
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Config {
    out: PathBuf,
}

impl Experiment for Config {
    fn out(&self) -> &Path {
        &self.out
    }
}

fn render(_: &Config, _: &Folder) -> anyhow::Result<String> {
    Ok("the report\n".into())
}

#[tokio::test]
async fn a_finished_run_renders_again_and_a_failed_one_keeps_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let steps = Steps {
        run: async |_: &Config, _: &Folder| Err(anyhow::anyhow!("the server never answered")),
        reduce: experiment::nothing_to_reduce,
        render,
        raw: &[],
    };
    let config = Config { out: out.clone() };
    let error = experiment::main(&Flags::default(), || Ok(config), Start::Fresh, steps)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("never answered"));
    let progress = Folder::open(&out).unwrap().progress().unwrap();
    assert_eq!(progress.state, State::Failed);
    assert_eq!(progress.error.as_deref(), Some("the server never answered"));

    let steps = Steps {
        run: async |_: &Config, _: &Folder| Ok(()),
        reduce: experiment::nothing_to_reduce,
        render,
        raw: &[],
    };
    let config = Config { out: out.clone() };
    experiment::main(&Flags::default(), || Ok(config), Start::Fresh, steps)
        .await
        .unwrap();
    let folder = Folder::open(&out).unwrap();
    assert_eq!(folder.progress().unwrap().state, State::Finished);
    let flags = Flags {
        render: Some(out),
        ..Flags::default()
    };
    let steps = Steps {
        run: async |_: &Config, _: &Folder| Ok(()),
        reduce: experiment::nothing_to_reduce,
        render,
        raw: &[],
    };
    experiment::main(
        &flags,
        || -> anyhow::Result<Config> { unreachable!("--render reads the stored config") },
        Start::Fresh,
        steps,
    )
    .await
    .unwrap();
}

/// A call's raw record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Call {
    index: u64,
    latency_ms: f64,
}

/// The reduced table: one row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Total {
    calls: usize,
    sum_ms: f64,
}

fn calls() -> Vec<Call> {
    (0..5000)
        .map(|index| Call {
            index,
            latency_ms: 10.0 + (index % 7) as f64 / 3.0,
        })
        .collect()
}

fn reduce_calls(_: &Config, raw: &Folder, out: &Folder) -> anyhow::Result<()> {
    let calls: Vec<Call> = raw.read_csv("raw/calls.csv")?;
    let total = Total {
        calls: calls.len(),
        sum_ms: calls.iter().map(|c| c.latency_ms).sum(),
    };
    out.write_csv("total.csv", &[total])
}

fn render_total(_: &Config, folder: &Folder) -> anyhow::Result<String> {
    let total: Vec<Total> = folder.read_csv("total.csv")?;
    let report = format!(
        "{} calls, {:.3} ms in all\n",
        total[0].calls, total[0].sum_ms
    );
    folder.write_text("report.md", &report)?;
    Ok(report)
}

fn steps() -> Steps<Config, impl AsyncFnOnce(&Config, &Folder) -> anyhow::Result<()>> {
    Steps {
        run: async |_: &Config, folder: &Folder| folder.write_csv("raw/calls.csv", &calls()),
        reduce: reduce_calls,
        render: render_total,
        raw: &["raw/"],
    }
}

async fn render_again(dir: &Path, from_raw: Option<Option<PathBuf>>) -> anyhow::Result<()> {
    let flags = Flags {
        render: Some(dir.to_path_buf()),
        from_raw,
        ..Flags::default()
    };
    experiment::main(
        &flags,
        || -> anyhow::Result<Config> { unreachable!("--render reads the stored config") },
        Start::Fresh,
        steps(),
    )
    .await
}

#[tokio::test]
async fn a_run_keeps_its_raw_records_compressed_and_renders_from_its_tables() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let config = Config { out: out.clone() };
    experiment::main(&Flags::default(), || Ok(config), Start::Fresh, steps())
        .await
        .unwrap();

    // The raw records were compressed in place, and read back as written.
    assert!(!out.join("raw/calls.csv").exists());
    let packed = out.join("raw/calls.csv.zst");
    let plain_size = {
        let probe = dir.path().join("probe.csv");
        harness::records::write_csv(&probe, &calls()).unwrap();
        std::fs::metadata(&probe).unwrap().len()
    };
    assert!(std::fs::metadata(&packed).unwrap().len() < plain_size / 3);
    let folder = Folder::open(&out).unwrap();
    assert_eq!(folder.read_csv::<Call>("raw/calls.csv").unwrap(), calls());
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert_eq!(report, "5000 calls, 54998.333 ms in all\n");

    // --render draws from the table alone: without it, it fails, naming it.
    std::fs::rename(out.join("total.csv"), dir.path().join("total.csv")).unwrap();
    let error = render_again(&out, None).await.unwrap_err();
    assert!(format!("{error:#}").contains("total.csv"), "{error:#}");
    // --from-raw rebuilds it from the compressed records.
    std::fs::remove_file(out.join("report.md")).unwrap();
    render_again(&out, Some(None)).await.unwrap();
    assert_eq!(
        std::fs::read(out.join("total.csv")).unwrap(),
        std::fs::read(dir.path().join("total.csv")).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(out.join("report.md")).unwrap(),
        report
    );
}

#[tokio::test]
async fn raw_out_moves_the_raw_records_into_a_run_folder_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let (out, raw) = (dir.path().join("run"), dir.path().join("raw-records"));
    let flags = Flags {
        raw_out: Some(raw.clone()),
        ..Flags::default()
    };
    let config = Config { out: out.clone() };
    experiment::main(&flags, || Ok(config), Start::Fresh, steps())
        .await
        .unwrap();
    // The results folder keeps no raw record, and not the emptied raw/.
    assert!(!out.join("raw").exists());
    assert!(out.join("total.csv").is_file() && out.join("report.md").is_file());
    let raw_folder = Folder::open(&raw).unwrap();
    assert_eq!(raw_folder.progress().unwrap().state, State::Finished);
    assert_eq!(
        raw_folder.read_csv::<Call>("raw/calls.csv").unwrap(),
        calls()
    );
    std::fs::remove_file(out.join("total.csv")).unwrap();
    render_again(&out, Some(Some(raw.clone()))).await.unwrap();
    assert!(out.join("total.csv").is_file());

    // A --raw-out that holds someone's files is refused before the run,
    // by its own flag's name, and nothing in it is touched.
    let theirs = dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(theirs.join("notes.txt"), "keep me").unwrap();
    let flags = Flags {
        raw_out: Some(theirs.clone()),
        ..Flags::default()
    };
    let config = Config {
        out: dir.path().join("second"),
    };
    let error = experiment::main(&flags, || Ok(config), Start::Fresh, steps())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("--raw-out") && error.contains("no run wrote"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(theirs.join("notes.txt")).unwrap(),
        "keep me"
    );

    // So is one inside the results folder, which the run would empty.
    let flags = Flags {
        raw_out: Some(out.join("raw")),
        ..Flags::default()
    };
    let config = Config { out: out.clone() };
    let error = experiment::main(&flags, || Ok(config), Start::Fresh, steps())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("one inside the other"), "{error}");
    assert!(
        out.join("report.md").is_file(),
        "the earlier run is still there"
    );
}
