//! Latency and throughput statistics for one benchmark round.
//!
//! A benchmark round is driven by many callers (one per unit of concurrency). They record
//! into one [`LatencyRecorder`] per round, each through a [`BatchedRecorder`] that takes the
//! recorder's lock once per 128 calls, so that recording a call is an append to the caller's
//! own small buffer; when the round ends the runner turns the recorder plus the round's
//! wall-clock runtime into a [`RoundStats`].
//!
//! The recorder keeps two views of the same samples:
//! - an HDR histogram (microsecond resolution, 3 significant digits, auto-resizing) for
//!   percentiles, which are inherently approximate at that precision (±0.1 %);
//! - exact counters — count, sum, min, max and jkbenchmark's eight latency buckets — because
//!   those numbers are printed and compared as exact values, and bucket boundaries
//!   (1 ms, 5 ms, …) must not be blurred by histogram rounding.
//!
//! **Errors are counted but not put in the latency histogram** (nor in min/max/avg or the
//! buckets). jkbenchmark only measured the latency of successful calls, and a failed call's
//! latency is usually either tiny (refused at once) or the timeout (100 s in the jkrpc
//! benchmark) — mixing those in would make the latency numbers describe the failure mode
//! instead of the service. The error count shows up in `errors` / `error_pct` and in TPS.

use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// Number of jkbenchmark latency buckets.
pub const BUCKET_COUNT: usize = 8;

/// Inclusive upper bounds (in milliseconds) of the first seven buckets; the eighth bucket
/// holds everything above 1000 ms.
pub const BUCKET_UPPER_MS: [u64; BUCKET_COUNT - 1] = [1, 5, 10, 50, 100, 500, 1000];

/// Human-readable labels of the buckets, in order: `[0,1]`, `(1,5]`, …, `>1000` (ms).
pub const BUCKET_LABELS: [&str; BUCKET_COUNT] = [
    "[0,1]",
    "(1,5]",
    "(5,10]",
    "(10,50]",
    "(50,100]",
    "(100,500]",
    "(500,1000]",
    ">1000",
];

/// Largest value the HDR histogram can auto-resize to.
const HDR_MAX_US: u64 = (i64::MAX / 2) as u64;

/// Index of the jkbenchmark bucket a latency falls into.
///
/// Boundaries are compared on the exact [`Duration`] (nanoseconds), upper bounds
/// inclusive: exactly 1 ms is in `[0,1]`, 1 ms + 1 ns is in `(1,5]`, exactly 1000 ms is in
/// `(500,1000]`.
pub fn bucket_index(latency: Duration) -> usize {
    let nanos = latency.as_nanos();
    BUCKET_UPPER_MS
        .iter()
        .position(|&ms| nanos <= u128::from(ms) * 1_000_000)
        .unwrap_or(BUCKET_COUNT - 1)
}

/// Records call latencies of one worker (or of a whole round, after merging).
///
/// Successful calls go into an HDR histogram (µs, 3 significant digits) and into exact
/// count/sum/min/max/bucket counters; failed calls are only counted (see the module docs).
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    succeeded: u64,
    errors: u64,
    sum_nanos: u128,
    min: Option<Duration>,
    max: Duration,
    buckets: [u64; BUCKET_COUNT],
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        // 3 significant digits is always a valid precision (hdrhistogram accepts 0..=5),
        // so this cannot fail.
        let hist = Histogram::<u64>::new(3).expect("3 significant digits is a valid precision");
        Self {
            hist,
            succeeded: 0,
            errors: 0,
            sum_nanos: 0,
            min: None,
            max: Duration::ZERO,
            buckets: [0; BUCKET_COUNT],
        }
    }

    /// Records the latency of a successful call.
    pub fn record_ok(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .min(HDR_MAX_US);
        if self.hist.record(us).is_err() {
            self.hist.saturating_record(us);
        }
        self.succeeded += 1;
        self.sum_nanos += latency.as_nanos();
        self.min = Some(self.min.map_or(latency, |m| m.min(latency)));
        self.max = self.max.max(latency);
        self.buckets[bucket_index(latency)] += 1;
    }

    /// Records a failed call. Only the error count changes: failed calls are deliberately
    /// kept out of the latency histogram, min/max/avg and the buckets.
    pub fn record_err(&mut self, _latency: Duration) {
        self.errors += 1;
    }

    /// Adds every sample of `other` into `self` (e.g. per-worker recorders into one).
    pub fn merge(&mut self, other: &Self) {
        if self.hist.add(&other.hist).is_err() {
            // Only possible if auto-resize could not cover a value; fall back to
            // re-recording bucket by bucket with clamping so no count is lost.
            for v in other.hist.iter_recorded() {
                self.hist
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
        self.succeeded += other.succeeded;
        self.errors += other.errors;
        self.sum_nanos += other.sum_nanos;
        self.min = match (self.min, other.min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.max = self.max.max(other.max);
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *mine += theirs;
        }
    }

    /// Number of successful calls recorded.
    pub fn succeeded(&self) -> u64 {
        self.succeeded
    }

    /// Number of failed calls recorded.
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// All calls recorded (succeeded + errors).
    pub fn total(&self) -> u64 {
        self.succeeded + self.errors
    }

    /// Exact smallest successful latency, if any call succeeded.
    pub fn min(&self) -> Option<Duration> {
        self.min
    }

    /// Exact largest successful latency (zero if none).
    pub fn max(&self) -> Duration {
        self.max
    }

    /// Exact mean successful latency (zero if none).
    pub fn mean(&self) -> Duration {
        if self.succeeded == 0 {
            return Duration::ZERO;
        }
        let nanos = self.sum_nanos / u128::from(self.succeeded);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Exact per-bucket counts of successful calls (see [`BUCKET_LABELS`]).
    pub fn buckets(&self) -> [u64; BUCKET_COUNT] {
        self.buckets
    }

    /// Latency at `quantile` (0.0..=1.0) in milliseconds, within HDR precision (±0.1 %),
    /// clamped to the exact min/max. Zero when nothing succeeded.
    pub fn quantile_ms(&self, quantile: f64) -> f64 {
        if self.succeeded == 0 {
            return 0.0;
        }
        let us = self.hist.value_at_quantile(quantile) as f64;
        let ms = us / 1000.0;
        let min = duration_ms(self.min.unwrap_or(Duration::ZERO));
        let max = duration_ms(self.max);
        ms.clamp(min, max)
    }

    /// The underlying HDR histogram (successful latencies in microseconds).
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }
}

/// Latencies a [`BatchedRecorder`] keeps before folding them into the round's recorder.
const BATCH: usize = 128;

/// The recorder every caller of a round folds its batches into.
pub type SharedRecorder = Arc<Mutex<LatencyRecorder>>;

/// One caller's way into its round's [`SharedRecorder`], a batch at a time.
///
/// A [`LatencyRecorder`] is tens of KiB (the HDR histogram's counts). One per caller, a
/// thousand callers' recorders were tens of MiB, out of every cache: recording a latency cost
/// the client a cache miss or more per call (`hdrhistogram`'s `record_n_inner` was 8 % of the
/// client's samples at 1000 callers, 4 % at 100), and those misses evicted the framework's own
/// per-connection state — the harness measuring its own memory, growing with the caller
/// count. So every caller of a round records into one recorder, which stays in the cache:
/// a call appends its latency to the caller's small buffer, and every `BATCH` (128) calls the
/// batch goes into the shared recorder under its lock, taken once per batch (uncontended in
/// practice: a couple of microseconds per 128 calls). The figures are the same: every latency
/// is recorded exactly, only later.
#[derive(Debug)]
pub struct BatchedRecorder {
    into: SharedRecorder,
    /// Successful latencies not yet recorded, in nanoseconds.
    batch: Vec<u64>,
    /// Failed calls not yet counted.
    errors: u64,
}

impl BatchedRecorder {
    /// A caller's recorder, folding into `into`.
    pub fn new(into: &SharedRecorder) -> Self {
        BatchedRecorder {
            into: into.clone(),
            batch: Vec::with_capacity(BATCH),
            errors: 0,
        }
    }

    /// Records the latency of a successful call (into the batch); true when the batch was
    /// full and went into the shared recorder now.
    pub fn record_ok(&mut self, latency: Duration) -> bool {
        self.batch
            .push(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
        let full = self.batch.len() == BATCH;
        if full {
            self.flush();
        }
        full
    }

    /// Records a failed call (only counted, as [`LatencyRecorder::record_err`]).
    pub fn record_err(&mut self, _latency: Duration) {
        self.errors += 1;
    }

    /// Folds what is left into the shared recorder.
    pub fn finish(mut self) {
        self.flush();
    }

    fn flush(&mut self) {
        let mut into = self.into.lock();
        for nanos in self.batch.drain(..) {
            into.record_ok(Duration::from_nanos(nanos));
        }
        into.errors += std::mem::take(&mut self.errors);
    }
}

/// A duration in fractional milliseconds.
pub fn duration_ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Rounds to 6 decimals (1 ns for millisecond values). A value with at most ~15
/// significant digits prints short and is re-read bit-exactly even by serde_json's default
/// (fast, not always correctly rounded) float parser, so results survive a JSON round trip.
fn round6(v: f64) -> f64 {
    let scaled = v * 1e6;
    if scaled.is_finite() && scaled.abs() < 9.0e15 {
        scaled.round() / 1e6
    } else {
        v
    }
}

/// Summary of one benchmark round: counts, throughput, latency and its distribution.
///
/// All latency fields describe successful calls only (see the module docs); times are in
/// milliseconds. `tps` is **all** completed requests (succeeded + errors) divided by the
/// round's wall-clock runtime — jkbenchmark divided its request count by the runtime, and
/// a failing call still occupied the client and the server. The success-only rate is
/// [`RoundStats::success_tps`]. Floating-point fields are rounded to 6 decimals so they
/// round-trip exactly through JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundStats {
    /// Completed requests (succeeded + errors).
    pub requests: u64,
    /// Successful requests.
    pub succeeded: u64,
    /// Failed requests.
    pub errors: u64,
    /// `errors / requests * 100` (0 when there were no requests).
    pub error_pct: f64,
    /// Wall-clock runtime of the round in milliseconds.
    pub runtime_ms: f64,
    /// `requests / runtime` in requests per second (0 when runtime is 0).
    pub tps: f64,
    /// Exact mean successful latency.
    pub avg_ms: f64,
    /// Exact minimum successful latency.
    pub min_ms: f64,
    /// Exact maximum successful latency.
    pub max_ms: f64,
    /// Median latency (HDR precision).
    pub p50_ms: f64,
    /// 90th percentile latency (HDR precision).
    pub p90_ms: f64,
    /// 99th percentile latency (HDR precision).
    pub p99_ms: f64,
    /// 99.9th percentile latency (HDR precision).
    pub p999_ms: f64,
    /// Exact counts of successful calls per jkbenchmark bucket (see [`BUCKET_LABELS`]);
    /// they sum to `succeeded`.
    pub buckets: [u64; BUCKET_COUNT],
}

impl RoundStats {
    /// Computes the statistics of a (merged) recorder over a round that took `runtime`.
    pub fn from_recorder(recorder: &LatencyRecorder, runtime: Duration) -> Self {
        let requests = recorder.total();
        let runtime_ms = duration_ms(runtime);
        let secs = runtime.as_secs_f64();
        let tps = if secs > 0.0 {
            requests as f64 / secs
        } else {
            0.0
        };
        let error_pct = if requests > 0 {
            recorder.errors() as f64 * 100.0 / requests as f64
        } else {
            0.0
        };
        Self {
            requests,
            succeeded: recorder.succeeded(),
            errors: recorder.errors(),
            error_pct: round6(error_pct),
            runtime_ms: round6(runtime_ms),
            tps: round6(tps),
            avg_ms: round6(duration_ms(recorder.mean())),
            min_ms: round6(duration_ms(recorder.min().unwrap_or(Duration::ZERO))),
            max_ms: round6(duration_ms(recorder.max())),
            p50_ms: round6(recorder.quantile_ms(0.50)),
            p90_ms: round6(recorder.quantile_ms(0.90)),
            p99_ms: round6(recorder.quantile_ms(0.99)),
            p999_ms: round6(recorder.quantile_ms(0.999)),
            buckets: recorder.buckets(),
        }
    }

    /// Successful requests per second (`succeeded / runtime`).
    pub fn success_tps(&self) -> f64 {
        if self.runtime_ms > 0.0 {
            self.succeeded as f64 * 1000.0 / self.runtime_ms
        } else {
            0.0
        }
    }

    /// Share of successful calls in bucket `index`, in percent (0 when nothing succeeded).
    pub fn bucket_pct(&self, index: usize) -> f64 {
        let count = self.buckets.get(index).copied().unwrap_or(0);
        if self.succeeded == 0 {
            0.0
        } else {
            count as f64 * 100.0 / self.succeeded as f64
        }
    }

    /// `succeeded / requests * 100` (0 when there were no requests).
    pub fn success_pct(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.succeeded as f64 * 100.0 / self.requests as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch says when it went into the round's recorder (a sync caller restarts its clock
    /// then): on the latency that filled it, and only then.
    #[test]
    fn a_batch_says_when_it_was_folded_into_the_round() {
        let shared = SharedRecorder::default();
        let mut rec = BatchedRecorder::new(&shared);
        let flushes: Vec<usize> = (1..=300)
            .filter(|_| rec.record_ok(Duration::from_micros(100)))
            .collect();
        assert_eq!(flushes.len(), 2, "one flush per 128 latencies");
        rec.finish();
        assert_eq!(shared.lock().succeeded(), 300);
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn close(actual: f64, expected: f64) -> bool {
        // HDR with 3 significant digits: relative error below 0.1 %.
        (actual - expected).abs() <= expected.abs() * 0.001 + 1e-9
    }

    #[test]
    fn a_batched_recorder_records_every_latency_as_the_plain_one() {
        let mut plain = LatencyRecorder::new();
        let shared = SharedRecorder::default();
        let mut batched = BatchedRecorder::new(&shared);
        // Not a multiple of the batch: the last, partial batch counts too.
        for i in 0..(3 * BATCH as u64 + 17) {
            let latency = Duration::from_nanos(1 + i * 7_919_993 % 40_000_000);
            if i % 50 == 49 {
                plain.record_err(latency);
                batched.record_err(latency);
            } else {
                plain.record_ok(latency);
                batched.record_ok(latency);
            }
        }
        batched.finish();
        let batched = shared.lock();
        assert_same_figures(&batched, &plain);
        assert!(batched.succeeded() > 3 * BATCH as u64);
    }

    /// Every statistic of `recorded` equals the plain recorder's.
    fn assert_same_figures(recorded: &LatencyRecorder, plain: &LatencyRecorder) {
        assert_eq!(recorded.succeeded(), plain.succeeded());
        assert_eq!(recorded.errors(), plain.errors());
        assert_eq!(recorded.min(), plain.min());
        assert_eq!(recorded.max(), plain.max());
        assert_eq!(recorded.mean(), plain.mean());
        assert_eq!(recorded.buckets(), plain.buckets());
        assert_eq!(recorded.histogram(), plain.histogram());
    }

    #[test]
    fn callers_on_two_threads_share_one_recorder_and_lose_nothing() {
        let shared = SharedRecorder::default();
        let latency = |caller: u64, i: u64| Duration::from_nanos(1 + (caller * 1_000 + i) * 37_117);
        let callers: Vec<_> = (0..2u64)
            .map(|caller| {
                let mut rec = BatchedRecorder::new(&shared);
                std::thread::spawn(move || {
                    for i in 0..(5 * BATCH as u64 + caller) {
                        if i % 100 == 99 {
                            rec.record_err(latency(caller, i));
                        } else {
                            rec.record_ok(latency(caller, i));
                        }
                    }
                    rec.finish();
                })
            })
            .collect();
        for caller in callers {
            caller.join().expect("a recording thread panicked");
        }
        let mut plain = LatencyRecorder::new();
        for caller in 0..2u64 {
            for i in 0..(5 * BATCH as u64 + caller) {
                match i % 100 == 99 {
                    true => plain.record_err(latency(caller, i)),
                    false => plain.record_ok(latency(caller, i)),
                }
            }
        }
        assert_same_figures(&shared.lock(), &plain);
    }

    #[test]
    fn bucket_boundaries_are_inclusive_upper_bounds() {
        assert_eq!(bucket_index(Duration::ZERO), 0);
        assert_eq!(bucket_index(ms(1)), 0);
        assert_eq!(bucket_index(ms(1) + Duration::from_nanos(1)), 1);
        assert_eq!(bucket_index(ms(5)), 1);
        assert_eq!(bucket_index(Duration::from_micros(5_001)), 2);
        assert_eq!(bucket_index(ms(10)), 2);
        assert_eq!(bucket_index(ms(50)), 3);
        assert_eq!(bucket_index(ms(100)), 4);
        assert_eq!(bucket_index(ms(500)), 5);
        assert_eq!(bucket_index(ms(1000)), 6);
        assert_eq!(bucket_index(Duration::from_micros(1_000_001)), 7);
        assert_eq!(bucket_index(Duration::from_secs(3600)), 7);
    }

    #[test]
    fn hundred_known_latencies() {
        // 1 ms, 2 ms, …, 100 ms, spread over 4 workers and merged.
        let mut workers = vec![LatencyRecorder::new(); 4];
        for i in 1..=100u64 {
            workers[(i % 4) as usize].record_ok(ms(i));
        }
        let mut total = LatencyRecorder::new();
        for w in &workers {
            total.merge(w);
        }
        let s = RoundStats::from_recorder(&total, ms(500));
        assert_eq!(s.requests, 100);
        assert_eq!(s.succeeded, 100);
        assert_eq!(s.errors, 0);
        assert_eq!(s.error_pct, 0.0);
        assert_eq!(s.runtime_ms, 500.0);
        assert!(close(s.tps, 200.0), "tps {}", s.tps);
        assert!(close(s.avg_ms, 50.5), "avg {}", s.avg_ms);
        assert_eq!(s.min_ms, 1.0);
        assert_eq!(s.max_ms, 100.0);
        // Nearest-rank percentiles of 1..=100: p50 = 50, p90 = 90, p99 = 99, p999 = 100.
        assert!(close(s.p50_ms, 50.0), "p50 {}", s.p50_ms);
        assert!(close(s.p90_ms, 90.0), "p90 {}", s.p90_ms);
        assert!(close(s.p99_ms, 99.0), "p99 {}", s.p99_ms);
        assert!(close(s.p999_ms, 100.0), "p999 {}", s.p999_ms);
        // [0,1]: 1 | (1,5]: 2..=5 | (5,10]: 6..=10 | (10,50]: 11..=50 | (50,100]: 51..=100
        assert_eq!(s.buckets, [1, 4, 5, 40, 50, 0, 0, 0]);
        assert_eq!(s.buckets.iter().sum::<u64>(), s.succeeded);
        assert!(close(s.bucket_pct(3), 40.0));
    }

    #[test]
    fn tps_counts_all_requests_and_errors_stay_out_of_latency() {
        let mut r = LatencyRecorder::new();
        for _ in 0..990 {
            r.record_ok(Duration::from_micros(200));
        }
        for _ in 0..10 {
            r.record_err(Duration::from_secs(100));
        }
        let s = RoundStats::from_recorder(&r, ms(500));
        assert_eq!(s.requests, 1000);
        assert_eq!(s.tps, 2000.0); // 1000 requests / 500 ms
        assert_eq!(s.success_tps(), 1980.0);
        assert_eq!(s.errors, 10);
        assert!(close(s.error_pct, 1.0));
        assert!(close(s.success_pct(), 99.0));
        assert!(close(s.max_ms, 0.2), "max {}", s.max_ms);
        assert!(close(s.p999_ms, 0.2));
        assert_eq!(s.buckets, [990, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn boundary_values_land_in_exact_buckets() {
        let mut r = LatencyRecorder::new();
        for v in [1, 5, 10, 50, 100, 500, 1000, 1001, 2500] {
            r.record_ok(ms(v));
        }
        r.record_ok(Duration::from_micros(1_001));
        let s = RoundStats::from_recorder(&r, Duration::from_secs(1));
        assert_eq!(s.buckets, [1, 2, 1, 1, 1, 1, 1, 2]);
        assert_eq!(s.max_ms, 2500.0);
        assert_eq!(s.min_ms, 1.0);
    }

    #[test]
    fn empty_recorder_gives_zeros_not_nan() {
        let r = LatencyRecorder::new();
        let s = RoundStats::from_recorder(&r, Duration::ZERO);
        assert_eq!(s.requests, 0);
        for v in [
            s.tps,
            s.error_pct,
            s.avg_ms,
            s.min_ms,
            s.max_ms,
            s.p50_ms,
            s.p999_ms,
        ] {
            assert_eq!(v, 0.0);
        }
        assert_eq!(s.bucket_pct(0), 0.0);
        assert_eq!(s.success_tps(), 0.0);
    }

    #[test]
    fn merge_handles_empty_sides_and_keeps_exact_min_max() {
        let mut a = LatencyRecorder::new();
        let mut b = LatencyRecorder::new();
        b.record_ok(Duration::from_micros(3_333));
        b.record_err(ms(1));
        a.merge(&b);
        assert_eq!(a.min(), Some(Duration::from_micros(3_333)));
        assert_eq!(a.max(), Duration::from_micros(3_333));
        assert_eq!(a.total(), 2);
        let empty = LatencyRecorder::new();
        a.merge(&empty);
        assert_eq!(a.min(), Some(Duration::from_micros(3_333)));
        assert_eq!(a.histogram().len(), 1);
    }

    #[test]
    fn huge_latency_does_not_panic() {
        let mut r = LatencyRecorder::new();
        r.record_ok(Duration::MAX);
        r.record_ok(ms(1));
        let s = RoundStats::from_recorder(&r, ms(1));
        assert_eq!(s.buckets[7], 1);
        assert!(s.p999_ms.is_finite());
    }
}
