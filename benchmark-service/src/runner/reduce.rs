//! A scene's rounds reduced to what the reports show: [`scene_result`] (medians, min–max,
//! best-of-rounds, per-call CPU and segments, MB/s, and for the streaming scenarios messages/s)
//! and the lines printed for it ([`print_scene`], with [`dubbo_scene`] for the boxed Dubbo
//! report).
//!
//! A call of `stream` or `pingpong` moves [`STREAM_ITEMS`](crate::scenario::STREAM_ITEMS)
//! messages, so for them the engine's per-call figures (TPS = calls/s, latency = a whole
//! stream) come with `msgs_per_call` and `msgs_per_s` = calls/s × messages per call (its min–max
//! over the rounds as `msgs_per_s_min` / `msgs_per_s_max`), in the `extra` figures that the
//! JSON and CSV files carry (`extra_msgs_per_s`) and that the scene lines and the summary print.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::report::{
    dubbo_report, median, median_stats, scene_line, spread, DubboScene, LatencyRecorder,
    RoundFigures, RoundStats, SceneResult, TestEnvironment,
};

use super::plan::{Plan, Scene};
use super::sample::Sample;

/// A scene's rounds as one result: medians, spreads, best-of-rounds and per-call costs.
pub fn scene_result(
    scene: &Scene,
    plan: &Plan,
    rounds: &[Sample],
    server_labels: bool,
) -> SceneResult {
    let stats: Vec<RoundStats> = rounds.iter().map(|s| s.stats.clone()).collect();
    let median_round = median_stats(&stats)
        .unwrap_or_else(|| RoundStats::from_recorder(&LatencyRecorder::new(), Duration::ZERO));
    let mut result = SceneResult::new(
        scene.player.name(),
        scene.scenario.name(),
        scene.concurrency,
        median_round.requests,
        scene.call_mode.name(),
    )
    .with_stats(&median_round);
    result.connections = scene.connections;
    result.payload = scene.payload;
    result.payload_kind = scene.payload_kind_name().to_owned();
    if let Some(server) = scene.server {
        result.connect_type = scene.connect.name().to_owned();
        result.write_mode = scene.write_mode.name().to_owned();
        result.serializer = scene.serializer.name().to_owned();
        result.compression = scene.compression.name().to_owned();
        if server_labels {
            result.dispatch = server.dispatch.name().to_owned();
            result.queue = server.queue_name();
        }
    }
    if let Some(transport) = scene.volo_transport {
        result.volo_transport = transport.name().to_owned();
    }
    result.rounds = stats.iter().map(RoundFigures::from).collect();
    let tps: Vec<f64> = stats.iter().map(|s| s.tps).collect();
    if let Some((lo, hi)) = spread(&tps) {
        // Rounded outwards: the spread still holds the median (which is
        // not rounded) when it is one of its ends.
        result.extra.insert("tps_min".to_owned(), round3_down(lo));
        result.extra.insert("tps_max".to_owned(), round3_up(hi));
    }
    // jkbenchmark kept the best round: the shortest in count mode, the fastest when timed.
    let best = match plan.scene_secs {
        Some(_) => stats.iter().map(|s| s.tps).reduce(f64::max),
        None => stats
            .iter()
            .min_by(|a, b| a.runtime_ms.total_cmp(&b.runtime_ms))
            .map(|s| s.tps),
    };
    // Rounded as `tps_max` is: timed, the best round is the fastest.
    if let Some(best) = best {
        result.extra.insert("tps_best".to_owned(), round3_up(best));
    }
    let mut extra = |key: &str, values: Vec<f64>| {
        if let Some(v) = median(&values) {
            result.extra.insert(key.to_owned(), round3(v));
        }
    };
    type Figure = fn(&RoundStats) -> f64;
    let figures: [(&str, Figure); 2] = [("p50_min", |s| s.p50_ms), ("p99_min", |s| s.p99_ms)];
    for (key, f) in figures {
        let v: Vec<f64> = stats.iter().map(f).collect();
        if let Some((lo, hi)) = spread(&v) {
            extra(key, vec![lo]);
            extra(&key.replace("min", "max"), vec![hi]);
        }
    }
    let per_call =
        |f: &dyn Fn(&Sample) -> Option<f64>| -> Vec<f64> { rounds.iter().filter_map(f).collect() };
    extra(
        "server_cpu_pct",
        per_call(&|s| Some(s.server_cpu? * 100_000.0 / s.stats.runtime_ms.max(1e-9))),
    );
    extra(
        "server_cpu_us_per_call",
        per_call(&|s| s.per_call(s.server_cpu, 1e6)),
    );
    extra(
        "client_cpu_us_per_call",
        per_call(&|s| s.per_call(s.client_cpu, 1e6)),
    );
    extra(
        "server_segments_per_call",
        per_call(&|s| s.per_call(s.server_writes.map(|w| w as f64), 1.0)),
    );
    extra(
        "client_segments_per_call",
        per_call(&|s| s.per_call(s.client_writes.map(|w| w as f64), 1.0)),
    );
    // What the wire carried each way per call: frames, headers and (compressed) bodies.
    extra(
        "client_bytes_per_call",
        per_call(&|s| s.per_call(s.client_bytes.map(|b| b as f64), 1.0)),
    );
    extra(
        "server_bytes_per_call",
        per_call(&|s| s.per_call(s.server_bytes.map(|b| b as f64), 1.0)),
    );
    // The median over rounds of each of seed 001's percentages.
    if let Some(first) = rounds.first() {
        for (key, _) in &first.percentages {
            extra(
                key,
                per_call(&|s| {
                    s.percentages
                        .iter()
                        .find(|(k, _)| k == key)
                        .map(|(_, v)| *v)
                }),
            );
        }
    }
    if scene.scenario.uses_payload() {
        // Application payload both ways over the window (like the Dubbo report), in MB/s.
        let bytes_per_call = scene.scenario.payload_bytes_per_call(scene.payload) as f64;
        extra(
            "mb_per_s",
            per_call(&|s| {
                (s.stats.runtime_ms > 0.0).then(|| {
                    bytes_per_call * s.stats.succeeded as f64 / 1e6 * 1000.0 / s.stats.runtime_ms
                })
            }),
        );
    }
    if scene.scenario.is_stream() {
        // A call is a whole stream: messages/s is calls/s × the messages each moved.
        let n = scene.scenario.messages_per_call() as f64;
        extra("msgs_per_call", vec![n]);
        extra("msgs_per_s", vec![median_round.tps * n]);
        if let Some((lo, hi)) = spread(&tps) {
            extra("msgs_per_s_min", vec![lo * n]);
            extra("msgs_per_s_max", vec![hi * n]);
        }
    }
    result
}

/// Prints a scene's result line, its spread and costs, its errors and (when the plan asks)
/// the Dubbo report of its median round.
pub fn print_scene(
    scene: &Scene,
    plan: &Plan,
    result: &SceneResult,
    rounds: &[Sample],
    errors: &BTreeMap<String, u64>,
) {
    let x = |k: &str| result.extra.get(k).copied();
    println!("{} {}", scene_line(result), scene.options());
    let mut line = format!(
        "  median of {} round(s); TPS {:.0}–{:.0}, best {:.0}; p50 {:.3}–{:.3} ms; p99 {:.3}–{:.3} ms",
        rounds.len(),
        x("tps_min").unwrap_or(0.0),
        x("tps_max").unwrap_or(0.0),
        x("tps_best").unwrap_or(0.0),
        x("p50_min").unwrap_or(0.0),
        x("p50_max").unwrap_or(0.0),
        x("p99_min").unwrap_or(0.0),
        x("p99_max").unwrap_or(0.0),
    );
    if let (Some(pct), Some(us)) = (x("server_cpu_pct"), x("server_cpu_us_per_call")) {
        line.push_str(&format!("; server CPU {pct:.0}%, {us:.1} µs/call"));
    }
    if let Some(w) = x("server_segments_per_call") {
        line.push_str(&format!(", {w:.2} segments/call"));
    }
    if let Some(us) = x("client_cpu_us_per_call") {
        line.push_str(&format!("; client {us:.1} µs/call"));
    }
    if let Some(mb) = x("mb_per_s") {
        line.push_str(&format!("; {mb:.1} MB/s"));
    }
    if let (Some(up), Some(down)) = (x("client_bytes_per_call"), x("server_bytes_per_call")) {
        line.push_str(&format!("; wire B/call {up:.0} up, {down:.0} down"));
    }
    println!("{line}");
    if let (Some(msgs), Some(n)) = (x("msgs_per_s"), x("msgs_per_call")) {
        println!(
            "  messages/s {msgs:.0} ({n:.0} messages per call × {:.0} calls/s; {:.0}–{:.0} over the rounds)",
            result.tps,
            x("msgs_per_s_min").unwrap_or(msgs),
            x("msgs_per_s_max").unwrap_or(msgs),
        );
    }
    for (what, n) in errors {
        println!("  errors: {n} × {what}");
    }
    if plan.dubbo_report {
        let stats: Vec<RoundStats> = rounds.iter().map(|s| s.stats.clone()).collect();
        if let Some(median_round) = median_stats(&stats) {
            print!(
                "{}",
                dubbo_report(
                    &TestEnvironment::detect(),
                    &dubbo_scene(scene, plan),
                    &median_round
                )
            );
        }
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// [`round3`] towards minus infinity (a spread's low end).
fn round3_down(v: f64) -> f64 {
    (v * 1000.0).floor() / 1000.0
}

/// [`round3`] towards plus infinity (a spread's high end).
fn round3_up(v: f64) -> f64 {
    (v * 1000.0).ceil() / 1000.0
}

/// The Dubbo report's "Test Scene" for a scene.
pub fn dubbo_scene(scene: &Scene, plan: &Plan) -> DubboScene {
    let (transporter, server, serialization) = match scene.server {
        Some(choice) => {
            let mut transporter = format!("brisk {}", scene.connect);
            if scene.connect.uses_connection_count() {
                transporter.push_str(&format!("×{}", scene.connections));
            }
            transporter.push_str(&format!(
                ", {} write, {} calls",
                scene.write_mode, scene.call_mode
            ));
            let mut server = format!("brisk {} dispatch", choice.dispatch);
            if let Some(q) = choice.queue {
                server.push_str(&format!(", {q} queue"));
            }
            let serialization = match scene.compression {
                brisk::Compression::None => scene.serializer.name().to_owned(),
                c => format!("{} + {c}", scene.serializer),
            };
            (transporter, server, serialization)
        }
        None => {
            // volo names its transport: `volo mux`, as brisk names its dispatch.
            let player = match scene.volo_transport {
                Some(transport) => format!("{} {transport}", scene.player),
                None => scene.player.to_string(),
            };
            (
                format!(
                    "{player} ×{} connection(s), {} calls",
                    scene.connections, scene.call_mode
                ),
                format!("{player} server"),
                scene.player.wire_format().to_owned(),
            )
        }
    };
    DubboScene {
        transporter,
        server_transporter: Some(server),
        server_threads: None,
        serialization,
        timeout_ms: u64::try_from(plan.timeout.as_millis()).unwrap_or(u64::MAX),
        data_length: scene.payload,
        shared_connections: scene.connections,
        concurrent_threads: scene.concurrency,
        runs_per_thread: scene.requests / u64::from(scene.concurrency.max(1)),
    }
}
