//! Reserve before receive, as a property: whatever the service times, the
//! physical capacity K, the budget B and the changes made to B during the
//! call, the handler never has more than K messages pending, and never more
//! than B except for work it admitted before B was lowered (a lower budget
//! stops new admissions; it never revokes old ones).
//!
//! The gate, the handler and the worker are the real code behind a real tonic
//! server; the clock is Tokio's paused one, so a case takes no real waiting.

mod common;

use std::{sync::Arc, time::Duration};

use ingest::service::Policy;
use loadgen::{Counters, Schedule, Timer, ingest::ingest};
use proptest::prelude::*;
use tokio::time::Instant;

#[derive(Debug, Clone)]
struct Case {
    capacity: usize,
    budget: usize,
    /// (service time, phase length), both in ms.
    phases: Vec<(u64, u64)>,
    rate: f64,
    duration_ms: u64,
    message_bytes: usize,
    /// (when, new budget): budgets up to 2K are asked for on purpose.
    changes: Vec<(u64, usize)>,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=12)
        .prop_flat_map(|capacity| {
            (
                Just(capacity),
                1..=capacity,
                prop::collection::vec((1u64..=40, 100u64..=800), 1..=3),
                10.0f64..200.0,
                300u64..=1500,
                prop::sample::select(vec![64usize, 1024, 8192]),
                prop::collection::vec((0u64..=1500, 1..=2 * capacity), 0..=6),
            )
        })
        .prop_map(
            |(capacity, budget, phases, rate, duration_ms, message_bytes, mut changes)| {
                changes.sort();
                Case {
                    capacity,
                    budget,
                    phases,
                    rate,
                    duration_ms,
                    message_bytes,
                    changes,
                }
            },
        )
}

fn plan(phases: &[(u64, u64)]) -> String {
    let mut from = 0;
    let mut parts = Vec::new();
    for (service, length) in phases {
        parts.push(format!("{service}ms@{from}ms"));
        from += length;
    }
    parts.join(",")
}

/// What the watcher saw, for the assertions after the run.
#[derive(Debug, Default)]
struct Seen {
    samples: usize,
    max_pending: usize,
}

fn run(case: &Case) -> Result<(), TestCaseError> {
    common::paused_runtime().block_on(async {
        let policy = Policy::Reserve {
            capacity: case.capacity,
            budget: case.budget,
        };
        let (ingestor, channel) = common::start(policy, &plan(&case.phases)).await;
        let gate = ingestor
            .gate()
            .expect("the reserve policy has a gate")
            .clone();
        let slots = Schedule::constant(case.rate, Duration::from_millis(case.duration_ms)).slots();
        let counters = Arc::new(Counters::default());

        // The watcher: every virtual millisecond, applies the budget changes
        // that are due and checks the invariants against what it has seen.
        let watcher = {
            let ingestor = ingestor.clone();
            let gate = gate.clone();
            let changes = case.changes.clone();
            let capacity = case.capacity;
            tokio::spawn(async move {
                let start = Instant::now();
                let mut changes = changes.into_iter().peekable();
                // The most that may be pending now: B, or more while work
                // admitted before a decrease is still pending.
                let mut allowance = gate.budget();
                let mut seen = Seen::default();
                let mut tick = tokio::time::interval(Duration::from_millis(1));
                loop {
                    tick.tick().await;
                    let now = start.elapsed();
                    while let Some(&(at, budget)) = changes.peek() {
                        if Duration::from_millis(at) > now {
                            break;
                        }
                        changes.next();
                        gate.set_budget(budget, "property test");
                        allowance = allowance.max(gate.budget());
                    }
                    let s = ingestor.sample_now();
                    let budget = gate.budget();
                    seen.samples += 1;
                    seen.max_pending = seen.max_pending.max(s.pending);
                    if s.pending > capacity {
                        return Err(format!("{} pending > K {capacity} at {now:?}", s.pending));
                    }
                    if budget > capacity {
                        return Err(format!("budget {budget} > K {capacity}"));
                    }
                    if s.pending > allowance {
                        return Err(format!(
                            "{} pending > {allowance} allowed (B {budget}) at {now:?}",
                            s.pending
                        ));
                    }
                    // Every queued message holds a reservation: the handler
                    // reserved before it read the message.
                    if s.queued > s.pending {
                        return Err(format!("{} queued > {} pending", s.queued, s.pending));
                    }
                    allowance = budget.max(allowance.min(s.pending));
                    if ingestor.calls_done.borrow().eq(&1) {
                        return Ok(seen);
                    }
                }
            })
        };

        let run = tokio::time::timeout(
            Duration::from_secs(600),
            ingest(
                channel,
                &slots,
                Timer::Tokio,
                case.message_bytes,
                7,
                &counters,
                None,
            ),
        )
        .await
        .map_err(|_| TestCaseError::fail("the call never ended"))?;
        let seen = tokio::time::timeout(Duration::from_secs(10), watcher)
            .await
            .map_err(|_| TestCaseError::fail("the watcher never saw the call end"))?
            .expect("watcher task")
            .map_err(TestCaseError::fail)?;

        let reply = run
            .reply
            .map_err(|s| TestCaseError::fail(format!("call failed: {s:?}")))?;
        let sent = run.records.iter().filter(|r| r.started.is_some()).count() as u64;
        prop_assert_eq!(reply.received, sent, "every message sent was received");
        prop_assert_eq!(reply.processed, reply.received);
        prop_assert_eq!(gate.pending(), 0, "nothing pending after the call");
        prop_assert_eq!(ingestor.recorder().messages().len() as u64, sent);
        prop_assert!(seen.samples > 0);
        prop_assert!(seen.max_pending <= case.capacity);
        ingestor.stop().await;
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn pending_stays_within_k_and_within_b_unless_admitted_before_a_decrease(case in case()) {
        run(&case)?;
    }
}

/// One hand-picked case that surely exercises a decrease with a backlog: B
/// goes from K = 8 to 2 while the worker is slow and the queue full.
#[test]
fn lowering_the_budget_under_a_full_queue_drains_before_admitting_again() {
    run(&Case {
        capacity: 8,
        budget: 8,
        phases: vec![(50, 5_000)],
        rate: 100.0,
        duration_ms: 1_500,
        message_bytes: 1024,
        changes: vec![(500, 2), (1_200, 16)],
    })
    .unwrap();
}

/// The wait for room is spent before reading: a handler held back by the
/// budget shows it as admission wait on the messages it then takes.
#[test]
fn admission_wait_is_recorded_when_the_budget_holds_the_handler_back() {
    common::paused_runtime().block_on(async {
        let policy = Policy::Reserve {
            capacity: 2,
            budget: 2,
        };
        let (ingestor, channel) = common::start(policy, "40ms@0s").await;
        let slots = Schedule::constant(100.0, Duration::from_millis(500)).slots();
        let run = common::call(channel, &slots, 256).await;
        assert!(run.reply.is_ok(), "{:?}", run.reply);
        let rows = ingestor.recorder().messages();
        assert!(
            rows.iter()
                .any(|r| r.admission_wait >= Duration::from_millis(10)),
            "no message waited for admission"
        );
        ingestor.stop().await;
    });
}
