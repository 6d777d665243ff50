//! Chapter 19: the SRE book's adaptive throttle, on the client.
//!
//! A backend that turns a request away still spends something on it, and a
//! client that keeps sending (or retrying) into that makes it spend more.
//! The SRE book's client watches its own recent history instead: of what the
//! application asked it to send over the last `window`, how much did the
//! backend accept? When the answer falls below one in K, it turns a share of
//! new requests away itself, before they cost the backend anything.
//!
//! `Sre` keeps the two histories: every request the application asked about,
//! sent or turned away here (`admit` adds it), and every request the backend
//! accepted (`record` adds it). `admit` turns a request away when its `draw`,
//! uniform in `[0, 1)`, falls below `reject_probability`, worked out before
//! the request is counted. This version's probability is always 0 and it
//! never forgets: the client sends every request into an outage. Write the
//! two missing pieces. `forget` drops every request and accept that is
//! `window` old or older at `now`. `reject_probability` is, over what is
//! left,
//!
//! ```text
//! max(0, (requests - K * accepts) / (requests + 1))
//! ```
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch19`.

use std::{collections::VecDeque, time::Duration};

pub use crate::given::ch19::Settings;

/// One client's throttle for one backend. Times are how long the client has
/// been running.
#[derive(Debug, Clone)]
pub struct Sre {
    settings: Settings,
    /// When each request was asked about, oldest first, whether it was sent
    /// or turned away here.
    requests: VecDeque<Duration>,
    /// When each accepted request was answered, oldest first.
    accepts: VecDeque<Duration>,
}

impl Sre {
    pub fn new(settings: Settings) -> Sre {
        // Below 1 the client would turn away requests a healthy backend accepts.
        assert!(settings.k >= 1.0, "K must be at least 1");
        Sre {
            settings,
            requests: VecDeque::new(),
            accepts: VecDeque::new(),
        }
    }

    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// The application wants to send a request at `now`: says whether it
    /// may go. One turned away is counted at once; one that goes is counted
    /// when it ends ([`Sre::record`]). `draw` is uniform in `[0, 1)`, passed
    /// in so that a run is reproducible.
    pub fn admit(&mut self, now: Duration, draw: f64) -> bool {
        let p = self.reject_probability(now);
        // Turned away with probability p; at p = 0 nothing is, not a draw of 0.
        let sent = draw >= p;
        if !sent {
            self.requests.push_back(now);
        }
        sent
    }

    /// A request that was sent has ended at `now`: `accepted` if the backend
    /// served it, false if it turned it away (overloaded, unavailable).
    /// Counted only now: a request still in flight is neither accepted nor
    /// refused, and must not read as a failure.
    pub fn record(&mut self, now: Duration, accepted: bool) {
        self.requests.push_back(now);
        if accepted {
            self.accepts.push_back(now);
        }
    }

    /// `(requests, accepts)` in the window that ends at `now`.
    pub fn counts(&mut self, now: Duration) -> (usize, usize) {
        self.forget(now);
        (self.requests.len(), self.accepts.len())
    }

    // ANCHOR: throttle
    /// The probability that a request asked about at `now` is turned away
    /// here, before it is counted.
    pub fn reject_probability(&mut self, now: Duration) -> f64 {
        let _ = (self.settings, now); // not used yet
        0.0
    }

    /// Drops the requests and accepts that have left the window at `now`.
    fn forget(&mut self, now: Duration) {
        let _ = now; // not used yet
    }
    // ANCHOR_END: throttle
}
