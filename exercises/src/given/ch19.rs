//! Chapter 19's exercise, the part it gives: the throttle's two settings, as
//! the SRE book sets them and as its more aggressive example does.

use std::time::Duration;

/// How a client's adaptive throttle judges its backend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// K: how many requests the client sends per accept before it starts to
    /// hold any back. The backend may turn away up to `1 - 1/K` of what it
    /// receives (half, at K = 2) before the client notices.
    pub k: f64,
    /// How much of the client's recent past counts: requests and accepts are
    /// remembered for this long, then forgotten.
    pub window: Duration,
}

impl Settings {
    /// The SRE book's setting: K = 2 over the last two minutes.
    pub const BOOK: Settings = Settings {
        k: 2.0,
        window: Duration::from_secs(120),
    };

    /// The book's example of a more aggressive client, K = 1.1: it starts to
    /// throttle once about one request in eleven is turned away.
    pub const AGGRESSIVE: Settings = Settings {
        k: 1.1,
        ..Settings::BOOK
    };
}
