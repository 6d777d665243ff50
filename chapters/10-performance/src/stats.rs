//! Percentiles and spreads, computed one way for every chapter that measures.
//!
//! There are two kinds of percentile because there are two sizes of data: when
//! every sample is kept (hundreds to thousands of calls), the nearest rank
//! gives exact percentiles, each a sample that really happened. When there are
//! millions (an open-loop load generator's sends), an HDR histogram holds them
//! in fixed memory and answers within 0.1%.
//!
//! - [`nearest_rank`] and [`Summary`]: exact, from every sample;
//! - [`median`] and [`Spread`]: what repeats of one measurement say together;
//! - [`Percentiles`]: from an HDR histogram, for the load generators of
//!   chapter 11 onwards.

use std::{fmt, time::Duration};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

// ANCHOR: summary
// ANCHOR: nearest_rank
/// The nearest-rank percentile of values sorted in ascending order: the value
/// at rank `ceil(p/100 × n)`, counted from 1. p99 of 200 samples is the 198th
/// smallest, a sample that really happened, never an interpolation between two.
pub fn nearest_rank_sorted<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    Some(sorted[((p / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1])
}
// ANCHOR_END: nearest_rank

/// What a list of latencies says, in microseconds, percentiles by the nearest
/// rank.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub p50: u64,
    pub p95: u64,
    pub p99: u64,
    pub mean: f64,
    pub max: u64,
}

impl Summary {
    pub fn of(samples: &[u64]) -> Option<Summary> {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let rank = |p: f64| nearest_rank_sorted(&sorted, p);
        let n = sorted.len();
        Some(Summary {
            n,
            p50: rank(50.0)?,
            p95: rank(95.0)?,
            p99: rank(99.0)?,
            mean: sorted.iter().sum::<u64>() as f64 / n as f64,
            max: *sorted.last()?,
        })
    }
}
// ANCHOR_END: summary

/// The nearest-rank percentile of values in any order; `None` when there are
/// none.
pub fn nearest_rank(values: &[f64], p: f64) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    nearest_rank_sorted(&sorted, p)
}

/// The median; the mean of the middle two for an even count.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    median_sorted(&sorted)
}

fn median_sorted(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// Median, minimum and maximum of some repeats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Spread {
    /// Values that are not finite (a rate over no time, a ratio to zero) are
    /// left out rather than allowed to become the maximum.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Spread {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        match median_sorted(&v) {
            None => Spread::default(),
            Some(median) => Spread {
                median,
                min: v[0],
                max: v[v.len() - 1],
                n: v.len(),
            },
        }
    }
}

impl fmt::Display for Spread {
    /// `15200 (14800–15900, n=3)`; precision follows the size of the number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.n == 0 {
            return write!(f, "–");
        }
        let p = if self.median.abs() >= 100.0 {
            0
        } else if self.median.abs() >= 10.0 {
            1
        } else {
            2
        };
        if self.n == 1 {
            return write!(f, "{:.p$}", self.median);
        }
        write!(
            f,
            "{:.p$} ({:.p$}–{:.p$}, n={})",
            self.median, self.min, self.max, self.n
        )
    }
}

/// Percentiles of one set of durations, in milliseconds, from an HDR histogram.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Percentiles {
    /// Recorded in microseconds with 3 significant digits: a percentile is
    /// within 0.1% of the exact value, whatever the range.
    pub fn of(durations: impl IntoIterator<Item = Duration>) -> Percentiles {
        let mut h = Histogram::<u64>::new(3).expect("3 significant digits is valid");
        let mut max = Duration::ZERO;
        for d in durations {
            h.record(d.as_micros().max(1) as u64)
                .expect("auto-resizing histogram");
            max = max.max(d);
        }
        if h.is_empty() {
            return Percentiles::default();
        }
        let ms = |us: u64| us as f64 / 1e3;
        Percentiles {
            count: h.len(),
            p50_ms: ms(h.value_at_quantile(0.50)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            // The exact maximum, not its histogram bucket.
            max_ms: max.as_secs_f64() * 1e3,
        }
    }
}

impl fmt::Display for Percentiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.count == 0 {
            return write!(f, "none");
        }
        write!(
            f,
            "p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (n={})",
            self.p50_ms, self.p99_ms, self.max_ms, self.count
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_uses_nearest_rank_percentiles() {
        let samples: Vec<u64> = (1..=100).rev().collect();
        let s = Summary::of(&samples).unwrap();
        assert_eq!((s.n, s.p50, s.p95, s.p99, s.max), (100, 50, 95, 99, 100));
        assert_eq!(s.mean, 50.5);

        let s = Summary::of(&[7]).unwrap();
        assert_eq!((s.p50, s.p99, s.max), (7, 7, 7));

        // 200 samples: p99 is the 198th smallest, a sample that happened.
        let samples: Vec<u64> = (1..=200).map(|v| v * 10).collect();
        assert_eq!(Summary::of(&samples).unwrap().p99, 1980);
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn one_outlier_moves_the_mean_and_max_not_the_median() {
        let mut samples = vec![100u64; 99];
        samples.push(10_000);
        let s = Summary::of(&samples).unwrap();
        assert_eq!((s.p50, s.p95, s.p99, s.max), (100, 100, 100, 10_000));
        assert_eq!(s.mean, 199.0);
    }

    #[test]
    fn nearest_rank_picks_an_observed_value() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        // rank ceil(0.95 x 20) = 19 -> 19; ceil(0.99 x 20) = 20 -> 20.
        assert_eq!(nearest_rank(&v, 95.0), Some(19.0));
        assert_eq!(nearest_rank(&v, 99.0), Some(20.0));
        assert_eq!(nearest_rank(&v, 50.0), Some(10.0));
        // Order does not matter; one value is every percentile.
        assert_eq!(nearest_rank(&[3.0, 1.0, 2.0], 95.0), Some(3.0));
        assert_eq!(nearest_rank(&[7.0], 1.0), Some(7.0));
        assert_eq!(nearest_rank(&[], 95.0), None);
        // 101 values: rank ceil(95.95) = 96.
        let v: Vec<f64> = (0..=100).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 95.0), Some(95.0));
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn spreads_have_a_median_and_a_range() {
        let s = Spread::of([3.0, 1.0, 2.0, f64::NAN]);
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Spread::of([1.0, 2.0]).median, 1.5);
        assert_eq!(
            Spread::of([15234.4, 14800.0, 15900.0]).to_string(),
            "15234 (14800–15900, n=3)"
        );
        assert_eq!(Spread::of([]).to_string(), "–");
    }

    #[test]
    fn histogram_percentiles_are_within_a_tenth_of_a_percent_and_the_max_is_exact() {
        // 1 µs to 10 ms, one of each: the exact p50 is 5000 µs, p99 9900 µs.
        let p = Percentiles::of((1..=10_000).map(Duration::from_micros));
        assert_eq!(p.count, 10_000);
        assert!((p.p50_ms / 5.0 - 1.0).abs() <= 0.001, "{p:?}");
        assert!((p.p99_ms / 9.9 - 1.0).abs() <= 0.001, "{p:?}");
        assert_eq!(p.max_ms, 10.0);

        // The maximum is the duration itself, not the top of its bucket.
        let p = Percentiles::of([Duration::from_micros(10), Duration::from_nanos(12_345_678)]);
        assert!((p.max_ms - 12.345678).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn histogram_percentiles_print_in_milliseconds_or_say_none() {
        // Below a microsecond still counts, as one.
        let p = Percentiles::of([Duration::ZERO, Duration::from_micros(2_000)]);
        assert_eq!(p.count, 2);
        assert_eq!(p.p50_ms, 0.001);
        assert_eq!(
            p.to_string(),
            "p50 0.001 ms, p99 2.000 ms, max 2.000 ms (n=2)"
        );
        assert_eq!(Percentiles::of([]), Percentiles::default());
        assert_eq!(Percentiles::default().to_string(), "none");
    }
}
