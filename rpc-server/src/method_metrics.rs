//! [`MethodMetrics`]: the counters of one method — calls, errors, summed latency and a
//! latency histogram — recorded with relaxed atomic adds on the call path. Each route owns
//! one ([`crate::router`]); [`crate::metrics`] reads them to render `/metrics`. A leaf on its
//! own so that the router and the renderer both depend on it and not on each other.
//!
//! # Why the counters are sharded
//!
//! Every thread that runs calls of a method (each runtime thread in direct dispatch, each
//! worker in pool dispatch) records each of them: three atomic adds per call on lines the
//! other threads write too (`perf annotate` of `finish_call` at 10:100:1024: two thirds of
//! its time right after those adds). So a method's counters are kept once per
//! thread shard (`shard.rs`), and a read sums the copies.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::shard::{self, SHARDS};

/// Upper bounds of the latency buckets, in seconds.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0,
];

/// Counters of one method.
#[derive(Debug, Default)]
pub struct MethodMetrics {
    shards: Box<[Shard; SHARDS]>,
    /// Rare (a caller's `Cancel`): one counter.
    cancelled: AtomicU64,
}

/// One thread's copy of a method's counters: two cache lines of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    calls: AtomicU64,
    errors: AtomicU64,
    sum_micros: AtomicU64,
    /// Non-cumulative counts per bucket; the last slot is +Inf.
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
}

impl MethodMetrics {
    /// Records one call. Inline: once a call, from whichever code unit the
    /// build put the call paths in.
    #[inline]
    pub fn record(&self, elapsed: Duration, ok: bool) {
        let shard = &self.shards[shard::index()];
        shard.calls.fetch_add(1, Ordering::Relaxed);
        if !ok {
            shard.errors.fetch_add(1, Ordering::Relaxed);
        }
        let secs = elapsed.as_secs_f64();
        let i = LATENCY_BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(LATENCY_BUCKETS.len());
        shard.buckets[i].fetch_add(1, Ordering::Relaxed);
        shard
            .sum_micros
            .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }

    /// One counter, summed over the shards.
    fn sum(&self, counter: impl Fn(&Shard) -> &AtomicU64) -> u64 {
        self.shards
            .iter()
            .map(|shard| counter(shard).load(Ordering::Relaxed))
            .sum()
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
        self.sum(|shard| &shard.calls)
    }

    /// Calls that ended in an error.
    pub fn errors(&self) -> u64 {
        self.sum(|shard| &shard.errors)
    }

    /// Calls in latency bucket `i` (not cumulative; `LATENCY_BUCKETS.len()` is +Inf, beyond it 0).
    pub fn bucket(&self, i: usize) -> u64 {
        if i > LATENCY_BUCKETS.len() {
            return 0;
        }
        self.sum(|shard| &shard.buckets[i])
    }

    /// The summed latency of every recorded call, µs.
    pub fn sum_micros(&self) -> u64 {
        self.sum(|shard| &shard.sum_micros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_recorded_on_many_threads_add_up() {
        let metrics = MethodMetrics::default();
        std::thread::scope(|s| {
            for t in 0..(2 * SHARDS as u64) {
                let metrics = &metrics;
                s.spawn(move || {
                    for _ in 0..100 {
                        metrics.record(Duration::from_micros(50), t % 2 == 0);
                    }
                    metrics.record(Duration::from_secs(2), true);
                });
            }
        });
        let threads = 2 * SHARDS as u64;
        assert_eq!(metrics.calls(), threads * 101);
        assert_eq!(metrics.errors(), threads / 2 * 100);
        assert_eq!(
            metrics.bucket(0),
            threads * 100,
            "50 µs is in the first bucket"
        );
        assert_eq!(
            metrics.bucket(LATENCY_BUCKETS.len()),
            threads,
            "2 s is past the last"
        );
        assert_eq!(metrics.bucket(LATENCY_BUCKETS.len() + 1), 0);
        assert_eq!(metrics.sum_micros(), threads * (100 * 50 + 2_000_000));
    }
}
