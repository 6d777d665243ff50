//! Chapter 19: the SRE book's adaptive throttle, on the client (the
//! solution).
//!
//! *Site Reliability Engineering*, chapter 21 "Handling Overload",
//! "Client-Side Throttling": two counts over a sliding window and one
//! formula. Where the book leaves a choice open, this takes the chapter's
//! (`throttle::Sre` in `chapters/19-chain`): a request counts from the moment
//! it is asked about, after its own probability is worked out, and an event
//! exactly `window` old has left the window.

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
        self.forget(now);
        let requests = self.requests.len() as f64;
        let accepts = self.accepts.len() as f64;
        // Up to K requests per accept go; past that, the excess share is
        // turned away. The +1 keeps an empty window from dividing by zero and
        // a single failure from turning everything away; the max keeps a
        // healthy history (K * accepts above requests) at 0.
        ((requests - self.settings.k * accepts) / (requests + 1.0)).max(0.0)
    }

    /// Drops the requests and accepts that have left the window at `now`.
    fn forget(&mut self, now: Duration) {
        // Nothing has left a window that reaches back before the start.
        let Some(horizon) = now.checked_sub(self.settings.window) else {
            return;
        };
        for events in [&mut self.requests, &mut self.accepts] {
            // Oldest first: stop at the first one still inside.
            while events.front().is_some_and(|&at| at <= horizon) {
                events.pop_front();
            }
        }
    }
    // ANCHOR_END: throttle
}
