//! An arm of the experiment: which runtime the server runs on, and whether
//! each unit of handler work runs inline or in a task spawned for it.

use std::{fmt, str::FromStr};

use serde::Serialize;

/// The Tokio runtime the server runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Flavour {
    /// One thread does everything: accept, HTTP/2, handlers, timers.
    CurrentThread,
    /// A work-stealing pool of this many worker threads.
    MultiThread(usize),
}

/// Where the handler's work runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Handler {
    /// In the task that received the call (hyper's task for the HTTP/2 stream).
    Inline,
    /// In a task spawned for each unary call or each streamed message, which
    /// the receiving task then awaits: one extra hand-off, like an executor hop.
    Spawn,
}

// ANCHOR: arm
/// `ct-inline`, `ct-spawn`, `mt2-inline`, `mt1-spawn`, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arm {
    pub flavour: Flavour,
    pub handler: Handler,
}

/// Names the server's runtime worker threads, so that they can be counted
/// from outside the process in /proc/PID/task/*/comm.
pub const WORKER_THREAD_NAME: &str = "per-call-worker";

impl Arm {
    /// Builds the runtime this arm claims to run on.
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        match self.flavour {
            Flavour::CurrentThread => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
            Flavour::MultiThread(workers) => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .thread_name(WORKER_THREAD_NAME)
                .enable_all()
                .build(),
        }
    }

    /// How many threads poll tasks: the one calling `block_on`, or the pool.
    pub fn workers(&self) -> usize {
        match self.flavour {
            Flavour::CurrentThread => 1,
            Flavour::MultiThread(n) => n,
        }
    }
}
// ANCHOR_END: arm

impl FromStr for Arm {
    type Err = String;

    fn from_str(text: &str) -> Result<Arm, String> {
        let usage = || {
            format!(
                "`{text}` is not an arm; write FLAVOUR-HANDLER with FLAVOUR `ct` or `mtN` \
                 (N worker threads, 1 to 16) and HANDLER `inline` or `spawn`, e.g. ct-inline, mt2-spawn"
            )
        };
        let (flavour, handler) = text.split_once('-').ok_or_else(usage)?;
        let flavour = match flavour {
            "ct" => Flavour::CurrentThread,
            other => {
                let n: usize = other
                    .strip_prefix("mt")
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(usage)?;
                if !(1..=16).contains(&n) {
                    return Err(usage());
                }
                Flavour::MultiThread(n)
            }
        };
        let handler = match handler {
            "inline" => Handler::Inline,
            "spawn" => Handler::Spawn,
            _ => return Err(usage()),
        };
        Ok(Arm { flavour, handler })
    }
}

// On disk an arm is its name, as on the command line.
harness::text_serde!(Arm);

impl fmt::Display for Arm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.flavour {
            Flavour::CurrentThread => write!(f, "ct")?,
            Flavour::MultiThread(n) => write!(f, "mt{n}")?,
        }
        match self.handler {
            Handler::Inline => write!(f, "-inline"),
            Handler::Spawn => write!(f, "-spawn"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arms_print_as_they_parse() {
        for text in [
            "ct-inline",
            "ct-spawn",
            "mt1-inline",
            "mt2-spawn",
            "mt16-spawn",
        ] {
            let arm: Arm = text.parse().unwrap();
            assert_eq!(arm.to_string(), text);
        }
        assert_eq!("mt2-spawn".parse::<Arm>().unwrap().workers(), 2);
        assert_eq!("ct-spawn".parse::<Arm>().unwrap().workers(), 1);
    }

    #[test]
    fn bad_arms_say_what_is_expected() {
        for bad in [
            "ct",
            "mt-inline",
            "mt0-inline",
            "mt17-spawn",
            "ct-later",
            "st-inline",
            "",
        ] {
            let error = bad.parse::<Arm>().unwrap_err();
            assert!(error.contains("ct-inline"), "{bad}: {error}");
        }
    }

    #[test]
    fn runtimes_have_the_claimed_number_of_workers() {
        for text in ["ct-inline", "mt1-inline", "mt2-spawn"] {
            let arm: Arm = text.parse().unwrap();
            let runtime = arm.runtime().unwrap();
            assert_eq!(runtime.metrics().num_workers(), arm.workers(), "{arm}");
        }
    }
}
