//! [`Plan`]: a fully resolved run — every dimension a non-empty list of checked values. A `Plan`
//! is only made by [`Settings::resolve`](super::Settings::resolve), which checks it; the cross
//! product (`cross_product`) and the chart choices (`charts`) are read off it.

use std::collections::BTreeMap;
use std::time::Duration;

use brisk::{Compression, Dispatch, QueueKind, SerializerKind, WriteMode};

use super::{CallMode, ConnectKind, LoadShape, PayloadKind, Player, Scenario, VoloTransport};

/// A fully resolved run: every dimension has at least one value.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Frameworks under test (interleaved round by round).
    pub players: Vec<Player>,
    /// Measured window per scene round; `None` = count mode (`requests` calls per round).
    pub scene_secs: Option<Duration>,
    /// Warm-up before each measured window (time mode; count mode warms up with `warmup`
    /// calls).
    pub warmup_time: Duration,
    /// Calls each async caller keeps in flight (time mode; count mode fires every call of the
    /// caller's share, bounded only by `max_in_flight`).
    pub async_depth: usize,
    /// Whole load points `C:N:P`, replacing connections × concurrency × payload.
    pub configs: Option<Vec<LoadShape>>,
    /// Service methods.
    pub scenarios: Vec<Scenario>,
    /// Concurrent callers.
    pub concurrency: Vec<u32>,
    /// Requests per scene, unless `requests_by_scenario` names the scenario.
    pub requests: Vec<u64>,
    /// Requests per scene for particular scenarios.
    pub requests_by_scenario: BTreeMap<Scenario, Vec<u64>>,
    /// Call modes.
    pub call_modes: Vec<CallMode>,
    /// Connect types.
    pub connect_types: Vec<ConnectKind>,
    /// Connections (fixed: count; pooled: maximum).
    pub connections: Vec<u32>,
    /// Client write modes.
    pub write_modes: Vec<WriteMode>,
    /// Serializers.
    pub serializers: Vec<SerializerKind>,
    /// brisk's body compressions.
    pub compressions: Vec<Compression>,
    /// Echo payload sizes.
    pub payloads: Vec<u64>,
    /// What the payloads hold.
    pub payload_kinds: Vec<PayloadKind>,
    /// Server dispatch policies.
    pub dispatches: Vec<Dispatch>,
    /// Server queues.
    pub queues: Vec<QueueKind>,
    /// volo's transports (one volo server per transport).
    pub volo_transports: Vec<VoloTransport>,
    /// Warm-up requests per scene round (count mode).
    pub warmup: u64,
    /// Rounds per scene (interleaved across the variants of a point).
    pub rounds: u32,
    /// Pause before each round of each scene.
    pub pause: Duration,
    /// In-flight bound for async calls (`None` = unbounded, as in jkbenchmark).
    pub max_in_flight: Option<usize>,
    /// brisk's `coalesce_calls` for `fixed` connections (`None`: the client's default).
    pub coalesce_calls: Option<usize>,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Print the Dubbo report per scene.
    pub dubbo_report: bool,
    /// Chart series option (auto when `None`).
    pub compare_by: Option<String>,
    /// Chart x axis (auto when `None`).
    pub x_by: Option<String>,
    /// After each server's scenes, load its HTTP/JSON listener with `ab` and `wrk` (when
    /// installed) and record seed 001's percentile table for every scene.
    pub http_load: bool,
}

impl Plan {
    /// The requests list that applies to `scenario`.
    pub fn requests_for(&self, scenario: Scenario) -> &[u64] {
        self.requests_by_scenario
            .get(&scenario)
            .map(Vec::as_slice)
            .unwrap_or(&self.requests)
    }
}
