//! A scene's rounds reduced to one row: each figure is the **median** over the rounds (taken
//! metric by metric), its min–max spread is kept beside it, and the rounds' own figures travel
//! with the result so that claims can be judged round by round ([`super::verdict`]).
//!
//! Why medians: rounds of different players are interleaved on a shared, noisy machine; one
//! slow moment hits one round of each, and the median of three or more rounds ignores it
//! where a mean would not. jkbenchmark kept the best round; that figure is kept too
//! (`tps_best`), for comparison with the published tables.

use serde::{Deserialize, Serialize};

use super::stats::RoundStats;

/// One round's headline figures.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct RoundFigures {
    /// Completed calls per second.
    pub tps: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
}

impl From<&RoundStats> for RoundFigures {
    fn from(s: &RoundStats) -> Self {
        RoundFigures {
            tps: s.tps,
            p50_ms: s.p50_ms,
            p99_ms: s.p99_ms,
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count); `None` when empty.
/// NaNs sort last.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// (min, max) of `values`; `None` when empty.
pub fn spread(values: &[f64]) -> Option<(f64, f64)> {
    let min = values.iter().copied().reduce(f64::min)?;
    let max = values.iter().copied().reduce(f64::max)?;
    Some((min, max))
}

/// The rounds as one [`RoundStats`]: every latency figure and the TPS is the median over the
/// rounds; counts (requests, succeeded) are the median round's (the round whose TPS is the
/// median — for an even count the upper of the two middle rounds — which also gives the
/// buckets); errors are the sum over all rounds, so an error in
/// any round shows. `None` when there are no rounds.
pub fn median_stats(rounds: &[RoundStats]) -> Option<RoundStats> {
    let pick = |f: fn(&RoundStats) -> f64| -> f64 {
        let v: Vec<f64> = rounds.iter().map(f).collect();
        median(&v).unwrap_or(0.0)
    };
    let mut by_tps: Vec<&RoundStats> = rounds.iter().collect();
    by_tps.sort_by(|a, b| a.tps.total_cmp(&b.tps));
    let middle = *by_tps.get(by_tps.len() / 2)?;
    let errors: u64 = rounds.iter().map(|r| r.errors).sum();
    let all: u64 = rounds.iter().map(|r| r.requests).sum();
    Some(RoundStats {
        requests: middle.requests,
        succeeded: middle.succeeded,
        errors,
        error_pct: if all > 0 {
            errors as f64 * 100.0 / all as f64
        } else {
            0.0
        },
        runtime_ms: pick(|r| r.runtime_ms),
        tps: pick(|r| r.tps),
        avg_ms: pick(|r| r.avg_ms),
        min_ms: pick(|r| r.min_ms),
        max_ms: pick(|r| r.max_ms),
        p50_ms: pick(|r| r.p50_ms),
        p90_ms: pick(|r| r.p90_ms),
        p99_ms: pick(|r| r.p99_ms),
        p999_ms: pick(|r| r.p999_ms),
        buckets: middle.buckets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(tps: f64, p50: f64, errors: u64) -> RoundStats {
        RoundStats {
            requests: tps as u64,
            succeeded: tps as u64 - errors,
            errors,
            error_pct: 0.0,
            runtime_ms: 1000.0,
            tps,
            avg_ms: p50,
            min_ms: 0.0,
            max_ms: p50 * 10.0,
            p50_ms: p50,
            p90_ms: p50,
            p99_ms: p50 * 2.0,
            p999_ms: p50 * 3.0,
            buckets: [tps as u64 - errors, 0, 0, 0, 0, 0, 0, 0],
        }
    }

    #[test]
    fn medians_are_taken_metric_by_metric() {
        let rounds = [
            round(100.0, 3.0, 0),
            round(300.0, 1.0, 1),
            round(200.0, 2.0, 0),
        ];
        let m = median_stats(&rounds).unwrap();
        assert_eq!(m.tps, 200.0);
        assert_eq!(m.p50_ms, 2.0);
        assert_eq!(m.requests, 200);
        assert_eq!(m.errors, 1);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(spread(&[2.0, 5.0, 1.0]), Some((1.0, 5.0)));
        assert!(median_stats(&[]).is_none());
    }
}
