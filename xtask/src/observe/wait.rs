//! Every wait of the observations: bounded in time, ended by an error that
//! says what did not happen, and cut short by Ctrl-C.
//!
//! Ctrl-C (or SIGTERM) does not kill xtask: [`stop_waiting_on_interrupt`]
//! turns it into an error at the next poll, which unwinds through the
//! runner, whose guards then stop every server and command it started. A
//! second Ctrl-C exits at once.

use std::{
    net::TcpListener,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use anyhow::bail;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

const POLL: Duration = Duration::from_millis(20);

/// Catches Ctrl-C and SIGTERM from now on, for [`until`] and [`pause`] to see.
pub fn stop_waiting_on_interrupt() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        runtime.block_on(async {
            loop {
                program::shutdown_signal().await;
                if INTERRUPTED.swap(true, Ordering::SeqCst) {
                    eprintln!("interrupted again: exiting without stopping the servers");
                    std::process::exit(130);
                }
                eprintln!("interrupted: stopping the servers and commands started so far");
            }
        })
    });
    Ok(())
}

/// An error once Ctrl-C has been pressed.
pub fn check_interrupt(doing: &str) -> anyhow::Result<()> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted while {doing}");
    }
    Ok(())
}

/// Polls `ready` until it answers `Some`, for at most `limit`. `what` names
/// the awaited event for the error: "a client to connect to port 50051".
pub fn until<T>(
    limit: Duration,
    what: &str,
    mut ready: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let started = Instant::now();
    loop {
        if let Some(value) = ready()? {
            return Ok(value);
        }
        check_interrupt(&format!("waiting for {what}"))?;
        if started.elapsed() > limit {
            bail!(
                "gave up after {:.0} s waiting for {what}",
                limit.as_secs_f64()
            );
        }
        std::thread::sleep(POLL);
    }
}

/// Sleeps `how_long`, unless interrupted.
pub fn pause(how_long: Duration) -> anyhow::Result<()> {
    let end = Instant::now() + how_long;
    while Instant::now() < end {
        check_interrupt("pausing")?;
        std::thread::sleep(POLL.min(end - Instant::now()));
    }
    Ok(())
}

/// A port is free when we can listen on it ourselves, as the servers will.
pub fn port_is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_that_never_ends_well_says_what_did_not_happen() {
        let error = until(Duration::ZERO, "the moon to rise", || Ok(None::<()>)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "gave up after 0 s waiting for the moon to rise"
        );
        let mut polls = 0;
        let value = until(Duration::from_secs(60), "three polls", || {
            polls += 1;
            Ok((polls == 3).then_some(polls))
        })
        .unwrap();
        assert_eq!(value, 3);
    }

    #[test]
    fn a_port_someone_listens_on_is_not_free() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(!port_is_free(port));
        drop(listener);
        assert!(port_is_free(port));
    }
}
