//! The rules of an overloaded server, alone, with the clock passed in:
//! which call is shed at the door, which waits, which one a free worker takes
//! next, and which ones are thrown away because their caller's deadline has
//! passed or will pass before the work could end. Tested without a runtime.

use std::{collections::VecDeque, time::Duration};

use serde::Serialize;
use tokio::time::Instant;

/// Which waiting call a free worker takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Oldest first: the queue is a line.
    Fifo,
    /// Newest first: the calls with the most time left are served while it lasts.
    Lifo,
}

// ANCHOR: rules
/// What the server does with calls beyond its workers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rules {
    /// Calls worked on at once.
    pub workers: usize,
    /// Calls that may wait for a worker; one more is shed (RESOURCE_EXHAUSTED).
    pub queue: usize,
    pub order: Order,
    /// Before starting a call, check that it can still end before its
    /// deadline; if not, drop it without doing the work.
    pub drop_expired: bool,
    /// How long one call occupies a worker.
    pub service: Duration,
    /// Slack the deadline check keeps for the reply's way back (and the
    /// timer's 1 ms ticks): a call is started only if it can end this long
    /// before its deadline.
    pub margin: Duration,
}
// ANCHOR_END: rules

impl Rules {
    /// Calls per second the workers can complete.
    pub fn capacity(&self) -> f64 {
        self.workers as f64 / self.service.as_secs_f64()
    }

    /// How long the workers take to work off everything they can hold:
    /// every worker busy and every queue place taken, as when a call is refused.
    pub fn drain_time(&self) -> Duration {
        (self.service * (self.workers + self.queue) as u32) / self.workers.max(1) as u32
    }
}

// ANCHOR: pushback
/// When a refused caller is told to come back. At first, after the
/// [`Rules::drain_time`]: enough if the overload was a burst. But under
/// sustained overload nothing frees a place for the refused calls, and
/// callers that come back sooner only add to the load; so every window in
/// which the server had to refuse doubles the delay it names (up to `cap`),
/// and a window without refusals brings it back to the drain time.
#[derive(Debug, Clone)]
pub struct Pushback {
    base: Duration,
    cap: Duration,
    window_start: Instant,
    refused_in_window: bool,
    delay: Duration,
}

impl Pushback {
    pub const WINDOW: Duration = Duration::from_millis(100);
    pub const CAP: Duration = Duration::from_secs(1);

    pub fn new(rules: &Rules, now: Instant) -> Pushback {
        let base = rules.drain_time();
        Pushback {
            base,
            cap: Pushback::CAP.max(base),
            window_start: now,
            refused_in_window: false,
            delay: base,
        }
    }

    /// A call is refused at `now`: the delay to name.
    pub fn refused(&mut self, now: Instant) -> Duration {
        self.roll(now);
        self.refused_in_window = true;
        self.delay
    }

    /// Moves to the window `now` is in, adjusting the delay for every
    /// window that ended: doubled after one with refusals, back to the base
    /// after one without.
    fn roll(&mut self, now: Instant) {
        while now >= self.window_start + Pushback::WINDOW {
            self.delay = if self.refused_in_window {
                (self.delay * 2).min(self.cap)
            } else {
                self.base
            };
            self.refused_in_window = false;
            self.window_start += Pushback::WINDOW;
        }
    }
}
// ANCHOR_END: pushback

/// A call inside the server: when it arrived, when its caller stops waiting
/// (from `grpc-timeout`; none if the caller set no deadline), and whatever the
/// server needs to answer it.
#[derive(Debug)]
pub struct Job<T> {
    pub arrived: Instant,
    pub deadline: Option<Instant>,
    pub reply: T,
}

/// What a free worker got from [`Core::take`].
#[derive(Debug)]
pub struct Taken<T> {
    /// The call to work on now, if any.
    pub job: Option<Job<T>>,
    /// Calls thrown away unworked: their deadline would pass before the work ends.
    pub dropped: Vec<Job<T>>,
    /// Calls still waiting after this take.
    pub waiting: usize,
}

/// The rules, applied: the queue and the count of busy workers.
#[derive(Debug)]
pub struct Core<T> {
    rules: Rules,
    queue: VecDeque<Job<T>>,
    busy: usize,
}

impl<T> Core<T> {
    pub fn new(rules: Rules) -> Core<T> {
        Core {
            rules,
            queue: VecDeque::new(),
            busy: 0,
        }
    }

    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// Changes how long each call takes from the next one a worker starts:
    /// a slower dependency, say (chapter 19's trigger doubles it).
    pub fn set_service(&mut self, service: Duration) {
        self.rules.service = service;
    }

    pub fn waiting(&self) -> usize {
        self.queue.len()
    }

    pub fn busy(&self) -> usize {
        self.busy
    }

    // ANCHOR: arrive
    /// A call arrives. It is admitted if a worker or a place in the queue is
    /// free (the answer is how many calls were already waiting), and shed
    /// otherwise: handed back, to be refused at once.
    pub fn arrive(&mut self, job: Job<T>) -> Result<usize, Job<T>> {
        let held = self.busy + self.queue.len();
        if held >= self.rules.workers + self.rules.queue {
            return Err(job);
        }
        let ahead = self.queue.len();
        self.queue.push_back(job);
        Ok(ahead)
    }
    // ANCHOR_END: arrive

    // ANCHOR: take
    /// A worker is free at `now`: which call does it work on?
    pub fn take(&mut self, now: Instant) -> Taken<T> {
        let mut dropped = Vec::new();
        if self.rules.drop_expired {
            // The oldest calls expire first: clear them from the front, so
            // that under LIFO they do not fill the queue and get fresh calls shed.
            while self.queue.front().is_some_and(|j| !self.can_finish(j, now)) {
                dropped.extend(self.queue.pop_front());
            }
        }
        let job = loop {
            let next = match self.rules.order {
                Order::Fifo => self.queue.pop_front(),
                Order::Lifo => self.queue.pop_back(),
            };
            match next {
                Some(j) if self.rules.drop_expired && !self.can_finish(&j, now) => dropped.push(j),
                other => break other,
            }
        };
        if job.is_some() {
            self.busy += 1;
        }
        Taken {
            job,
            dropped,
            waiting: self.queue.len(),
        }
    }

    /// Can the work on `job`, started at `now`, end before its caller stops waiting?
    pub fn can_finish(&self, job: &Job<T>, now: Instant) -> bool {
        job.deadline
            .is_none_or(|d| now + self.rules.service + self.rules.margin <= d)
    }
    // ANCHOR_END: take

    /// A worker has finished its call.
    pub fn finish(&mut self) {
        self.busy = self.busy.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn rules(queue: usize, order: Order, drop_expired: bool) -> Rules {
        Rules {
            workers: 2,
            queue,
            order,
            drop_expired,
            service: ms(10),
            margin: Duration::ZERO,
        }
    }

    fn job(t0: Instant, arrived_ms: u64, deadline_ms: Option<u64>, id: u32) -> Job<u32> {
        Job {
            arrived: t0 + ms(arrived_ms),
            deadline: deadline_ms.map(|d| t0 + ms(arrived_ms + d)),
            reply: id,
        }
    }

    #[test]
    fn a_slower_service_halves_capacity_and_tightens_the_deadline_check() {
        let t0 = Instant::now();
        let mut core = Core::new(rules(1, Order::Fifo, true));
        assert_eq!(core.rules().capacity(), 200.0);
        // 15 ms left: enough for 10 ms of work, not for 20.
        let waiting = job(t0, 0, Some(15), 0);
        assert!(core.can_finish(&waiting, t0));
        core.set_service(ms(20));
        assert_eq!(core.rules().capacity(), 100.0);
        assert!(!core.can_finish(&waiting, t0));
    }

    #[test]
    fn shed_only_when_every_worker_and_queue_place_is_taken() {
        let t0 = Instant::now();
        // 2 workers, 1 queue place: three calls are held, the fourth is shed.
        let mut core = Core::new(rules(1, Order::Fifo, false));
        for id in 0..3 {
            assert!(core.arrive(job(t0, 0, None, id)).is_ok());
        }
        assert_eq!(core.arrive(job(t0, 0, None, 3)).unwrap_err().reply, 3);
        // Workers taking calls do not change the count held...
        assert_eq!(core.take(t0).job.unwrap().reply, 0);
        assert!(core.arrive(job(t0, 1, None, 4)).is_err());
        // ...a worker finishing does.
        core.finish();
        assert_eq!(core.arrive(job(t0, 2, None, 5)).ok(), Some(2));
    }

    #[test]
    fn reject_with_no_queue_admits_exactly_the_workers() {
        let t0 = Instant::now();
        let mut core = Core::new(rules(0, Order::Fifo, false));
        assert!(core.arrive(job(t0, 0, None, 0)).is_ok());
        assert!(core.arrive(job(t0, 0, None, 1)).is_ok());
        assert!(core.arrive(job(t0, 0, None, 2)).is_err());
    }

    #[test]
    fn wait_serves_expired_calls_anyway() {
        let t0 = Instant::now();
        let mut core = Core::new(rules(10, Order::Fifo, false));
        core.arrive(job(t0, 0, Some(300), 0)).unwrap();
        // 500 ms later the caller is long gone; the worker takes it regardless.
        let taken = core.take(t0 + ms(500));
        assert_eq!(taken.job.unwrap().reply, 0);
        assert!(taken.dropped.is_empty());
    }

    #[test]
    fn drop_discards_calls_that_cannot_finish_before_their_deadline() {
        let t0 = Instant::now();
        let mut core = Core::new(rules(10, Order::Fifo, true));
        core.arrive(job(t0, 0, Some(300), 0)).unwrap(); // gone at 300
        core.arrive(job(t0, 5, Some(300), 1)).unwrap(); // gone at 305; needs to start by 295
        core.arrive(job(t0, 100, Some(300), 2)).unwrap(); // gone at 400
        core.arrive(job(t0, 100, None, 3)).unwrap(); // no deadline: never dropped
        let taken = core.take(t0 + ms(296));
        let dropped: Vec<u32> = taken.dropped.iter().map(|j| j.reply).collect();
        assert_eq!(dropped, [0, 1]);
        assert_eq!(taken.job.unwrap().reply, 2);
        assert_eq!(taken.waiting, 1);
        // A call with exactly the service time left is still worth starting.
        let mut core = Core::new(rules(10, Order::Fifo, true));
        core.arrive(job(t0, 0, Some(300), 7)).unwrap();
        assert_eq!(core.take(t0 + ms(290)).job.unwrap().reply, 7);
        assert_eq!(core.busy(), 1);
    }

    #[test]
    fn the_margin_keeps_calls_that_would_end_at_the_last_moment_out() {
        let t0 = Instant::now();
        let mut core = Core::new(Rules {
            margin: ms(5),
            ..rules(10, Order::Fifo, true)
        });
        core.arrive(job(t0, 0, Some(300), 0)).unwrap();
        core.arrive(job(t0, 0, Some(300), 1)).unwrap();
        assert_eq!(core.take(t0 + ms(285)).job.unwrap().reply, 0); // ends at 295
        assert_eq!(core.take(t0 + ms(286)).dropped.len(), 1); // would end at 296 + 5 > 300
    }

    #[test]
    fn lifo_serves_the_newest_and_still_clears_expired_ones_from_the_front() {
        let t0 = Instant::now();
        let mut core = Core::new(rules(10, Order::Lifo, true));
        for (i, at) in [0, 50, 200, 250].into_iter().enumerate() {
            core.arrive(job(t0, at, Some(300), i as u32)).unwrap();
        }
        let taken = core.take(t0 + ms(345));
        // 0 and 1 (gone at 300 and 350) cannot finish by then, and are
        // dropped; 3, the newest, is served first, then 2.
        let dropped: Vec<u32> = taken.dropped.iter().map(|j| j.reply).collect();
        assert_eq!(dropped, [0, 1]);
        assert_eq!(taken.job.unwrap().reply, 3);
        assert_eq!(core.take(t0 + ms(345)).job.unwrap().reply, 2);
        assert!(core.take(t0 + ms(345)).job.is_none());
    }

    #[test]
    fn capacity_is_workers_over_service_time() {
        let r = Rules {
            workers: 4,
            queue: 0,
            order: Order::Fifo,
            drop_expired: false,
            service: ms(10),
            margin: ms(2),
        };
        assert_eq!(r.capacity(), 400.0);
        // Four held by the workers, four waiting: two rounds of 10 ms.
        assert_eq!(Rules { queue: 4, ..r }.drain_time(), ms(20));
    }

    #[test]
    fn pushback_doubles_while_refusals_go_on_and_resets_after_a_quiet_window() {
        let t0 = Instant::now();
        let mut p = Pushback::new(&rules(2, Order::Fifo, false), t0); // drain: 20 ms
        assert_eq!(p.refused(t0), ms(20));
        assert_eq!(p.refused(t0 + ms(99)), ms(20), "same window");
        assert_eq!(p.refused(t0 + ms(100)), ms(40));
        assert_eq!(p.refused(t0 + ms(250)), ms(80));
        // Refusals every window: capped at a second.
        let capped = (3..20).map(|w| p.refused(t0 + ms(100 * w))).last();
        assert_eq!(capped, Some(Pushback::CAP));
        // A window with no refusal (2000..2100) resets it.
        assert_eq!(p.refused(t0 + ms(2150)), ms(20));
    }
}
