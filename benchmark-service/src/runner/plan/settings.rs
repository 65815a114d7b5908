//! [`Settings`]: one layer of what a run should measure, every field optional, and the two
//! operations on layers — [`Settings::over`] (a higher layer wins field by field) and
//! [`Settings::resolve`] (fill what no layer said from the built-in defaults, then check).
//!
//! A layer comes from the command line (`ClientArgs::settings`), from a preset file (the
//! `[settings]` table, read by serde: see `preset` for the file and
//! `file_values` for how its values are spelled), or from code. The field
//! names are the file's keys; `deny_unknown_fields` makes a misspelt key an error that names it
//! instead of a setting silently left at its default. Keeping the layers as data, instead of
//! mutating a config in the CLI, is what makes "flags given beside a preset override it"
//! testable without running anything.

use std::collections::BTreeMap;
use std::time::Duration;

use brisk::{Compression, Dispatch, QueueKind, SerializerKind, WriteMode};
use serde::Deserialize;

use super::file_values as file;
use super::{
    join, CallMode, ConnectKind, LoadShape, PayloadKind, Plan, Player, Scenario, VoloTransport,
};

/// One layer of settings; `None` means "this layer does not say".
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Frameworks under test.
    #[serde(deserialize_with = "file::names")]
    pub players: Option<Vec<Player>>,
    /// Measured window per scene and round (time mode); zero selects jkbenchmark's count mode,
    /// where `requests` calls make a round.
    #[serde(deserialize_with = "file::seconds")]
    pub scene_secs: Option<Duration>,
    /// Warm-up before each measured window (time mode).
    #[serde(rename = "warmup_ms", deserialize_with = "file::millis")]
    pub warmup_time: Option<Duration>,
    /// Calls each async caller keeps in flight (time mode).
    pub async_depth: Option<usize>,
    /// Whole load points `C:N:P`, instead of connections × concurrency × payload.
    #[serde(deserialize_with = "file::names")]
    pub configs: Option<Vec<LoadShape>>,
    /// Service methods.
    #[serde(deserialize_with = "file::names")]
    pub scenarios: Option<Vec<Scenario>>,
    /// Concurrent callers.
    #[serde(deserialize_with = "file::concurrency")]
    pub concurrency: Option<Vec<u32>>,
    /// Requests per scene (a round).
    #[serde(deserialize_with = "file::counts")]
    pub requests: Option<Vec<u64>>,
    /// Requests per scene for particular scenarios (presets only; ignored once a higher
    /// layer sets `requests`).
    #[serde(deserialize_with = "file::counts_by_scenario")]
    pub requests_by_scenario: Option<BTreeMap<Scenario, Vec<u64>>>,
    /// Call modes.
    #[serde(deserialize_with = "file::names")]
    pub call_modes: Option<Vec<CallMode>>,
    /// Connect types.
    #[serde(deserialize_with = "file::names")]
    pub connect_types: Option<Vec<ConnectKind>>,
    /// Connections (fixed: count; pooled: maximum).
    pub connections: Option<Vec<u32>>,
    /// Client write modes.
    #[serde(deserialize_with = "file::names")]
    pub write_modes: Option<Vec<WriteMode>>,
    /// Serializers.
    #[serde(deserialize_with = "file::names")]
    pub serializers: Option<Vec<SerializerKind>>,
    /// Body compression of brisk's client (its requests, and the answers it asks for).
    #[serde(deserialize_with = "file::names")]
    pub compressions: Option<Vec<Compression>>,
    /// Echo payload sizes in bytes.
    #[serde(deserialize_with = "file::byte_sizes")]
    pub payloads: Option<Vec<u64>>,
    /// What the echo payload's (and each stream item's) bytes are.
    #[serde(deserialize_with = "file::names")]
    pub payload_kinds: Option<Vec<PayloadKind>>,
    /// Server dispatch policies (one server per dispatch × queue when the runner starts it).
    #[serde(deserialize_with = "file::names")]
    pub dispatches: Option<Vec<Dispatch>>,
    /// Server worker-pool queues.
    #[serde(deserialize_with = "file::names")]
    pub queues: Option<Vec<QueueKind>>,
    /// volo's transports, client and server (one volo server per transport).
    #[serde(deserialize_with = "file::names")]
    pub volo_transports: Option<Vec<VoloTransport>>,
    /// Warm-up requests before each round (count mode).
    #[serde(deserialize_with = "file::count")]
    pub warmup: Option<u64>,
    /// Rounds per scene, interleaved across the variants of a point (figures are medians).
    pub rounds: Option<u32>,
    /// Pause before each round of each scene.
    #[serde(rename = "pause_ms", deserialize_with = "file::millis")]
    pub pause: Option<Duration>,
    /// Bound on in-flight calls in async call mode (None in the resolved plan = unbounded).
    pub max_in_flight: Option<usize>,
    /// brisk's `fixed` connections: most calls a connection's next write gathers before calls
    /// move on to the next connection (`coalesce_calls`; 1 = strict round-robin per call).
    pub coalesce_calls: Option<usize>,
    /// Per-request timeout.
    #[serde(rename = "timeout_ms", deserialize_with = "file::millis")]
    pub timeout: Option<Duration>,
    /// Print the boxed Dubbo report per scene.
    pub dubbo_report: Option<bool>,
    /// Option the charts compare (a series per value).
    pub compare_by: Option<String>,
    /// X axis of the charts.
    pub x_by: Option<String>,
    /// Also load the server's HTTP/JSON listener with `ab` and `wrk` when they are installed
    /// (see [`http_load`](crate::runner::http_load)).
    pub http_load: Option<bool>,
}

macro_rules! or_fields {
    ($hi:ident, $lo:ident; $($f:ident),*) => {
        Settings { $($f: $hi.$f.or($lo.$f)),* }
    };
}

impl Settings {
    /// `self` layered over `lower`: every field `self` sets wins. A `requests` list set
    /// here also hides `lower`'s per-scenario request counts.
    pub fn over(self, lower: Settings) -> Settings {
        let hide_by_scenario = self.requests.is_some();
        let hi = self;
        let mut lo = lower;
        if hide_by_scenario {
            lo.requests_by_scenario = None;
        }
        or_fields!(hi, lo; players, scene_secs, warmup_time, async_depth, configs, scenarios, concurrency, requests, requests_by_scenario, call_modes,
            connect_types, connections, write_modes, serializers, compressions, payloads,
            payload_kinds, dispatches, queues, volo_transports,
            warmup, rounds, pause, max_in_flight, coalesce_calls, timeout, dubbo_report, compare_by, x_by,
            http_load)
    }

    /// Fills unset fields with the built-in defaults and checks the values.
    pub fn resolve(self) -> Result<Plan, String> {
        fn non_empty<T>(name: &str, v: Vec<T>) -> Result<Vec<T>, String> {
            if v.is_empty() {
                Err(format!("--{name} needs at least one value"))
            } else {
                Ok(v)
            }
        }
        let plan = Plan {
            players: non_empty("players", self.players.unwrap_or(vec![Player::Brisk]))?,
            scene_secs: match self.scene_secs.unwrap_or(DEFAULT_SCENE) {
                d if d.is_zero() => None,
                d => Some(d),
            },
            warmup_time: self.warmup_time.unwrap_or(DEFAULT_WARMUP_TIME),
            async_depth: self.async_depth.unwrap_or(DEFAULT_ASYNC_DEPTH),
            configs: match self.configs {
                Some(c) => Some(non_empty("configs", c)?),
                None => None,
            },
            scenarios: non_empty("scenario", self.scenarios.unwrap_or(vec![Scenario::Nth]))?,
            concurrency: non_empty("concurrency", self.concurrency.unwrap_or(vec![20]))?,
            requests: non_empty("requests", self.requests.unwrap_or(vec![20_000]))?,
            requests_by_scenario: self.requests_by_scenario.unwrap_or_default(),
            call_modes: non_empty("call-mode", self.call_modes.unwrap_or(vec![CallMode::Sync]))?,
            connect_types: non_empty(
                "connect-type",
                self.connect_types.unwrap_or(vec![ConnectKind::Fixed]),
            )?,
            connections: non_empty("connections", self.connections.unwrap_or(vec![10]))?,
            write_modes: non_empty(
                "write-mode",
                self.write_modes.unwrap_or(vec![WriteMode::Async]),
            )?,
            serializers: non_empty(
                "serializer",
                self.serializers.unwrap_or(vec![SerializerKind::MsgPack]),
            )?,
            compressions: non_empty(
                "compression",
                self.compressions.unwrap_or(vec![Compression::None]),
            )?,
            payloads: non_empty("payload", self.payloads.unwrap_or(vec![1024]))?,
            payload_kinds: non_empty(
                "payload-kind",
                self.payload_kinds.unwrap_or(vec![PayloadKind::Fill]),
            )?,
            dispatches: non_empty("dispatch", self.dispatches.unwrap_or(vec![Dispatch::Pool]))?,
            queues: non_empty("queue", self.queues.unwrap_or(vec![QueueKind::Transfer]))?,
            volo_transports: non_empty(
                "volo-transport",
                self.volo_transports.unwrap_or(vec![VoloTransport::Pool]),
            )?,
            warmup: self.warmup.unwrap_or(1000),
            rounds: self.rounds.unwrap_or(3),
            pause: self.pause.unwrap_or(Duration::ZERO),
            max_in_flight: self.max_in_flight,
            coalesce_calls: self.coalesce_calls,
            timeout: self.timeout.unwrap_or(Duration::from_millis(5000)),
            dubbo_report: self.dubbo_report.unwrap_or(false),
            compare_by: self.compare_by,
            x_by: self.x_by,
            http_load: self.http_load.unwrap_or(false),
        };
        check(&plan)?;
        Ok(plan)
    }
}

/// Measured window of a scene round unless `--scene-secs` says otherwise.
pub const DEFAULT_SCENE: Duration = Duration::from_secs(1);

/// Warm-up before each measured window unless `--warmup-ms` says otherwise.
pub const DEFAULT_WARMUP_TIME: Duration = Duration::from_millis(300);

/// Calls each async caller keeps in flight unless `--async-depth` says otherwise.
pub const DEFAULT_ASYNC_DEPTH: usize = 8;

/// Rejects values no run can use (zero counts, no scene at all, payloads over 64 MiB);
/// the messages name the command-line flag.
fn check(plan: &Plan) -> Result<(), String> {
    if plan.concurrency.contains(&0) {
        return Err("--concurrency values must be at least 1".into());
    }
    let all_requests = plan
        .requests
        .iter()
        .chain(plan.requests_by_scenario.values().flatten());
    for &r in all_requests {
        if r == 0 {
            return Err("--requests values must be at least 1".into());
        }
    }
    if plan.connections.contains(&0) {
        return Err("--connections values must be at least 1".into());
    }
    if plan.rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    if plan.max_in_flight == Some(0) {
        return Err("--max-in-flight must be at least 1".into());
    }
    if plan.coalesce_calls == Some(0) {
        return Err(
            "--coalesce-calls must be at least 1 (1: every call to the next connection)".into(),
        );
    }
    if plan.async_depth == 0 {
        return Err("--async-depth must be at least 1".into());
    }
    if plan.scenes().is_empty() {
        return Err(format!(
            "no scene to run: none of the players ({}) implements the scenarios ({}); raw \
             implements echo only, and the streams (stream, pingpong) are brisk's and tonic's",
            join(&plan.players),
            join(&plan.scenarios)
        ));
    }
    if plan.timeout.is_zero() {
        return Err("--timeout-ms must be at least 1".into());
    }
    let config_payloads = plan.configs.iter().flatten().map(|c| c.payload);
    if plan
        .payloads
        .iter()
        .copied()
        .chain(config_payloads)
        .any(|p| p > 64 * 1024 * 1024)
    {
        return Err("--payload values must be at most 64 MiB".into());
    }
    Ok(())
}
