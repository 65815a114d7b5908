//! One benchmark scene's result, and the text formats jkbenchmark printed for it.
//!
//! A *scene* is one point of the benchmark cross product (scenario × concurrency ×
//! requests × call mode × the brisk option being compared). [`SceneResult`] is a flat,
//! serde-friendly record of the scene's configuration next to its best round's statistics,
//! because it is the unit that every output (console line, JSON, CSV, charts, the result
//! store) consumes; flat string/number fields keep it trivially portable to CSV and SQL.
//! Option fields are strings rather than enums so that this crate does not depend on the
//! client/server crates' types and old result files stay readable when options are added.
//!
//! Formats:
//! - [`scene_line`] — jkbenchmark's one-line summary,
//!   `<player>-<action>-c<conc>-n<requests>-<sync|async> | Runtime: X ms, Avg TPS: Y,
//!   Avg RT: Z ms, Error: E%`, followed by brisk's percentiles.
//! - [`round_report`] — the multi-line per-round block with the latency bucket histogram.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::rounds::RoundFigures;
use super::stats::{RoundStats, BUCKET_COUNT, BUCKET_LABELS};

/// Configuration and measured result of one benchmark scene.
///
/// Latency fields are milliseconds over successful calls; `tps` is all completed
/// requests per second (see [`RoundStats`]). Unused option fields are empty strings / 0.
///
/// JSON round trips are exact for statistics produced by [`RoundStats::from_recorder`]
/// (rounded to 6 decimals); a float with 17 significant digits set by hand may come back
/// one ULP off, because serde_json's default float parser is not correctly rounded.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SceneResult {
    /// Who ran: `"brisk"` (or a peer's name when importing its numbers).
    pub player: String,
    /// The service action: `nth`, `cache`, `file`, `db`, `echo`, `stream`, `pingpong`.
    pub scenario: String,
    /// Number of concurrent callers.
    pub concurrency: u32,
    /// Requests configured for the scene.
    pub requests: u64,
    /// `sync` or `async`.
    pub call_mode: String,
    /// `reused`, `pooled` or `fixed`.
    pub connect_type: String,
    /// Connections per server address.
    pub connections: u32,
    /// `sync` or `async` write completion.
    pub write_mode: String,
    /// Server dispatch policy (e.g. `all`, `direct`).
    pub dispatch: String,
    /// Server worker-pool queue type.
    pub queue: String,
    /// Serializer name.
    pub serializer: String,
    /// Payload size in bytes (echo, and each item of `stream` / `pingpong`; 0 when not
    /// applicable).
    pub payload: u64,
    /// Completed requests per second.
    pub tps: f64,
    /// Mean latency, ms.
    pub avg_ms: f64,
    /// Minimum latency, ms.
    pub min_ms: f64,
    /// Maximum latency, ms.
    pub max_ms: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 90th percentile latency, ms.
    pub p90_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// 99.9th percentile latency, ms.
    pub p999_ms: f64,
    /// Successful requests.
    pub succeeded: u64,
    /// Failed requests.
    pub errors: u64,
    /// Wall-clock runtime of the kept round, ms.
    pub runtime_ms: f64,
    /// jkbenchmark latency bucket counts (see [`BUCKET_LABELS`]).
    pub buckets: [u64; BUCKET_COUNT],
    /// Body compression (`none`, `zstd`, `gzip`; brisk only, empty for the peers and in
    /// results written before it existed).
    #[serde(default)]
    pub compression: String,
    /// What the payload held (`fill`, `text`, `random`; empty when the scenario has no payload,
    /// and in results written before it existed).
    #[serde(default)]
    pub payload_kind: String,
    /// volo-thrift's transport (`pool`, `mux`; volo only, empty for the other players and in
    /// results written before it existed).
    #[serde(default)]
    pub volo_transport: String,
    /// Each round's headline figures, in run order (empty for results of one round written
    /// by older versions); the verdicts compare scenes round by round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<RoundFigures>,
    /// Further measurements by name, e.g. `server_cpu_pct`, `net_mb_per_s`.
    /// Non-finite values serialize as JSON `null` and will not read back; keep them finite.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,
}

/// Names accepted by [`SceneResult::option`] (the fields a comparison can group by).
pub const OPTION_NAMES: [&str; 15] = [
    "player",
    "scenario",
    "concurrency",
    "requests",
    "call_mode",
    "connect_type",
    "connections",
    "write_mode",
    "dispatch",
    "queue",
    "serializer",
    "payload",
    "compression",
    "payload_kind",
    "volo_transport",
];

impl SceneResult {
    /// A scene with its identifying fields set and everything else empty/zero.
    pub fn new(
        player: impl Into<String>,
        scenario: impl Into<String>,
        concurrency: u32,
        requests: u64,
        call_mode: impl Into<String>,
    ) -> Self {
        Self {
            player: player.into(),
            scenario: scenario.into(),
            concurrency,
            requests,
            call_mode: call_mode.into(),
            ..Self::default()
        }
    }

    /// Copies a round's statistics into this scene (configuration fields are untouched;
    /// `requests` is set from the round only if it was 0).
    pub fn with_stats(mut self, stats: &RoundStats) -> Self {
        self.set_stats(stats);
        self
    }

    /// In-place form of [`with_stats`](Self::with_stats).
    pub fn set_stats(&mut self, stats: &RoundStats) {
        if self.requests == 0 {
            self.requests = stats.requests;
        }
        self.tps = stats.tps;
        self.avg_ms = stats.avg_ms;
        self.min_ms = stats.min_ms;
        self.max_ms = stats.max_ms;
        self.p50_ms = stats.p50_ms;
        self.p90_ms = stats.p90_ms;
        self.p99_ms = stats.p99_ms;
        self.p999_ms = stats.p999_ms;
        self.succeeded = stats.succeeded;
        self.errors = stats.errors;
        self.runtime_ms = stats.runtime_ms;
        self.buckets = stats.buckets;
    }

    /// The statistics part of this scene as a [`RoundStats`] (`requests` = succeeded +
    /// errors).
    pub fn round_stats(&self) -> RoundStats {
        let requests = self.succeeded + self.errors;
        RoundStats {
            requests,
            succeeded: self.succeeded,
            errors: self.errors,
            error_pct: self.error_pct(),
            runtime_ms: self.runtime_ms,
            tps: self.tps,
            avg_ms: self.avg_ms,
            min_ms: self.min_ms,
            max_ms: self.max_ms,
            p50_ms: self.p50_ms,
            p90_ms: self.p90_ms,
            p99_ms: self.p99_ms,
            p999_ms: self.p999_ms,
            buckets: self.buckets,
        }
    }

    /// `errors / (succeeded + errors) * 100`, 0 when nothing completed.
    pub fn error_pct(&self) -> f64 {
        let total = self.succeeded + self.errors;
        if total == 0 {
            0.0
        } else {
            self.errors as f64 * 100.0 / total as f64
        }
    }

    /// jkbenchmark's scene name: `<player>-<action>-c<conc>-n<requests>-<sync|async>`, then
    /// `-<payload kind>` unless it is empty or `fill`, and `-<compression>` unless it is empty
    /// or `none` (the runner's [`Scene::name`](crate::runner::plan::Scene::name)).
    pub fn name(&self) -> String {
        let mut name = format!(
            "{}-{}-c{}-n{}-{}",
            self.player, self.scenario, self.concurrency, self.requests, self.call_mode
        );
        for (value, default) in [(&self.payload_kind, "fill"), (&self.compression, "none")] {
            if !value.is_empty() && value != default {
                name.push('-');
                name.push_str(value);
            }
        }
        name
    }

    /// The value of a configuration field by name (one of [`OPTION_NAMES`]), as text.
    pub fn option(&self, name: &str) -> Option<String> {
        Some(match name {
            "player" => self.player.clone(),
            "scenario" => self.scenario.clone(),
            "concurrency" => self.concurrency.to_string(),
            "requests" => self.requests.to_string(),
            "call_mode" => self.call_mode.clone(),
            "connect_type" => self.connect_type.clone(),
            "connections" => self.connections.to_string(),
            "write_mode" => self.write_mode.clone(),
            "dispatch" => self.dispatch.clone(),
            "queue" => self.queue.clone(),
            "serializer" => self.serializer.clone(),
            "payload" => self.payload.to_string(),
            "compression" => self.compression.clone(),
            "payload_kind" => self.payload_kind.clone(),
            "volo_transport" => self.volo_transport.clone(),
            _ => return None,
        })
    }

    /// The value of a numeric configuration field by name (`concurrency`, `requests`,
    /// `connections`, `payload`) — the fields usable as a chart's x axis.
    pub fn numeric_option(&self, name: &str) -> Option<f64> {
        match name {
            "concurrency" => Some(f64::from(self.concurrency)),
            "requests" => Some(self.requests as f64),
            "connections" => Some(f64::from(self.connections)),
            "payload" => Some(self.payload as f64),
            _ => None,
        }
    }
}

/// Formats a millisecond value: 3 decimals below 100 ms, 1 decimal above (latencies in
/// this suite span 0.05 ms to seconds).
pub fn fmt_ms(ms: f64) -> String {
    if ms.abs() >= 100.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.3}")
    }
}

/// jkbenchmark's one-line scene summary plus brisk's percentiles:
///
/// `brisk-nth-c20-n100000-sync | Runtime: 1234 ms, Avg TPS: 81037.28, Avg RT: 0.220 ms,
/// Error: 0.00%, p50: 0.200 ms, p90: 0.310 ms, p99: 0.550 ms, p999: 1.200 ms`
pub fn scene_line(scene: &SceneResult) -> String {
    format!(
        "{} | Runtime: {:.0} ms, Avg TPS: {:.2}, Avg RT: {} ms, Error: {:.2}%, p50: {} ms, p90: {} ms, p99: {} ms, p999: {} ms",
        scene.name(),
        scene.runtime_ms,
        scene.tps,
        fmt_ms(scene.avg_ms),
        scene.error_pct(),
        fmt_ms(scene.p50_ms),
        fmt_ms(scene.p90_ms),
        fmt_ms(scene.p99_ms),
        fmt_ms(scene.p999_ms),
    )
}

/// The multi-line per-round report: runtime, requests, success/error %, average TPS,
/// avg/min/max latency, the bucket histogram (counts and % of successful calls) and the
/// percentiles. `label` heads the block (typically [`SceneResult::name`] plus the round).
pub fn round_report(stats: &RoundStats, label: &str) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(out, "----- {label} -----");
    let _ = writeln!(out, "Runtime: {:.0} ms", stats.runtime_ms);
    let _ = writeln!(out, "Requests: {}", stats.requests);
    let _ = writeln!(
        out,
        "Success: {} ({:.2}%), Error: {} ({:.2}%)",
        stats.succeeded,
        stats.success_pct(),
        stats.errors,
        stats.error_pct
    );
    let _ = writeln!(out, "Avg TPS: {:.2}", stats.tps);
    let _ = writeln!(
        out,
        "Latency: avg {} ms, min {} ms, max {} ms",
        fmt_ms(stats.avg_ms),
        fmt_ms(stats.min_ms),
        fmt_ms(stats.max_ms)
    );
    let _ = writeln!(out, "Latency histogram (successful calls):");
    let width = stats
        .buckets
        .iter()
        .map(|c| c.to_string().len())
        .max()
        .unwrap_or(1);
    for (i, label) in BUCKET_LABELS.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {:<15} {:>width$}  {:>6.2}%",
            format!("{label} ms:"),
            stats.buckets[i],
            stats.bucket_pct(i),
        );
    }
    let _ = writeln!(
        out,
        "Percentiles: p50 {} ms, p90 {} ms, p99 {} ms, p999 {} ms",
        fmt_ms(stats.p50_ms),
        fmt_ms(stats.p90_ms),
        fmt_ms(stats.p99_ms),
        fmt_ms(stats.p999_ms)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::stats::LatencyRecorder;
    use std::time::Duration;

    fn sample_scene() -> SceneResult {
        let mut s = SceneResult::new("brisk", "nth", 20, 1000, "sync");
        s.connect_type = "fixed".into();
        s.connections = 10;
        s.write_mode = "async".into();
        s.dispatch = "all".into();
        s.queue = "transfer".into();
        s.serializer = "bincode, \"fast\"".into();
        s.payload = 1024;
        let mut r = LatencyRecorder::new();
        for i in 1..=999u64 {
            r.record_ok(Duration::from_micros(i * 10));
        }
        r.record_err(Duration::from_millis(5));
        s.set_stats(&RoundStats::from_recorder(&r, Duration::from_millis(500)));
        s.extra.insert("server_cpu_pct".into(), 87.5);
        s
    }

    #[test]
    fn json_round_trip() {
        let s = sample_scene();
        let json = serde_json::to_string_pretty(&s).expect("serialize");
        let back: SceneResult = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, s);
        // `extra` is optional on input.
        let mut v: serde_json::Value = serde_json::from_str(&json).expect("value");
        v.as_object_mut().expect("object").remove("extra");
        let back: SceneResult = serde_json::from_value(v).expect("without extra");
        assert!(back.extra.is_empty());
    }

    #[test]
    fn compression_and_payload_kind_are_options_and_name_suffixes() {
        let mut s = sample_scene();
        s.scenario = "echo".into();
        for (kind, compression, name) in [
            ("", "", "brisk-echo-c20-n1000-sync"),
            ("fill", "none", "brisk-echo-c20-n1000-sync"),
            ("text", "none", "brisk-echo-c20-n1000-sync-text"),
            ("fill", "zstd", "brisk-echo-c20-n1000-sync-zstd"),
            ("random", "gzip", "brisk-echo-c20-n1000-sync-random-gzip"),
        ] {
            s.payload_kind = kind.into();
            s.compression = compression.into();
            assert_eq!(s.name(), name);
            assert_eq!(s.option("payload_kind").as_deref(), Some(kind));
            assert_eq!(s.option("compression").as_deref(), Some(compression));
        }
        // Results written before the two fields existed still read.
        let mut v = serde_json::to_value(&s).expect("value");
        let fields = v.as_object_mut().expect("object");
        fields.remove("compression");
        fields.remove("payload_kind");
        let old: SceneResult = serde_json::from_value(v).expect("without the new fields");
        assert_eq!(
            (old.compression.as_str(), old.payload_kind.as_str()),
            ("", "")
        );
        assert_eq!(old.name(), "brisk-echo-c20-n1000-sync");
    }

    #[test]
    fn scene_line_format() {
        let s = sample_scene();
        let line = scene_line(&s);
        assert!(
            line.starts_with(
                "brisk-nth-c20-n1000-sync | Runtime: 500 ms, Avg TPS: 2000.00, Avg RT: 5.000 ms, Error: 0.10%, p50: "
            ),
            "{line}"
        );
        assert!(line.contains(", p90: "));
        assert!(line.contains(", p99: "));
        assert!(line.ends_with(" ms"));
        assert!(line.contains(", p999: 9.990 ms"), "{line}");
    }

    #[test]
    fn round_report_block() {
        let s = sample_scene();
        let r = round_report(&s.round_stats(), &s.name());
        assert!(r.contains("----- brisk-nth-c20-n1000-sync -----"));
        assert!(r.contains("Runtime: 500 ms"));
        assert!(r.contains("Requests: 1000"));
        assert!(r.contains("Success: 999 (99.90%), Error: 1 (0.10%)"));
        assert!(r.contains("Avg TPS: 2000.00"));
        assert!(r.contains("min 0.010 ms, max 9.990 ms"));
        // 10 µs .. 1000 µs → [0,1]: 100 calls; 1010 µs .. 5000 µs → (1,5]: 400; rest (5,10]: 499.
        assert!(r.contains("[0,1] ms:"));
        assert!(r.contains(" 100   10.01%"), "{r}");
        assert!(r.contains(" 400   40.04%"), "{r}");
        assert!(r.contains(" 499   49.95%"), "{r}");
        assert!(r.contains(">1000 ms:"));
        assert!(r.contains("Percentiles: p50 "));
        assert_eq!(s.buckets, [100, 400, 499, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn options_by_name() {
        let s = sample_scene();
        for name in OPTION_NAMES {
            assert!(s.option(name).is_some(), "{name}");
        }
        assert_eq!(s.option("connect_type").as_deref(), Some("fixed"));
        assert_eq!(s.option("nope"), None);
        assert_eq!(s.numeric_option("concurrency"), Some(20.0));
        assert_eq!(s.numeric_option("queue"), None);
    }
}
