//! Chapter 4: the Greeter over gRPC, with tonic and rustls.
//!
//! - [`greeter`] is the service: validation, the `delay_ms` wait, the reply.
//! - [`lifetime`] notices calls that end before their reply is ready (the client
//!   cancelled, or the deadline passed), logs them and counts them. The REST
//!   server of chapter 5 reuses it, along with the validation rules.
//! - [`server`] puts the service on the network: TLS, optional mTLS, health,
//!   reflection, explicit limits and graceful shutdown.
//! - `testing` (behind the feature of that name) is the scaffolding that the
//!   integration tests of this and later chapters share: a throwaway PKI, a
//!   server that stops when the test drops it, a TLS channel, bounded waits.

pub mod greeter;
pub mod lifetime;
pub mod server;
#[cfg(feature = "testing")]
pub mod testing;

pub use greeter::{Greeter, InvalidRequest, MAX_DELAY_MS, MAX_NAME_CHARS, check_request, greeting};
pub use lifetime::{CallGuard, CallStats};
pub use server::{Args, BoundServer};

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

/// Logs to stderr, `info` and up unless `RUST_LOG` says otherwise.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
