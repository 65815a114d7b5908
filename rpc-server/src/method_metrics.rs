//! [`MethodMetrics`]: the counters of one method — calls, errors, summed latency and a
//! latency histogram — recorded with relaxed atomic adds on the call path. Each route owns
//! one ([`crate::router`]); [`crate::metrics`] reads them to render `/metrics`. A leaf on its
//! own so that the router and the renderer both depend on it and not on each other.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0,
];

/// Counters of one method.
#[derive(Debug, Default)]
pub struct MethodMetrics {
    calls: AtomicU64,
    errors: AtomicU64,
    cancelled: AtomicU64,
    sum_micros: AtomicU64,
    /// Non-cumulative counts per bucket; the last slot is +Inf.
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
}

impl MethodMetrics {
    /// Records one call.
    pub fn record(&self, elapsed: Duration, ok: bool) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        let secs = elapsed.as_secs_f64();
        let i = LATENCY_BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }

    /// Records a call its caller gave up on before the answer (a `Cancel`
    /// frame, a closed HTTP connection): it is not recorded as a call too.
    pub fn record_cancelled(&self) {
        self.cancelled.fetch_add(1, Ordering::Relaxed);
    }

    /// Calls cancelled by their caller.
    pub fn cancelled(&self) -> u64 {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// Calls recorded (successful or not).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Calls that ended in an error.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Calls in latency bucket `i` (not cumulative; `LATENCY_BUCKETS.len()` is +Inf, beyond it 0).
    pub fn bucket(&self, i: usize) -> u64 {
        self.buckets.get(i).map_or(0, |b| b.load(Ordering::Relaxed))
    }

    /// The summed latency of every recorded call, µs.
    pub fn sum_micros(&self) -> u64 {
        self.sum_micros.load(Ordering::Relaxed)
    }
}
