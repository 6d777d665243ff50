//! What the ramps say, arm by arm: plateaus and knees over repeats, the
//! capacity the CPU cost implies, per-unit costs, and p99 against offered
//! load. Pure functions of the records.

use serde::Serialize;

use crate::{
    config::Config,
    ramp::{KneeReason, PerUnit, Shape, Spread, StepResult, knee, plateau},
    records::RampRecord,
};

/// One ramp of one arm and shape.
#[derive(Debug, Clone, Serialize)]
pub struct RampResult {
    /// Which ramp, as `ramps.json` recorded it.
    #[serde(flatten)]
    pub ramp: RampRecord,
    pub plateau: f64,
    pub knee_offered: Option<f64>,
    pub knee_reason: Option<KneeReason>,
    pub steps: Vec<StepResult>,
}

impl RampResult {
    /// The step with the most goodput: the ramp's plateau.
    pub fn top(&self) -> Option<&StepResult> {
        self.steps
            .iter()
            .max_by(|a, b| a.goodput.total_cmp(&b.goodput))
    }

    /// Each ramp with its steps (the rows of `steps.csv` with its arm, shape
    /// and repeat), its plateau and its knee.
    pub fn assemble(records: &[RampRecord], steps: &[StepResult]) -> Vec<RampResult> {
        records
            .iter()
            .map(|r| {
                let mine: Vec<StepResult> = steps
                    .iter()
                    .filter(|s| s.arm == r.arm && s.shape == r.shape && s.repeat == r.repeat)
                    .cloned()
                    .collect();
                let knee = knee(&mine);
                RampResult {
                    ramp: r.clone(),
                    plateau: plateau(&mine),
                    knee_offered: knee.map(|(i, _)| mine[i].offered),
                    knee_reason: knee.map(|(_, reason)| reason),
                    steps: mine,
                }
            })
            .collect()
    }
}

/// The summary of one arm over its repeats.
#[derive(Debug, Clone, Serialize)]
pub struct ArmSummary {
    pub arm: String,
    pub unary_plateau: Spread,
    pub unary_knee: Spread,
    pub stream_plateau: Spread,
    pub stream_knee: Spread,
    /// Streamed messages/s over unary calls/s, per repeat.
    pub ratio: Spread,
    /// Units one core could answer at the plateau step's CPU cost per unit
    /// (1 s / CPU per unit): a capacity that does not depend on who else
    /// used the core, nor on whether the generator kept up.
    pub unary_cpu_capacity: Spread,
    pub stream_cpu_capacity: Spread,
    pub cpu_ratio: Spread,
    /// Server and generator CPU (fraction of one core) at the plateau step.
    pub unary_cpu_at_plateau: (Spread, Spread),
    pub stream_cpu_at_plateau: (Spread, Spread),
    pub unary_low: PerUnit,
    pub unary_high: PerUnit,
    pub stream_low: PerUnit,
    pub stream_high: PerUnit,
    /// The REST shapes the run ramped, in its order.
    pub rest: Vec<ShapeSummary>,
}

/// One shape of one arm over its repeats: what [`ArmSummary`] says of unary
/// calls and of streams, for a REST shape.
#[derive(Debug, Clone, Serialize)]
pub struct ShapeSummary {
    pub shape: Shape,
    pub plateau: Spread,
    pub knee: Spread,
    /// 1 s / server CPU per request at the plateau step.
    pub cpu_capacity: Spread,
    /// Server and generator CPU (fraction of one core) at the plateau step.
    pub cpu_at_plateau: (Spread, Spread),
    pub low: PerUnit,
    pub high: PerUnit,
}

/// The seed's figure: a 1-CPU grpc-java pod, ~2,060-2,140 unary calls/s
/// against ~15,000-16,000 streamed messages/s.
pub const SEED_RATIO: f64 = 7.5;

/// Per-unit costs at the lowest step, and at the step of highest goodput.
fn per_unit(ramps: &[&RampResult]) -> (PerUnit, PerUnit) {
    let median = |pick: &dyn Fn(&RampResult) -> Option<PerUnit>| {
        let v: Vec<PerUnit> = ramps.iter().filter_map(|r| pick(r)).collect();
        let m = |f: fn(&PerUnit) -> f64| Spread::of(v.iter().map(f)).median;
        PerUnit {
            cpu_us: m(|p| p.cpu_us),
            busy_us: m(|p| p.busy_us),
            context_switches: m(|p| p.context_switches),
            parks: m(|p| p.parks),
            spawned: m(|p| p.spawned),
        }
    };
    let low = median(&|r| r.steps.first().map(|s| s.per_unit()));
    let high = median(&|r| {
        r.steps
            .iter()
            .max_by(|a, b| a.goodput.total_cmp(&b.goodput))
            .map(|s| s.per_unit())
    });
    (low, high)
}

pub fn summarize(arm: &str, ramps: &[RampResult]) -> ArmSummary {
    let of = |shape: Shape| -> Vec<&RampResult> {
        ramps
            .iter()
            .filter(|r| r.ramp.arm == arm && r.ramp.shape == shape)
            .collect()
    };
    let (unary, stream) = (of(Shape::Unary), of(Shape::Stream));
    let ratio = unary.iter().filter_map(|u| {
        let s = stream.iter().find(|s| s.ramp.repeat == u.ramp.repeat)?;
        (u.plateau > 0.0).then(|| s.plateau / u.plateau)
    });
    let top = |r: &RampResult| -> Option<StepResult> { r.top().cloned() };
    let capacity = |ramps: &[&RampResult]| -> Vec<f64> {
        ramps
            .iter()
            .filter_map(|r| top(r))
            .map(|s| 1e6 / s.cpu_us_per_unit)
            .collect()
    };
    let cpus = |ramps: &[&RampResult]| {
        let tops: Vec<StepResult> = ramps.iter().filter_map(|r| top(r)).collect();
        (
            Spread::of(tops.iter().map(|s| s.server_cpu)),
            Spread::of(tops.iter().map(|s| s.client_cpu)),
        )
    };
    let cpu_ratio = unary.iter().filter_map(|u| {
        let s = stream.iter().find(|s| s.ramp.repeat == u.ramp.repeat)?;
        Some(top(u)?.cpu_us_per_unit / top(s)?.cpu_us_per_unit)
    });
    let (unary_low, unary_high) = per_unit(&unary);
    let (stream_low, stream_high) = per_unit(&stream);
    let rest = [Shape::RestH1, Shape::RestH2]
        .into_iter()
        .filter(|&shape| !of(shape).is_empty())
        .map(|shape| {
            let ramps = of(shape);
            let (low, high) = per_unit(&ramps);
            ShapeSummary {
                shape,
                plateau: Spread::of(ramps.iter().map(|r| r.plateau)),
                knee: Spread::of(ramps.iter().filter_map(|r| r.knee_offered)),
                cpu_capacity: Spread::of(capacity(&ramps)),
                cpu_at_plateau: cpus(&ramps),
                low,
                high,
            }
        })
        .collect();
    ArmSummary {
        arm: arm.to_string(),
        unary_plateau: Spread::of(unary.iter().map(|r| r.plateau)),
        unary_knee: Spread::of(unary.iter().filter_map(|r| r.knee_offered)),
        stream_plateau: Spread::of(stream.iter().map(|r| r.plateau)),
        stream_knee: Spread::of(stream.iter().filter_map(|r| r.knee_offered)),
        ratio: Spread::of(ratio),
        unary_cpu_capacity: Spread::of(capacity(&unary)),
        stream_cpu_capacity: Spread::of(capacity(&stream)),
        cpu_ratio: Spread::of(cpu_ratio),
        unary_cpu_at_plateau: cpus(&unary),
        stream_cpu_at_plateau: cpus(&stream),
        unary_low,
        unary_high,
        stream_low,
        stream_high,
        rest,
    }
}

/// One offered rate of one arm: p99 and goodput over repeats, and the share
/// of slots deferred or shed.
pub type Point = (f64, Spread, Spread, f64);

/// p99 (median over repeats) of every arm at every offered rate of one shape.
pub fn p99_curves(
    config: &Config,
    shape: Shape,
    ramps: &[RampResult],
) -> Vec<(String, Vec<Point>)> {
    config
        .arms
        .iter()
        .map(|arm| {
            let arm = arm.to_string();
            let mut rates: Vec<f64> = ramps
                .iter()
                .filter(|r| r.ramp.arm == arm && r.ramp.shape == shape)
                .flat_map(|r| r.steps.iter().map(|s| s.offered))
                .collect();
            rates.sort_by(f64::total_cmp);
            rates.dedup();
            let points = rates
                .into_iter()
                .map(|rate| {
                    let steps: Vec<&StepResult> = ramps
                        .iter()
                        .filter(|r| r.ramp.arm == arm && r.ramp.shape == shape)
                        .flat_map(|r| &r.steps)
                        .filter(|s| s.offered == rate)
                        .collect();
                    let deferred: u64 = steps.iter().map(|s| s.deferred + s.shed).sum();
                    let scheduled: u64 = steps.iter().map(|s| s.scheduled).sum();
                    (
                        rate,
                        Spread::of(steps.iter().map(|s| s.p99_ms)),
                        Spread::of(steps.iter().map(|s| s.goodput)),
                        100.0 * deferred as f64 / scheduled.max(1) as f64,
                    )
                })
                .collect();
            (arm, points)
        })
        .collect()
}
