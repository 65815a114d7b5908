//! [`Metrics`]: per-method call counts, errors and latency histograms, plus the
//! I/O byte counters, rendered in the Prometheus text format for `GET /metrics`.
//!
//! Every method a server answers is known when it starts (the router lists
//! them), so the per-method table is built once and never locked: recording a
//! call is a map lookup by two `&'static str` and a few relaxed atomic adds.
//! Histogram buckets are cumulative at render time, as Prometheus expects.

use std::fmt::Write as _;
use std::sync::Arc;

use rpc_transport::IoCounters;

use crate::pool::PoolStats;
use crate::router::{Route, Router};
use crate::stats::StatsSnapshot;

pub use crate::method_metrics::{MethodMetrics, LATENCY_BUCKETS};

/// All metrics of one server.
#[derive(Default)]
pub struct Metrics {
    routes: Vec<Route>,
    /// Bytes read and written on every connection (binary and HTTP).
    pub io: Arc<IoCounters>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("methods", &self.routes.len())
            .field("io", &self.io)
            .finish()
    }
}

impl Metrics {
    /// Metrics over every route of `router` (the counters live in the routes).
    pub fn for_router(router: &Router) -> Metrics {
        Metrics {
            routes: router.routes(),
            io: Arc::new(IoCounters::default()),
        }
    }

    /// The counters of one method.
    pub fn method(&self, service: &str, method: &str) -> Option<&MethodMetrics> {
        self.routes
            .iter()
            .find(|r| r.service == service && r.method == method)
            .map(|r| &r.metrics)
    }

    /// Renders everything in the Prometheus text exposition format.
    pub fn render(&self, stats: &StatsSnapshot, pool: Option<&PoolStats>) -> String {
        let mut out = String::with_capacity(4096);
        let keys: Vec<(&str, &MethodMetrics)> =
            self.routes.iter().map(|r| (r.method, &r.metrics)).collect();
        let services: Vec<&str> = self.routes.iter().map(|r| r.service).collect();

        out.push_str("# HELP brisk_calls_total Calls handled, per method.\n# TYPE brisk_calls_total counter\n");
        for ((m, mm), s) in keys.iter().zip(&services) {
            let v = mm.calls();
            let _ = writeln!(
                out,
                "brisk_calls_total{{service=\"{s}\",method=\"{m}\"}} {v}"
            );
        }
        out.push_str("# HELP brisk_call_errors_total Calls answered with an error, per method.\n# TYPE brisk_call_errors_total counter\n");
        for ((m, mm), s) in keys.iter().zip(&services) {
            let v = mm.errors();
            let _ = writeln!(
                out,
                "brisk_call_errors_total{{service=\"{s}\",method=\"{m}\"}} {v}"
            );
        }
        out.push_str("# HELP brisk_calls_cancelled_total Calls their caller gave up on before the answer, per method.\n# TYPE brisk_calls_cancelled_total counter\n");
        for ((m, mm), s) in keys.iter().zip(&services) {
            let v = mm.cancelled();
            let _ = writeln!(
                out,
                "brisk_calls_cancelled_total{{service=\"{s}\",method=\"{m}\"}} {v}"
            );
        }
        out.push_str("# HELP brisk_call_duration_seconds Handler latency, per method.\n# TYPE brisk_call_duration_seconds histogram\n");
        for ((m, mm), s) in keys.iter().zip(&services) {
            let mut cumulative = 0;
            for (i, bound) in LATENCY_BUCKETS.iter().enumerate() {
                cumulative += mm.bucket(i);
                let _ = writeln!(
                    out,
                    "brisk_call_duration_seconds_bucket{{service=\"{s}\",method=\"{m}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            cumulative += mm.bucket(LATENCY_BUCKETS.len());
            let _ = writeln!(
                out,
                "brisk_call_duration_seconds_bucket{{service=\"{s}\",method=\"{m}\",le=\"+Inf\"}} {cumulative}"
            );
            let sum = mm.sum_micros() as f64 / 1e6;
            let _ = writeln!(
                out,
                "brisk_call_duration_seconds_sum{{service=\"{s}\",method=\"{m}\"}} {sum}"
            );
            let _ = writeln!(
                out,
                "brisk_call_duration_seconds_count{{service=\"{s}\",method=\"{m}\"}} {cumulative}"
            );
        }
        let gauge = |out: &mut String, name: &str, help: &str, kind: &str, v: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
            );
        };
        gauge(
            &mut out,
            "brisk_open_connections",
            "Binary-protocol connections open.",
            "gauge",
            stats.open_connections.to_string(),
        );
        gauge(
            &mut out,
            "brisk_refused_connections_total",
            "Connections refused at max_connections or max_connections_per_ip.",
            "counter",
            stats.refused_connections.to_string(),
        );
        gauge(
            &mut out,
            "brisk_evicted_connections_total",
            "Connections closed at max_connections to make room (longest without a call).",
            "counter",
            stats.evicted_connections.to_string(),
        );
        gauge(
            &mut out,
            "brisk_requests_total",
            "Binary-protocol requests read.",
            "counter",
            stats.requests.to_string(),
        );
        gauge(
            &mut out,
            "brisk_busy_rejections_total",
            "Calls rejected because the worker pool was full.",
            "counter",
            stats.busy_rejections.to_string(),
        );
        gauge(
            &mut out,
            "brisk_bytes_in_total",
            "Bytes read from clients.",
            "counter",
            self.io.bytes_in().to_string(),
        );
        gauge(
            &mut out,
            "brisk_bytes_out_total",
            "Bytes written to clients.",
            "counter",
            self.io.bytes_out().to_string(),
        );
        if let Some(p) = pool {
            gauge(
                &mut out,
                "brisk_pool_threads",
                "Worker pool threads alive.",
                "gauge",
                p.pool_size.to_string(),
            );
            gauge(
                &mut out,
                "brisk_pool_active_threads",
                "Worker pool threads running a call.",
                "gauge",
                p.active.to_string(),
            );
            gauge(
                &mut out,
                "brisk_pool_queue_depth",
                "Calls waiting in the worker pool queue.",
                "gauge",
                p.queued.to_string(),
            );
        }
        out
    }
}
