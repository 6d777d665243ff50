//! Ctrl-C during a run, in a process of its own (this test binary): the run
//! stops at once with status 130, its folder says it was interrupted, and
//! `--render` on that folder says so instead of failing on a missing record.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use harness::{
    Experiment, Folder, Start, State,
    experiment::{self, Flags, Steps},
};
use rustix::process::{Signal, getpid, kill_process};
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
async fn ctrl_c_stops_a_run_and_its_folder_says_so() {
    // Heard from here on: a SIGINT to this process can no longer end it.
    let mut heard = program::stop_signals();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (started, running) = tokio::sync::oneshot::channel();
    let config = Config { out: out.clone() };
    let run = tokio::spawn(async move {
        let steps = Steps {
            run: async move |_: &Config, folder: &Folder| {
                folder.write_text("half.csv", "index\n0\n")?;
                let _ = started.send(());
                // A run that would go on for ever, as a long one seems to.
                std::future::pending::<()>().await;
                Ok(())
            },
            reduce: experiment::nothing_to_reduce,
            render,
            raw: &[],
        };
        experiment::main(&Flags::default(), || Ok(config), Start::Fresh, steps).await
    });
    running.await.unwrap();
    kill_process(getpid(), Signal::INT).unwrap();
    let error = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the run stops once interrupted")
        .unwrap()
        .unwrap_err();
    let exit = error.downcast_ref::<program::Exit>().unwrap();
    assert_eq!(exit.status, 130);
    assert!(exit.message.contains("interrupted"), "{}", exit.message);
    assert!(exit.message.contains("run it again"), "{}", exit.message);
    assert_eq!(heard.recv().await, Some(program::StopSignal::Interrupt));

    let folder = Folder::open(&out).unwrap();
    assert_eq!(folder.progress().unwrap().state, State::Interrupted);
    assert!(
        folder.join("half.csv").exists(),
        "what the run wrote is kept"
    );

    let flags = Flags {
        render: Some(out.clone()),
        ..Flags::default()
    };
    let steps = Steps {
        run: async |_: &Config, _: &Folder| Ok(()),
        reduce: experiment::nothing_to_reduce,
        render,
        raw: &[],
    };
    let error = experiment::main(
        &flags,
        || -> anyhow::Result<Config> { unreachable!("--render reads the stored config") },
        Start::Fresh,
        steps,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains("did not finish"), "{error}");
    assert!(error.contains("was interrupted"), "{error}");
}
