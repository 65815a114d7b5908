//! A tool's report as a [`SceneResult`]: connect type `http`, serializer `json`, the server's
//! labels, and seed 001's table percentages in `extra` under [`percentage_key`] — the same keys
//! [`recorder_percentages`] gives a binary scene, so the table reads both alike.
//!
//! Figures a tool does not report (ab and wrk have no 99.9 %, ab no standard deviation) stay 0
//! in the result's fields and absent from `extra`.

use crate::report::stats::duration_ms;
use crate::report::{LatencyRecorder, SceneResult};

use super::parse::{AbReport, WrkReport, PERCENTAGES};

/// Concurrent clients (`ab -c`, `wrk -c`), as in seed 001.
pub const CONCURRENCY: u32 = 10;

/// The `extra` key of a table percentage, e.g. `p66_ms` for 66 %.
pub fn percentage_key(percent: u32) -> String {
    format!("p{percent}_ms")
}

/// Seed 001's table percentages of a binary scene's latencies, as `extra` entries (ms; 100 %
/// is the maximum). Empty when nothing succeeded.
pub fn recorder_percentages(rec: &LatencyRecorder) -> Vec<(String, f64)> {
    if rec.succeeded() == 0 {
        return Vec::new();
    }
    PERCENTAGES
        .iter()
        .map(|&p| {
            let ms = if p == 100 {
                duration_ms(rec.max())
            } else {
                rec.quantile_ms(f64::from(p) / 100.0)
            };
            (percentage_key(p), round3(ms))
        })
        .collect()
}

/// Where the server of these results runs (copied into the scene results).
#[derive(Debug, Clone, Default)]
pub struct ServerLabels {
    /// Dispatch name (empty for a server the runner does not manage).
    pub dispatch: String,
    /// Queue name (empty for direct dispatch).
    pub queue: String,
}

fn http_scene(
    scenario: &str,
    requests: u64,
    connections: u32,
    labels: &ServerLabels,
) -> SceneResult {
    let mut s = SceneResult::new("brisk", scenario, CONCURRENCY, requests, "sync");
    s.connect_type = "http".to_owned();
    s.connections = connections;
    s.serializer = "json".to_owned();
    s.dispatch = labels.dispatch.clone();
    s.queue = labels.queue.clone();
    s
}

/// An `ab` run as a scene result (`p999_ms` stays 0: ab does not report it).
pub fn ab_scene(
    scenario: &str,
    keepalive: bool,
    ab: &AbReport,
    labels: &ServerLabels,
) -> SceneResult {
    let connections = if keepalive { CONCURRENCY } else { 1 };
    let mut s = http_scene(scenario, ab.complete, connections, labels);
    s.tps = ab.requests_per_second;
    s.avg_ms = ab.time_per_request_ms;
    s.min_ms = ab.min_ms.unwrap_or(0.0);
    s.p50_ms = ab.percentage(50).unwrap_or(0.0);
    s.p90_ms = ab.percentage(90).unwrap_or(0.0);
    s.p99_ms = ab.percentage(99).unwrap_or(0.0);
    s.max_ms = ab.percentage(100).unwrap_or(0.0);
    s.errors = ab.failed.saturating_add(ab.non_2xx);
    s.succeeded = ab.complete.saturating_sub(s.errors);
    s.runtime_ms = round3(ab.time_taken_s * 1000.0);
    for &(p, ms) in &ab.percentages {
        s.extra.insert(percentage_key(p), ms);
    }
    s
}

/// A `wrk` run as a scene result (`p999_ms` stays 0: wrk does not report it; 100 % is the
/// latency maximum).
pub fn wrk_scene(wrk: &WrkReport, labels: &ServerLabels) -> SceneResult {
    let mut s = http_scene("http-wrk", wrk.requests, CONCURRENCY, labels);
    s.tps = wrk.requests_per_second;
    s.avg_ms = wrk.latency_avg_ms;
    s.max_ms = wrk.latency_max_ms;
    s.p50_ms = wrk.percentage(50).unwrap_or(0.0);
    s.p90_ms = wrk.percentage(90).unwrap_or(0.0);
    s.p99_ms = wrk.percentage(99).unwrap_or(0.0);
    s.errors = wrk.socket_errors.saturating_add(wrk.non_2xx);
    s.succeeded = wrk.requests.saturating_sub(wrk.non_2xx);
    s.runtime_ms = round3(wrk.duration_s * 1000.0);
    for &(p, ms) in &wrk.percentages {
        s.extra.insert(percentage_key(p), round3(ms));
    }
    s.extra
        .insert(percentage_key(100), round3(wrk.latency_max_ms));
    s.extra
        .insert("latency_stdev_ms".to_owned(), round3(wrk.latency_stdev_ms));
    s
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
