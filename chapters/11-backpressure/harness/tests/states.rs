//! How a run's folder records its end: finished or failed (with the error),
//! and only a finished run renders again. (Ctrl-C is tests/interrupt.rs, a
//! process of its own, so that its signal reaches no run of these tests.)

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
