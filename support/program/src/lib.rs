//! What every program of the workshop does the same way, and which no chapter
//! is about. It sits outside the chapter sequence (`support/`), so that the
//! crate graph of `chapters/` stays the book's prerequisite graph.
//!
//! - [`args`]: how every program reads its command line, and how the book's
//!   commands are checked against it;
//! - [`exit_code`] and [`Exit`]: how every program ends;
//! - [`init_tracing`]: where logs go;
//! - [`shutdown_signal`]: when a server starts to drain, and [`stop_signals`]
//!   for a program that also cuts its drain short at a second signal;
//! - [`certs_dir`] and [`default_ca`]: where the development PKI lives;
//! - [`ready_file`]: how a server tells a script or a harness it is listening;
//! - [`duration`]: how durations are written on every command line;
//! - [`clap_name_display!`]: how a choice made on the command line is printed;
//! - [`proc`]: what programs read about themselves and the machine from `/proc`.

pub mod duration;
pub mod proc;
pub mod ready_file;

use std::{fmt, path::PathBuf, process::ExitCode};

/// Set in a program's environment, it only checks its command line: exit
/// status 0 if the program's parser accepts it (or it asks for --help), 2
/// with clap's message if not, and nothing run. `cargo xtask check-book`
/// checks every command the book shows this way, with the program's own
/// parser, and needs no list of the programs.
pub const CHECK_ARGS: &str = "WORKSHOP_CHECK_ARGS";

#[doc(hidden)]
pub use clap as __clap;

/// A choice made on the command line is printed as it is typed there: its
/// `Display` is the name clap parses (`drop-lifo`, `fixed-32`), so a table, a
/// file name or a log line spells it as the flag that chose it, and the
/// spelling lives in one place, the type's `ValueEnum` derive. Width and
/// alignment (`{:<6}`) apply as they do to a `&str`, so a table that padded a
/// hand-written name pads this one alike. `program::clap_name_display!(Policy);`
#[macro_export]
macro_rules! clap_name_display {
    ($type:ty) => {
        impl ::std::fmt::Display for $type {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                let value = $crate::__clap::ValueEnum::to_possible_value(self)
                    .expect("a variant printed is one clap can parse, not #[value(skip)]");
                f.pad(value.get_name())
            }
        }
    };
}

/// The command line, parsed by `T` (clap's `Parser::parse`: a bad one ends
/// the program with status 2 and clap's message); see [`CHECK_ARGS`].
pub fn args<T: clap::Parser>() -> T {
    let parsed = T::parse();
    if std::env::var_os(CHECK_ARGS).is_some() {
        std::process::exit(0);
    }
    parsed
}

/// Every program's last line: success exits 0; an error is printed once, with
/// its chain of causes on one line (`error: cannot read certs/ca.pem: No such
/// file or directory`), and exits 1. An [`Exit`] chooses its own status and
/// words instead.
pub fn exit_code(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<Exit>() {
            Some(exit) => {
                if !exit.message.is_empty() {
                    eprintln!("{}", exit.message);
                }
                ExitCode::from(exit.status)
            }
            None => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}

/// An error that ends its program with a status other than 1, or with words
/// of its own. Most programs fail one way and return any error; a program that
/// scripts call may tell its failures apart. The clients of chapter 6 exit 1
/// when a call failed, after their own report of it, and 2 when they could not
/// even be set up, the status clap uses for a bad command line.
#[derive(Debug)]
pub struct Exit {
    pub status: u8,
    /// What stderr gets, as it is; empty when the program has said it already.
    pub message: String,
}

impl Exit {
    /// Printed as any error is (`error: ` and its chain of causes), with `status`.
    pub fn error(status: u8, error: anyhow::Error) -> Exit {
        Exit {
            status,
            message: format!("error: {error:#}"),
        }
    }

    /// Printed as it is, with `status`: a report in the program's own words.
    pub fn report(status: u8, report: impl fmt::Display) -> Exit {
        Exit {
            status,
            message: report.to_string(),
        }
    }

    /// Nothing more to print: the program has already said what went wrong.
    pub fn silent(status: u8) -> Exit {
        Exit {
            status,
            message: String::new(),
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "exit status {}", self.status)
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for Exit {}

/// Logs to stderr, `info` and up unless `RUST_LOG` says otherwise. Stderr, so
/// that a program's stdout carries only what it was asked to print.
pub fn init_tracing() {
    init_tracing_at("info");
}

/// The same from another level: a demo whose server would log a line for each
/// of hundreds of calls starts at `warn`.
pub fn init_tracing_at(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

// ANCHOR: shutdown_signal
/// Resolves on Ctrl-C or, on Unix, SIGTERM (what `docker stop` and most process
/// managers send). Servers start draining when it resolves.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}
// ANCHOR_END: shutdown_signal

/// The two signals that ask a server to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT: Ctrl-C in the terminal.
    Interrupt,
    /// SIGTERM: what `docker stop`, Kubernetes and systemd send.
    Terminate,
}

impl StopSignal {
    /// The status a shell reports for a program this signal ended, 128 + the
    /// signal's number: 130 for Ctrl-C, 143 for SIGTERM. A program that stops
    /// short because of a signal exits with it, so a script can tell.
    pub fn exit_status(self) -> u8 {
        match self {
            StopSignal::Interrupt => 130,
            StopSignal::Terminate => 143,
        }
    }
}

impl fmt::Display for StopSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StopSignal::Interrupt => "Ctrl-C (SIGINT)",
            StopSignal::Terminate => "SIGTERM",
        })
    }
}

/// Every Ctrl-C and SIGTERM, one message each, in order.
pub type StopSignals = tokio::sync::mpsc::UnboundedReceiver<StopSignal>;

// ANCHOR: stop_signals
/// Listens for Ctrl-C and SIGTERM from now on, for as long as the returned
/// receiver lives (inside a Tokio runtime). Unlike [`shutdown_signal`], it
/// hears every signal, not only the first: a server drains at the first, and
/// a second one, sent by an operator who will not wait, can cut the drain
/// short. Listening starts here, not at the first `recv`, so no signal is lost
/// in between. If no signal can be listened to, `recv` returns `None` at once.
pub fn stop_signals() -> StopSignals {
    let (sender, signals) = tokio::sync::mpsc::unbounded_channel();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        for (kind, which) in [
            (SignalKind::interrupt(), StopSignal::Interrupt),
            (SignalKind::terminate(), StopSignal::Terminate),
        ] {
            let Ok(mut arrivals) = signal(kind) else {
                continue;
            };
            let sender = sender.clone();
            tokio::spawn(async move {
                while arrivals.recv().await.is_some() && sender.send(which).is_ok() {}
            });
        }
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() && sender.send(StopSignal::Interrupt).is_ok() {}
    });
    signals
}
// ANCHOR_END: stop_signals

/// The root of this workspace, wherever `cargo run` was started from.
pub fn workspace_root() -> PathBuf {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    root.canonicalize().unwrap_or(root)
}

/// The PKI folder used when neither `--certs-dir` nor `CERTS_DIR` says otherwise:
/// `certs/` at the root of this workspace.
pub fn certs_dir() -> PathBuf {
    workspace_root().join("certs")
}

/// The CA certificate that signed the development certificates (chapter 3).
pub fn default_ca() -> PathBuf {
    certs_dir().join("ca.pem")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_chooses_its_status_and_words() {
        assert_eq!(exit_code(Ok(())), ExitCode::SUCCESS);
        assert_eq!(exit_code(Err(anyhow::anyhow!("no"))), ExitCode::FAILURE);
        assert_eq!(exit_code(Err(Exit::silent(2).into())), ExitCode::from(2));

        let setup = Exit::error(
            2,
            anyhow::anyhow!("missing file").context("cannot read ca.pem"),
        );
        assert_eq!(setup.message, "error: cannot read ca.pem: missing file");
        assert_eq!(
            Exit::report(1, "RPC failed: UNAVAILABLE").to_string(),
            "RPC failed: UNAVAILABLE"
        );
        assert_eq!(Exit::silent(1).to_string(), "exit status 1");
    }

    #[test]
    fn a_stop_signal_exits_with_the_status_a_shell_gives_it() {
        assert_eq!(StopSignal::Interrupt.exit_status(), 128 + 2);
        assert_eq!(StopSignal::Terminate.exit_status(), 128 + 15);
    }

    #[derive(clap::ValueEnum, Clone, Copy)]
    enum Choice {
        DropLifo,
        #[value(name = "fixed-32")]
        Fixed32,
    }

    crate::clap_name_display!(Choice);

    #[test]
    fn a_choice_prints_as_clap_parses_it_and_pads_as_a_str_does() {
        assert_eq!(Choice::DropLifo.to_string(), "drop-lifo");
        assert_eq!(Choice::Fixed32.to_string(), "fixed-32");
        assert_eq!(format!("[{:<10}]", Choice::Fixed32), "[fixed-32  ]");
        assert_eq!(format!("[{:>10}]", Choice::DropLifo), "[ drop-lifo]");
    }

    #[test]
    fn an_exit_is_found_under_added_context() {
        let e = anyhow::Error::from(Exit::silent(2)).context("while calling");
        assert_eq!(e.downcast_ref::<Exit>().map(|x| x.status), Some(2));
    }
}
