//! Where the server and the generator run: the server pinned to CPU 0 with
//! `taskset`, the generator (this process) to CPU 1, or, where that is not
//! possible, both sharing every CPU, said so in the results.

use std::{
    path::Path,
    process::{Command, Stdio},
};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

/// How the server process was placed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// `taskset -c 0` was used for the server, and the experiment moved itself to CPU 1.
    pub pinned: bool,
    pub note: String,
}

/// Pins the calling process (call it before any other thread exists, so that
/// every thread started later inherits it) to `cpu` with `taskset`.
pub fn pin_self(cpu: usize) -> anyhow::Result<()> {
    let status = Command::new("taskset")
        .args(["-pc", &cpu.to_string(), &std::process::id().to_string()])
        .stdout(Stdio::null())
        .status()
        .context("cannot run taskset")?;
    if !status.success() {
        bail!("taskset -pc {cpu} failed: {status}");
    }
    Ok(())
}

/// Whether `taskset` can be found on PATH.
pub fn have(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| Path::new(&dir).join(program).is_file())
    })
}

// ANCHOR: placement
/// Pins this process to CPU 1, if it should and can, and says where the
/// server will run. Called before the run starts any thread (the generator's
/// runtime is current-thread), so every thread started later inherits it.
pub fn place(pin: bool) -> anyhow::Result<Placement> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(if !pin {
        Placement {
            pinned: false,
            note: "not pinned (--no-pin): server and generator share every CPU".into(),
        }
    } else if cpus < 2 {
        Placement {
            pinned: false,
            note: format!(
                "not pinned: only {cpus} CPU available, so server and generator share it"
            ),
        }
    } else if !have("taskset") {
        Placement {
            pinned: false,
            note: "not pinned: taskset not found (Debian: util-linux); server and generator share every CPU".into(),
        }
    } else {
        pin_self(1)?;
        Placement {
            pinned: true,
            note: "server on CPU 0, generator on CPU 1 (taskset)".into(),
        }
    })
}
// ANCHOR_END: placement
