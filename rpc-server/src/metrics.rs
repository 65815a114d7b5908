//! [`Metrics`]: per-method call counts, errors and latency histograms, plus the
//! I/O byte counters, and how `GET /metrics` renders them: through a
//! [`prometheus_client`] registry, the user's own when they gave one
//! ([`ServerBuilder::metrics_registry`](crate::ServerBuilder::metrics_registry)),
//! so their series and brisk's come out of one scrape.
//!
//! # Invariants
//!
//! - Recording stays off the registry: every method a server answers is
//!   known when it starts (the router lists them), so the per-method table is
//!   built once and never locked, and recording a call is a few relaxed
//!   atomic adds on its route. The registry only reads them, at scrape time,
//!   through one [`Collector`] — the hot path does not change with the
//!   exposition format.
//! - The series keep their names (`brisk_calls_total`, `brisk_call_errors_total`,
//!   `brisk_calls_cancelled_total`, `brisk_call_duration_seconds`,
//!   `brisk_open_connections`, …); the text is OpenMetrics (it ends in `# EOF`).

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use rpc_transport::IoCounters;

use crate::pool::WorkerPool;
use crate::router::{Route, Router};
use crate::stats::ServerStats;

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

    /// The collector of everything brisk counts for `registry`; `stats` and
    /// `pool` are read at each scrape.
    pub(crate) fn collector(
        &self,
        stats: Arc<ServerStats>,
        pool: Option<Arc<WorkerPool>>,
    ) -> ServerCollector {
        ServerCollector {
            routes: self.routes.clone(),
            io: self.io.clone(),
            stats,
            pool,
        }
    }
}

/// Reads a server's counters into a registry at scrape time.
pub(crate) struct ServerCollector {
    routes: Vec<Route>,
    io: Arc<IoCounters>,
    stats: Arc<ServerStats>,
    pool: Option<Arc<WorkerPool>>,
}

impl std::fmt::Debug for ServerCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerCollector")
            .field("methods", &self.routes.len())
            .finish_non_exhaustive()
    }
}

impl ServerCollector {
    /// One counter per method.
    fn per_method(
        &self,
        encoder: &mut DescriptorEncoder<'_>,
        name: &str,
        help: &str,
        value: impl Fn(&MethodMetrics) -> u64,
    ) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        for r in &self.routes {
            let labels = [("service", r.service), ("method", r.method)];
            ConstCounter::new(value(&r.metrics)).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// One unlabelled series.
fn single(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    metric: impl EncodeMetric,
) -> Result<(), std::fmt::Error> {
    let series = encoder.encode_descriptor(name, help, None, metric.metric_type())?;
    metric.encode(series)
}

impl Collector for ServerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let e = &mut encoder;
        self.per_method(e, "brisk_calls", "Calls handled, per method.", |m| {
            m.calls()
        })?;
        self.per_method(
            e,
            "brisk_call_errors",
            "Calls answered with an error, per method.",
            |m| m.errors(),
        )?;
        self.per_method(
            e,
            "brisk_calls_cancelled",
            "Calls their caller gave up on before the answer, per method.",
            |m| m.cancelled(),
        )?;
        let mut family = e.encode_descriptor(
            "brisk_call_duration_seconds",
            "Handler latency, per method.",
            None,
            MetricType::Histogram,
        )?;
        for r in &self.routes {
            let m = &r.metrics;
            // Per-bucket counts; the encoder accumulates them. f64::MAX is +Inf.
            let buckets: Vec<(f64, u64)> = LATENCY_BUCKETS
                .iter()
                .copied()
                .chain(std::iter::once(f64::MAX))
                .enumerate()
                .map(|(i, bound)| (bound, m.bucket(i)))
                .collect();
            let count = buckets.iter().map(|(_, n)| n).sum();
            let labels = [("service", r.service), ("method", r.method)];
            family
                .encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(
                    m.sum_micros() as f64 / 1e6,
                    count,
                    &buckets,
                    None,
                )?;
        }
        let stats = self.stats.snapshot();
        let gauge = |v: usize| ConstGauge::new(v as i64);
        let counter = |v: u64| ConstCounter::new(v);
        single(
            e,
            "brisk_open_connections",
            "Binary-protocol connections open.",
            gauge(stats.open_connections),
        )?;
        single(
            e,
            "brisk_refused_connections",
            "Connections refused at max_connections or max_connections_per_ip.",
            counter(stats.refused_connections),
        )?;
        single(
            e,
            "brisk_evicted_connections",
            "Connections closed at max_connections to make room (longest without a call).",
            counter(stats.evicted_connections),
        )?;
        single(
            e,
            "brisk_requests",
            "Binary-protocol requests read.",
            counter(stats.requests),
        )?;
        single(
            e,
            "brisk_busy_rejections",
            "Calls rejected because the worker pool was full.",
            counter(stats.busy_rejections),
        )?;
        single(
            e,
            "brisk_busy_polled_frames",
            "Frames read while their connection busy-polled for them (wake-ups saved).",
            counter(stats.busy_polled_frames),
        )?;
        single(
            e,
            "brisk_busy_poll_reads",
            "Of the busy-polled frames, those the poll read from the socket itself.",
            counter(stats.busy_poll_reads),
        )?;
        single(
            e,
            "brisk_worker_writes",
            "Writes of pooled answers a worker made itself, on the socket its connection lent.",
            counter(stats.worker_writes),
        )?;
        single(
            e,
            "brisk_worker_reads",
            "Requests a worker read itself, on the read side its connection lent (lone and pipelining callers).",
            counter(stats.worker_reads),
        )?;
        single(
            e,
            "brisk_bytes_in",
            "Bytes read from clients.",
            counter(self.io.bytes_in()),
        )?;
        single(
            e,
            "brisk_bytes_out",
            "Bytes written to clients.",
            counter(self.io.bytes_out()),
        )?;
        if let Some(pool) = &self.pool {
            let p = pool.stats();
            single(
                e,
                "brisk_pool_threads",
                "Worker pool threads alive.",
                gauge(p.pool_size),
            )?;
            single(
                e,
                "brisk_pool_active_threads",
                "Worker pool threads running a call.",
                gauge(p.active),
            )?;
            single(
                e,
                "brisk_pool_queue_depth",
                "Calls waiting in the worker pool queue.",
                gauge(p.queued),
            )?;
            single(
                e,
                "brisk_pool_waiting_calls",
                "Pooled calls whose async handler waits, holding no worker.",
                gauge(p.waiting),
            )?;
        }
        Ok(())
    }
}

/// Renders `registry` in the OpenMetrics text format.
pub(crate) fn render(registry: &Registry) -> String {
    let mut out = String::with_capacity(4096);
    // Writing into a String cannot fail; a collector's error would leave the
    // text cut short, which a scraper rejects as a whole.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, registry) {
        tracing::warn!(error = %e, "metrics could not be rendered in full");
    }
    out
}

/// The content type of `/metrics`: the OpenMetrics text format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn brisks_series_and_the_users_render_from_one_registry() {
        let mut router = Router::new();
        router.add(Arc::new(crate::test_support::EmptyAnswers(
            "Calc",
            &["add", "fail"],
        )));
        let metrics = Metrics::for_router(&router);
        let add = metrics.method("Calc", "add").expect("the route");
        add.record(Duration::from_micros(50), true);
        add.record(Duration::from_millis(3), false);
        add.record(Duration::from_secs(5), true);
        metrics.io.add_out(10);
        let stats = Arc::new(ServerStats::default());
        stats
            .open_connections
            .store(2, std::sync::atomic::Ordering::Relaxed);
        let mine = prometheus_client::metrics::counter::Counter::<u64>::default();
        let mut registry = Registry::default();
        registry.register("app_logins", "Logins.", mine.clone());
        registry.register_collector(Box::new(metrics.collector(stats, None)));
        mine.inc_by(7);

        let text = render(&registry);
        let has = |line: &str| assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        has("app_logins_total 7");
        has(r#"brisk_calls_total{service="Calc",method="add"} 3"#);
        has(r#"brisk_call_errors_total{service="Calc",method="add"} 1"#);
        has(r#"brisk_calls_total{service="Calc",method="fail"} 0"#);
        has("# TYPE brisk_call_duration_seconds histogram");
        // Cumulative buckets: 50 µs ≤ 100 µs, 3 ms ≤ 5 ms, 5 s only in +Inf.
        has(r#"brisk_call_duration_seconds_bucket{le="0.0001",service="Calc",method="add"} 1"#);
        has(r#"brisk_call_duration_seconds_bucket{le="0.005",service="Calc",method="add"} 2"#);
        has(r#"brisk_call_duration_seconds_bucket{le="1.0",service="Calc",method="add"} 2"#);
        has(r#"brisk_call_duration_seconds_bucket{le="+Inf",service="Calc",method="add"} 3"#);
        has(r#"brisk_call_duration_seconds_count{service="Calc",method="add"} 3"#);
        has("brisk_open_connections 2");
        has("brisk_bytes_out_total 10");
        assert!(
            !text.contains("brisk_pool_threads"),
            "no pool, no pool series"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
