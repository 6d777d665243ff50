//! What is frozen before the first run: the parameters, the run order, the
//! rules of the controllers, the analysis windows, the endpoints and their
//! definitions. `contract.json` is written read-only before anything runs,
//! and a resumed experiment must describe the same contract.

use std::time::Duration;

use harness::RunMeta;
use rand::{SeedableRng, rngs::StdRng, seq::SliceRandom};
use serde::{Deserialize, Serialize};

use crate::{
    PolicyKind,
    analysis::Windows,
    config::Config,
    controller::{SeedRule, TargetRule},
};

/// The seed's parameters, before scaling.
pub const RATE: f64 = 80.0;
pub const DURATION_S: f64 = 36.0;
pub const PLAN: &str = "10ms@0s,40ms@12s,10ms@24s";
pub const CAPACITY: usize = 32;

/// The file it is frozen in.
pub const CONTRACT: &str = "contract.json";

/// Everything fixed before the first run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contract {
    pub experiment: String,
    pub meta: RunMeta,
    pub blocks: usize,
    pub scale: f64,
    pub rate_per_s: f64,
    pub duration_s: f64,
    pub slots: usize,
    pub message_bytes: usize,
    pub plan: String,
    pub capacity: usize,
    pub streams: usize,
    pub workers: usize,
    pub policies: Vec<PolicyKind>,
    pub seed: u64,
    /// Block by block, the policies in the order they run.
    pub order: Vec<Vec<PolicyKind>>,
    pub adaptive: SeedRule,
    pub target: TargetRule,
    pub near_budget: String,
    pub windows: Windows,
    pub endpoints: Vec<String>,
    pub definitions: Vec<String>,
    pub transport: String,
    pub validity: String,
}

// ANCHOR: order
/// The run order: each block is every policy once, shuffled by one seeded
/// generator, so the order is random but the same for the same seed.
pub fn order(policies: &[PolicyKind], blocks: usize, seed: u64) -> Vec<Vec<PolicyKind>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..blocks)
        .map(|_| {
            let mut block = policies.to_vec();
            block.shuffle(&mut rng);
            block
        })
        .collect()
}
// ANCHOR_END: order

impl Contract {
    pub fn of(config: &Config) -> Contract {
        let scale = config.scale;
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        Contract {
            experiment: "gRPC Under Pressure, Part 2, replicated: fixed-32, fixed-8, adaptive (+ target)".into(),
            meta: RunMeta::now(),
            blocks: config.blocks,
            scale,
            rate_per_s: RATE / scale,
            duration_s: DURATION_S * scale,
            slots: loadgen::Schedule::constant(RATE / scale, Duration::from_secs_f64(DURATION_S * scale))
                .slots()
                .len(),
            message_bytes: config.message_bytes,
            plan: config.plan().to_string(),
            capacity: CAPACITY,
            streams: config.streams,
            workers: config.workers,
            policies: config.policies.clone(),
            seed: config.seed,
            order: order(&config.policies, config.blocks, config.seed),
            adaptive: SeedRule::seed(scale),
            target: TargetRule::new(config.target_ms, scale),
            near_budget: "Q + R >= B - 1 (pending work within one message of the budget)".into(),
            windows: Windows::seed(scale),
            endpoints: strings(&[
                "primary: pooled nearest-rank p95 of queue residence, messages enqueued in [12 s, 36 s)",
                "pooled p99 of the same cohort; pooled p95/p99 of the slowdown cohort [12 s, 24 s)",
                "reduction of pooled p95 vs fixed-32 and vs fixed-8, block-bootstrap 95% interval",
                "skipped slots; longest client send; completions/s over [0, 36 s) and its ratio to fixed-32",
                "idle-with-backlog fraction; budget trajectory; recovery delay (censored if none)",
            ]),
            definitions: strings(&[
                "time 0 is the plan's zero: the first call's arrival at the server",
                "scale: every time (schedule length, phases, service times, ticks, thresholds, windows) is multiplied by `scale` and the send rate divided by it; below 1, service times are waited out on a blocking thread (precise) instead of tokio's millisecond timer",
                "queue residence: enqueue to dequeue by the worker; excludes admission wait, client send, service",
                "nearest rank: the value at rank ceil(p/100 x n) of the sorted values, no interpolation",
                "pooled: all messages of all valid runs of a policy together, not an average of per-run values",
                "block bootstrap: resample whole blocks with replacement (seeded), recompute pooled p95s, 2.5th-97.5th percentile",
                "completions/s: worker service ends in [0, 36 s) / 36 s; ratio: mean over shared blocks / fixed-32's mean",
                "idle with backlog: time a worker was free while a message waited, / (36 s x workers)",
                "recovery baseline: the run's own p95 and completion rate over [0, 12 s)",
                "recovery: first 3 s window starting at 24 s + k x 0.2 s, ending by 36 s, with p95 <= baseline and rate >= 95% of baseline; delay = its end - 24 s; none: censored",
            ]),
            transport: "gRPC over TLS on loopback (the seed: plaintext); client in Rust (tonic), the seed's in Go".into(),
            validity: "valid: server ready (atomic marker) within 60 s, client and server exit 0, every call OK, the server processed messages".into(),
        }
    }

    /// The same contract, whenever it was written: everything but its `meta`.
    pub fn same_as(&self, other: &Contract) -> bool {
        Contract {
            meta: other.meta.clone(),
            ..self.clone()
        } == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_is_seeded_and_every_block_is_complete() {
        let p = [
            PolicyKind::Fixed32,
            PolicyKind::Fixed8,
            PolicyKind::Adaptive,
        ];
        let a = order(&p, 5, 12);
        assert_eq!(a, order(&p, 5, 12));
        assert_ne!(a, order(&p, 5, 13));
        for block in &a {
            let mut b = block.clone();
            b.sort();
            assert_eq!(b, p);
        }
    }
}
