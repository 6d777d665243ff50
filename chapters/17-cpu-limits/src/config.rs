//! The experiment's flags, its checked configuration, and its arms.

use std::{fmt, path::PathBuf, str::FromStr, time::Duration};

use anyhow::bail;
use harness::{experiment::Flags, records::ms};
use serde::{Deserialize, Serialize};

/// The server's runtime: the one thing that changes from arm to arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// `current_thread`: one thread does everything.
    CurrentThread,
    /// `multi_thread` with Tokio's default worker count: what
    /// `available_parallelism` says inside the pod.
    Auto,
    /// `multi_thread` with this many workers, whatever the quota.
    Workers(usize),
}

// ANCHOR: arm
/// `ct`, `auto`, `mt4`, ..., each optionally `+burst`: the pod may then
/// spend quota it saved in quiet periods (CFS burst).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arm {
    pub runtime: Runtime,
    pub burst: bool,
}

impl Arm {
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        match self.runtime {
            Runtime::CurrentThread => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
            Runtime::Auto => tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build(),
            Runtime::Workers(n) => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(n)
                .enable_all()
                .build(),
        }
    }
}
// ANCHOR_END: arm

impl FromStr for Arm {
    type Err = String;

    fn from_str(text: &str) -> Result<Arm, String> {
        let usage = || {
            format!(
                "`{text}` is not an arm; write `ct`, `auto` or `mtN` (N worker threads, 1 to 64), \
                 optionally followed by `+burst`, e.g. mt2+burst"
            )
        };
        let (runtime, burst) = match text.strip_suffix("+burst") {
            Some(runtime) => (runtime, true),
            None => (text, false),
        };
        let runtime = match runtime {
            "ct" => Runtime::CurrentThread,
            "auto" => Runtime::Auto,
            other => match other.strip_prefix("mt").and_then(|n| n.parse().ok()) {
                Some(n @ 1..=64) => Runtime::Workers(n),
                _ => return Err(usage()),
            },
        };
        Ok(Arm { runtime, burst })
    }
}

impl fmt::Display for Arm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.runtime {
            Runtime::CurrentThread => write!(f, "ct")?,
            Runtime::Auto => write!(f, "auto")?,
            Runtime::Workers(n) => write!(f, "mt{n}")?,
        }
        if self.burst {
            write!(f, "+burst")?;
        }
        Ok(())
    }
}

// On disk an arm is its name, as on the command line.
harness::text_serde!(Arm);

/// The machine's CPUs, as this process (outside any pod) sees them.
pub fn machine_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "cpu_limits",
    about = "Chapter 17: a server in a CPU quota, as Kubernetes runs a pod with `limits: cpu`: \
             what throttling does to p99 for each runtime, and what the runtime sees. \
             Needs root (it makes cgroups).",
    after_help = "Arms: ct (current_thread), auto (multi_thread, Tokio's default worker count), \
                  mtN (N workers), each optionally +burst (CFS burst, Linux 5.14+). The default \
                  arms are ct, auto, mtC and mtC+burst, C being this machine's CPUs."
)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub flags: Flags,
    /// The pod's CPU limit in CPUs, as Kubernetes' `limits: cpu` (1: 100 ms
    /// of CPU time in every 100 ms period, on any of the machine's cores)
    #[arg(long, default_value_t = 1.0)]
    pub cpus: f64,
    /// The CPU time each call's handler spends (on its own thread's clock,
    /// so a throttled handler still does exactly this much work)
    #[arg(long, default_value = "1ms", value_parser = program::duration::parse)]
    pub work: Duration,
    /// Offered loads, as fractions of the quota (comma-separated) [default:
    /// 0.5,0.8,0.95; quick: 0.9]
    #[arg(long, value_delimiter = ',')]
    pub loads: Option<Vec<f64>>,
    /// Calls that arrive together, per arrival (comma-separated): 1 is
    /// independent callers, 20 a page that fans out into 20 calls at once
    /// [default: 1,20; quick: 20]
    #[arg(long, value_delimiter = ',')]
    pub together: Option<Vec<usize>>,
    /// Arms, comma-separated [default: ct,auto,mtC,mtC+burst]
    #[arg(long, value_delimiter = ',')]
    pub arms: Option<Vec<Arm>>,
    /// How long each arm is measured at each load, after a second of warm-up
    /// [default: 8s; quick: 3s]
    #[arg(long, value_parser = program::duration::parse)]
    pub cell: Option<Duration>,
    /// Repeats: every arm at every load once per block, the arms' order
    /// rotated from block to block [default: 3; quick: 1]
    #[arg(long)]
    pub blocks: Option<usize>,
    /// Where the results go
    #[arg(long, default_value = "target/experiments/ch17")]
    pub out: PathBuf,
    /// Drive a server that runs elsewhere (`cpu_limits serve`, in a pod of a
    /// real cluster) instead of starting one in a pod here
    #[arg(long, value_name = "HOST:PORT", requires = "target_metrics")]
    pub target: Option<String>,
    /// With --target: where that server serves its metrics
    #[arg(long, value_name = "HOST:PORT", requires = "target")]
    pub target_metrics: Option<String>,
    /// Run as the server in a pod (the experiment starts this itself)
    #[arg(long, hide = true)]
    pub serve_child: bool,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum Command {
    /// The server alone, for a pod of a real cluster (deploy/k8s/): answers
    /// calls and serves its own cgroup's counts as metrics
    Serve(crate::remote::ServeArgs),
}

/// What one run measures, as stored in its `config.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub cpus: f64,
    pub work_us: u64,
    pub loads: Vec<f64>,
    /// Calls per arrival: each shape of arrivals is measured at every load.
    pub together: Vec<usize>,
    pub arms: Vec<Arm>,
    #[serde(rename = "cell_ms", with = "ms")]
    pub cell: Duration,
    #[serde(rename = "warmup_ms", with = "ms")]
    pub warmup: Duration,
    pub blocks: usize,
    /// Seeds the arrival times: every arm meets the same calls.
    pub seed: u64,
    pub machine_cpus: usize,
    pub quick: bool,
    pub out: PathBuf,
    /// The server's gRPC and metrics addresses, when it runs elsewhere; its
    /// runtime is then the one it reports, and `arms` is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<(String, String)>,
}

impl harness::Experiment for Config {
    fn out(&self) -> &std::path::Path {
        &self.out
    }
}

impl Args {
    pub fn config(&self) -> anyhow::Result<Config> {
        let quick = self.flags.quick;
        let machine_cpus = machine_cpus();
        let target = self.target.clone().zip(self.target_metrics.clone());
        if target.is_some() && self.arms.is_some() {
            bail!(
                "--arms is refused with --target: the server's runtime is chosen where it runs \
                 (`cpu_limits serve --arm ...`), and the run reads it from its metrics"
            );
        }
        let arms = self.arms.clone().unwrap_or_else(|| {
            if target.is_some() {
                return Vec::new();
            }
            let all = Runtime::Workers(machine_cpus);
            vec![
                Arm::from_str("ct").expect("an arm"),
                Arm::from_str("auto").expect("an arm"),
                Arm {
                    runtime: all,
                    burst: false,
                },
                Arm {
                    runtime: all,
                    burst: true,
                },
            ]
        });
        let loads = self.loads.clone().unwrap_or_else(|| match quick {
            true => vec![0.9],
            false => vec![0.5, 0.8, 0.95],
        });
        if let Some(bad) = loads
            .iter()
            .find(|l| !(l.is_finite() && **l > 0.0 && **l <= 2.0))
        {
            bail!("--loads {bad} is refused: a load is a fraction of the quota above 0, at most 2");
        }
        if !(self.cpus.is_finite() && self.cpus > 0.0) {
            bail!(
                "--cpus {} is refused: a CPU limit is a number of CPUs above 0",
                self.cpus
            );
        }
        if self.work < Duration::from_micros(10) || self.work > Duration::from_millis(100) {
            bail!(
                "--work {:?} is refused: from 10 µs to 100 ms, so that a call is mostly handler work \
                 and a period holds at least one call",
                self.work
            );
        }
        let together = self.together.clone().unwrap_or_else(|| match quick {
            true => vec![20],
            false => vec![1, 20],
        });
        if let Some(bad) = together.iter().find(|n| !(1..=1000).contains(*n)) {
            bail!("--together {bad} is refused: from 1 to 1000 calls per arrival");
        }
        let blocks = self.blocks.unwrap_or(if quick { 1 } else { 3 });
        if blocks == 0 {
            bail!("--blocks 0 is refused: a run needs at least one block");
        }
        let cell = self
            .cell
            .unwrap_or(Duration::from_secs(if quick { 3 } else { 8 }));
        if cell < Duration::from_secs(1) {
            bail!("--cell {cell:?} is refused: at least 1s, ten periods");
        }
        Ok(Config {
            cpus: self.cpus,
            work_us: self.work.as_micros() as u64,
            loads,
            together,
            arms,
            cell,
            warmup: Duration::from_secs(1),
            blocks,
            seed: 17,
            machine_cpus,
            quick,
            out: self.out.clone(),
            target,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arms_print_as_they_parse() {
        for text in [
            "ct",
            "auto",
            "mt1",
            "mt8",
            "mt2+burst",
            "ct+burst",
            "auto+burst",
        ] {
            assert_eq!(text.parse::<Arm>().unwrap().to_string(), text);
        }
    }

    fn refusal(args: &[&str]) -> String {
        let args =
            <Args as clap::Parser>::try_parse_from(["cpu_limits"].iter().chain(args).copied())
                .unwrap();
        args.config().unwrap_err().to_string()
    }

    #[test]
    fn flags_out_of_range_are_refused_by_name() {
        assert!(refusal(&["--loads", "0.5,0"]).contains("--loads 0"));
        assert!(refusal(&["--loads", "3"]).contains("at most 2"));
        assert!(refusal(&["--cpus", "0"]).contains("--cpus 0"));
        assert!(refusal(&["--work", "0.005ms"]).contains("--work"));
        assert!(refusal(&["--blocks", "0"]).contains("--blocks 0"));
        assert!(refusal(&["--together", "1,0"]).contains("--together 0"));
        assert!(refusal(&["--cell", "500ms"]).contains("--cell"));
        let both = ["--target", "a:1", "--target-metrics", "a:2", "--arms", "ct"];
        assert!(refusal(&both).contains("--arms is refused with --target"));
    }

    #[test]
    fn the_default_arms_span_the_machine() {
        let args = <Args as clap::Parser>::try_parse_from(["cpu_limits", "--quick"]).unwrap();
        let config = args.config().unwrap();
        let names: Vec<String> = config.arms.iter().map(Arm::to_string).collect();
        let all = machine_cpus();
        assert_eq!(
            names,
            [
                "ct".to_string(),
                "auto".into(),
                format!("mt{all}"),
                format!("mt{all}+burst")
            ]
        );
        assert_eq!(config.loads, [0.9]);
        assert_eq!(config.together, [20]);
        assert_eq!(config.blocks, 1);
    }

    #[test]
    fn bad_arms_say_what_is_expected() {
        for bad in ["", "mt", "mt0", "mt65", "ct-inline", "mt2+bursty", "+burst"] {
            let e = bad.parse::<Arm>().unwrap_err();
            assert!(e.contains("mt2+burst"), "{bad}: {e}");
        }
    }
}
