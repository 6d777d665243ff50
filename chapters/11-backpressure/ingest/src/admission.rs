//! The admission gate: how many messages may be pending (queued, or about to
//! be) before the handler stops asking the stream for more.
//!
//! Pending occupancy is `Q + R`: `Q` messages in the queue plus `R`
//! reservations taken but not yet filled. The message the worker is serving
//! is not pending. The gate holds a logical budget `B` that can change at run
//! time; the queue under it has a fixed physical capacity `K`.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// A budget change, as the recorder and the controller see it.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetChange {
    pub from: usize,
    pub to: usize,
    pub reason: String,
}

#[derive(Debug)]
struct State {
    budget: usize,
    /// The highest budget allowed: the queue's physical capacity K.
    ceiling: usize,
    pending: usize,
    changes: Vec<(std::time::Duration, BudgetChange)>,
}

// ANCHOR: gate
/// The logical budget `B` over pending work. `reserve` waits until
/// `pending < B`; a [`Reservation`] counts as pending from the moment it is
/// taken until it is dropped, which the worker does when it takes the
/// message out of the queue. Lowering `B` never revokes anything: new
/// reservations simply wait until enough pending work has drained.
#[derive(Debug)]
pub struct Gate {
    state: Mutex<State>,
    freed: Notify,
    clock: tokio::time::Instant,
}

impl Gate {
    pub fn new(budget: usize) -> Arc<Gate> {
        Gate::with_ceiling(budget, usize::MAX)
    }

    /// A gate over a queue of `capacity` places: its budget is kept within
    /// `1..=capacity`, whatever `set_budget` is asked. A budget above K would
    /// let the handler take a reservation that no queue place can back, and
    /// count K + 1 pending.
    pub fn with_ceiling(budget: usize, capacity: usize) -> Arc<Gate> {
        let ceiling = capacity.max(1);
        Arc::new(Gate {
            state: Mutex::new(State {
                budget: budget.clamp(1, ceiling),
                ceiling,
                pending: 0,
                changes: Vec::new(),
            }),
            freed: Notify::new(),
            clock: tokio::time::Instant::now(),
        })
    }

    /// Waits for room under the budget. Cancellation-safe: dropping the future
    /// before it completes takes nothing.
    pub async fn reserve(self: &Arc<Gate>) -> Reservation {
        loop {
            // Register for a wake-up *before* checking, so a release that
            // happens between the check and the wait is not missed.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut state = self.state.lock().expect("gate lock");
                if state.pending < state.budget {
                    state.pending += 1;
                    return Reservation { gate: self.clone() };
                }
            }
            freed.await;
        }
    }

    /// Changes `B` (kept within `1..=K`). Raising it wakes waiting
    /// reservations at once.
    pub fn set_budget(&self, budget: usize, reason: &str) {
        let mut state = self.state.lock().expect("gate lock");
        let budget = budget.clamp(1, state.ceiling);
        if budget != state.budget {
            let change = BudgetChange {
                from: state.budget,
                to: budget,
                reason: reason.to_string(),
            };
            state.changes.push((self.clock.elapsed(), change));
            state.budget = budget;
            self.freed.notify_waiters();
        }
    }

    pub fn budget(&self) -> usize {
        self.state.lock().expect("gate lock").budget
    }

    /// `Q + R`.
    pub fn pending(&self) -> usize {
        self.state.lock().expect("gate lock").pending
    }

    /// Every change so far, with the time since the gate was made.
    pub fn changes(&self) -> Vec<(std::time::Duration, BudgetChange)> {
        self.state.lock().expect("gate lock").changes.clone()
    }
}

/// One unit of pending budget. Dropping it (unused, or when the worker
/// dequeues the message it was spent on) gives the unit back.
#[derive(Debug)]
pub struct Reservation {
    gate: Arc<Gate>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut state = self.gate.state.lock().expect("gate lock");
        state.pending -= 1;
        drop(state);
        self.gate.freed.notify_waiters();
    }
}
// ANCHOR_END: gate

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::time::timeout;

    #[tokio::test(start_paused = true)]
    async fn reservations_stop_at_the_budget_and_resume_when_one_is_freed() {
        let gate = Gate::new(2);
        let a = gate.reserve().await;
        let _b = gate.reserve().await;
        assert_eq!(gate.pending(), 2);
        assert!(
            timeout(Duration::from_secs(1), gate.reserve())
                .await
                .is_err()
        );
        assert_eq!(gate.pending(), 2, "a cancelled wait takes nothing");
        drop(a);
        let _c = timeout(Duration::from_secs(1), gate.reserve())
            .await
            .expect("room again");
        assert_eq!(gate.pending(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn lowering_the_budget_revokes_nothing() {
        let gate = Gate::new(4);
        let held: Vec<Reservation> = vec![
            gate.reserve().await,
            gate.reserve().await,
            gate.reserve().await,
        ];
        gate.set_budget(1, "test");
        assert_eq!(gate.pending(), 3, "admitted work stays admitted");
        let mut held = held;
        held.pop();
        held.pop();
        assert!(
            timeout(Duration::from_secs(1), gate.reserve())
                .await
                .is_err(),
            "1 pending = B"
        );
        held.pop();
        let _r = timeout(Duration::from_secs(1), gate.reserve())
            .await
            .expect("0 pending < B");
        assert_eq!(gate.changes()[0].1.to, 1);
    }

    #[test]
    fn the_budget_never_exceeds_the_queue_capacity() {
        let gate = Gate::with_ceiling(8, 4);
        assert_eq!(gate.budget(), 4);
        gate.set_budget(100, "test");
        assert_eq!(gate.budget(), 4);
        gate.set_budget(0, "test");
        assert_eq!(gate.budget(), 1);
        assert_eq!(gate.changes().len(), 1, "4 -> 4 is no change");
    }

    #[tokio::test(start_paused = true)]
    async fn raising_the_budget_wakes_a_waiting_reservation() {
        let gate = Gate::new(1);
        let _a = gate.reserve().await;
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { gate.reserve().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished());
        gate.set_budget(2, "test");
        let _b = timeout(Duration::from_secs(1), waiter)
            .await
            .expect("woken")
            .unwrap();
        assert_eq!(gate.pending(), 2);
    }
}
