//! Hedging: when a call has taken longer than most calls do, send a second
//! copy and take whichever answer comes first.
//!
//! This is `tower::hedge`. It records every answer's latency in a histogram
//! that rotates each `period` (the delay comes from the last full period),
//! and once it holds `min_points` answers it sends a copy of any call still
//! unanswered after the chosen percentile of them. When one copy answers,
//! the other's future is dropped, which tonic turns into a cancellation
//! (RST_STREAM) that the server sees.
//!
//! The policy here adds one rule of ours: no copy is sent once the call's
//! deadline has passed, and each copy carries only the time that is left
//! ([`crate::client::Caller`]), so a hedge never outlives the call.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::{sync::Mutex, time::Instant};
use tonic::Status;
use tower::{Service, ServiceExt, hedge::Hedge};

use crate::client::{Answer, Call, Caller};

/// How long one window of the latency histogram lasts.
pub const PERIOD: Duration = Duration::from_secs(1);

// ANCHOR: policy
/// Every call may be hedged, but not after its deadline. Counts the copies
/// it lets out: the extra load that hedging costs.
#[derive(Debug, Clone, Default)]
pub struct BeforeDeadline {
    pub copies: Arc<AtomicU64>,
}

impl tower::hedge::Policy<Call> for BeforeDeadline {
    fn clone_request(&self, call: &Call) -> Option<Call> {
        Some(call.clone())
    }

    /// Asked when the hedge delay has passed and no answer has come yet.
    fn can_retry(&self, call: &Call) -> bool {
        let in_time = Instant::now() < call.deadline;
        if in_time {
            self.copies.fetch_add(1, Ordering::Relaxed);
        }
        in_time
    }
}
// ANCHOR_END: policy

/// A caller that hedges; `S` is a [`Caller`] except in tests, which script
/// the answers.
pub struct Hedged<S = Caller> {
    hedge: Arc<Mutex<Hedge<S, BeforeDeadline>>>,
    pub copies: Arc<AtomicU64>,
}

impl<S> Clone for Hedged<S> {
    fn clone(&self) -> Self {
        Hedged {
            hedge: self.hedge.clone(),
            copies: self.copies.clone(),
        }
    }
}

impl<S> Hedged<S>
where
    S: Service<Call, Response = Answer, Error = Status> + Clone + Send + 'static,
    S::Future: Send,
{
    // ANCHOR: new
    /// Hedges calls through `caller` once they have waited longer than
    /// `percentile` (0.9: the 90th) of recent answers.
    pub fn new(caller: S, percentile: f32, min_points: u64) -> Hedged<S> {
        let policy = BeforeDeadline::default();
        let copies = policy.copies.clone();
        let hedge = Hedge::new(caller, policy, min_points, percentile, PERIOD);
        Hedged {
            hedge: Arc::new(Mutex::new(hedge)),
            copies,
        }
    }
    // ANCHOR_END: new

    pub async fn call(&self, call: Call) -> Result<Answer, Status> {
        let deadline = call.deadline;
        let answer = {
            let mut hedge = self.hedge.lock().await;
            let ready = hedge
                .ready()
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?;
            ready.call(call)
        };
        // Both copies already stop at the deadline; this bound is for the
        // reader who wants to see it in one place.
        match tokio::time::timeout_at(deadline, answer).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(match e.downcast::<Status>() {
                Ok(status) => *status,
                Err(e) => Status::unknown(e.to_string()),
            }),
            Err(_) => Err(Status::deadline_exceeded("the deadline passed")),
        }
    }

    /// Copies sent so far.
    pub fn copies(&self) -> u64 {
        self.copies.load(Ordering::Relaxed)
    }
}
