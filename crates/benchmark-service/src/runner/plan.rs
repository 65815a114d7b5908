//! What a benchmark run measures: the option dimensions, their cross product
//! ([`Plan::scenes`]) and the presets that reproduce the classic comparisons.
//!
//! Every dimension is a list, as in jkbenchmark, and a [`Scene`] is one point of
//! the cross product. Settings come in layers: [`Settings`] holds what one layer
//! says (every field optional), [`Settings::over`] puts the command line over a
//! [`Preset`]'s layer, and [`Settings::resolve`] fills whatever is still unset
//! from the built-in defaults. Keeping the layers as data (instead of mutating a
//! config in the CLI) is what makes "flags given beside a preset override it"
//! testable without running anything.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use brisk::{Dispatch, QueueKind, SerializerKind, WriteMode};

pub use crate::players::brisk::{BriskOptions, ConnectKind};
pub use crate::scenario::Scenario;

/// How callers wait for their calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallMode {
    /// Each caller waits for its response before the next call.
    Sync,
    /// Callers fire calls without waiting and only record completions.
    Async,
}

impl CallMode {
    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            CallMode::Sync => "sync",
            CallMode::Async => "async",
        }
    }
}

macro_rules! display_by_name {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    )*};
}
display_by_name!(CallMode);

impl FromStr for CallMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "sync" => Ok(CallMode::Sync),
            "async" => Ok(CallMode::Async),
            other => Err(format!(
                "unknown call mode `{other}` (expected sync or async)"
            )),
        }
    }
}

/// Parses a size like `1024`, `1k`, `1KiB`, `50KB`, `1m` into bytes (k = 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (digits, mult) = if let Some(d) = t
        .strip_suffix("kib")
        .or_else(|| t.strip_suffix("kb"))
        .or_else(|| t.strip_suffix('k'))
    {
        (d, 1024)
    } else if let Some(d) = t
        .strip_suffix("mib")
        .or_else(|| t.strip_suffix("mb"))
        .or_else(|| t.strip_suffix('m'))
    {
        (d, 1024 * 1024)
    } else {
        (t.strip_suffix('b').unwrap_or(&t), 1)
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("`{s}` is not a byte size (e.g. 1024, 1k, 100KiB)"))
}

/// Parses a count like `20000`, `20k`, `1m`, `100_000`.
pub fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase().replace('_', "");
    let (digits, mult) = match t.strip_suffix('k') {
        Some(d) => (d.to_owned(), 1000),
        None => match t.strip_suffix('m') {
            Some(d) => (d.to_owned(), 1_000_000),
            None => (t.clone(), 1),
        },
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("`{s}` is not a count (e.g. 20000 or 20k)"))
}

/// One layer of settings; `None` means "this layer does not say".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// Service methods.
    pub scenarios: Option<Vec<Scenario>>,
    /// Concurrent callers.
    pub concurrency: Option<Vec<u32>>,
    /// Requests per scene (a round).
    pub requests: Option<Vec<u64>>,
    /// Requests per scene for particular scenarios (presets only; ignored once a higher
    /// layer sets `requests`).
    pub requests_by_scenario: Option<BTreeMap<Scenario, Vec<u64>>>,
    /// Call modes.
    pub call_modes: Option<Vec<CallMode>>,
    /// Connect types.
    pub connect_types: Option<Vec<ConnectKind>>,
    /// Connections (fixed: count; pooled: maximum).
    pub connections: Option<Vec<u32>>,
    /// Client write modes.
    pub write_modes: Option<Vec<WriteMode>>,
    /// Serializers.
    pub serializers: Option<Vec<SerializerKind>>,
    /// Echo payload sizes in bytes.
    pub payloads: Option<Vec<u64>>,
    /// Server dispatch policies (one server per dispatch × queue when the runner starts it).
    pub dispatches: Option<Vec<Dispatch>>,
    /// Server worker-pool queues.
    pub queues: Option<Vec<QueueKind>>,
    /// Warm-up requests before each scene.
    pub warmup: Option<u64>,
    /// Rounds per scene (the shortest is kept).
    pub rounds: Option<u32>,
    /// Pause between rounds.
    pub pause: Option<Duration>,
    /// Bound on in-flight calls in async call mode (None in the resolved plan = unbounded).
    pub max_in_flight: Option<usize>,
    /// Per-request timeout.
    pub timeout: Option<Duration>,
    /// Print the boxed Dubbo report per scene.
    pub dubbo_report: Option<bool>,
    /// Option the charts compare (a series per value).
    pub compare_by: Option<String>,
    /// X axis of the charts.
    pub x_by: Option<String>,
    /// Also load the server's HTTP/JSON listener with `ab` and `wrk` when they are installed
    /// (see [`http_load`](super::http_load)).
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
        or_fields!(hi, lo; scenarios, concurrency, requests, requests_by_scenario, call_modes,
            connect_types, connections, write_modes, serializers, payloads, dispatches, queues,
            warmup, rounds, pause, max_in_flight, timeout, dubbo_report, compare_by, x_by,
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
            payloads: non_empty("payload", self.payloads.unwrap_or(vec![1024]))?,
            dispatches: non_empty("dispatch", self.dispatches.unwrap_or(vec![Dispatch::Pool]))?,
            queues: non_empty("queue", self.queues.unwrap_or(vec![QueueKind::Transfer]))?,
            warmup: self.warmup.unwrap_or(1000),
            rounds: self.rounds.unwrap_or(2),
            pause: self.pause.unwrap_or(Duration::from_millis(3000)),
            max_in_flight: self.max_in_flight,
            timeout: self.timeout.unwrap_or(Duration::from_millis(5000)),
            dubbo_report: self.dubbo_report.unwrap_or(false),
            compare_by: self.compare_by,
            x_by: self.x_by,
            http_load: self.http_load.unwrap_or(false),
        };
        plan.validate()?;
        Ok(plan)
    }
}

/// A fully resolved run: every dimension has at least one value.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
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
    /// Echo payload sizes.
    pub payloads: Vec<u64>,
    /// Server dispatch policies.
    pub dispatches: Vec<Dispatch>,
    /// Server queues.
    pub queues: Vec<QueueKind>,
    /// Warm-up requests per scene.
    pub warmup: u64,
    /// Rounds per scene.
    pub rounds: u32,
    /// Pause between rounds.
    pub pause: Duration,
    /// In-flight bound for async calls (`None` = unbounded, as in jkbenchmark).
    pub max_in_flight: Option<usize>,
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

/// The server side of a scene group: one server per (dispatch, queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerChoice {
    /// Dispatch policy.
    pub dispatch: Dispatch,
    /// Worker-pool queue (meaningless, and `None`, for `direct`).
    pub queue: Option<QueueKind>,
}

impl ServerChoice {
    /// The queue's name, or an empty string for direct dispatch.
    pub fn queue_name(&self) -> String {
        self.queue.map(|q| q.to_string()).unwrap_or_default()
    }
}

/// One point of the cross product.
#[derive(Debug, Clone, PartialEq)]
pub struct Scene {
    /// Service method.
    pub scenario: Scenario,
    /// Concurrent callers.
    pub concurrency: u32,
    /// Requests in a round.
    pub requests: u64,
    /// Call mode.
    pub call_mode: CallMode,
    /// Connect type.
    pub connect: ConnectKind,
    /// Connections (1 for reused and percall).
    pub connections: u32,
    /// Write mode.
    pub write_mode: WriteMode,
    /// Serializer.
    pub serializer: SerializerKind,
    /// Echo payload bytes (0 for other scenarios).
    pub payload: u64,
    /// The server this scene runs against.
    pub server: ServerChoice,
}

impl Scene {
    /// jkbenchmark's scene name plus the options that tell scenes of one run apart.
    pub fn label(&self) -> String {
        let mut s = format!(
            "brisk-{}-c{}-n{}-{} [{}",
            self.scenario, self.concurrency, self.requests, self.call_mode, self.connect
        );
        if self.connect.uses_connection_count() {
            s.push_str(&format!("/{}", self.connections));
        }
        s.push_str(&format!(
            ", write {}, {}, {}",
            self.write_mode, self.serializer, self.server.dispatch
        ));
        if let Some(q) = self.server.queue {
            s.push_str(&format!("/{q}"));
        }
        if self.scenario == Scenario::Echo {
            s.push_str(&format!(", {} B", self.payload));
        }
        s.push(']');
        s
    }
}

impl Plan {
    fn validate(&self) -> Result<(), String> {
        if self.concurrency.contains(&0) {
            return Err("--concurrency values must be at least 1".into());
        }
        let all_requests = self
            .requests
            .iter()
            .chain(self.requests_by_scenario.values().flatten());
        for &r in all_requests {
            if r == 0 {
                return Err("--requests values must be at least 1".into());
            }
        }
        if self.connections.contains(&0) {
            return Err("--connections values must be at least 1".into());
        }
        if self.rounds == 0 {
            return Err("--rounds must be at least 1".into());
        }
        if self.max_in_flight == Some(0) {
            return Err("--max-in-flight must be at least 1".into());
        }
        if self.timeout.is_zero() {
            return Err("--timeout-ms must be at least 1".into());
        }
        if self.payloads.iter().any(|&p| p > 64 * 1024 * 1024) {
            return Err("--payload values must be at most 64 MiB".into());
        }
        Ok(())
    }

    /// The servers to run, in order: dispatch × queue, with `direct` taken once (its
    /// queue is unused).
    pub fn servers(&self) -> Vec<ServerChoice> {
        let mut out = Vec::new();
        for &dispatch in &self.dispatches {
            match dispatch {
                Dispatch::Direct => out.push(ServerChoice {
                    dispatch,
                    queue: None,
                }),
                Dispatch::Pool => out.extend(self.queues.iter().map(|&q| ServerChoice {
                    dispatch,
                    queue: Some(q),
                })),
            }
        }
        dedup(out)
    }

    /// The requests list that applies to `scenario`.
    pub fn requests_for(&self, scenario: Scenario) -> &[u64] {
        self.requests_by_scenario
            .get(&scenario)
            .map(Vec::as_slice)
            .unwrap_or(&self.requests)
    }

    /// The cross product, grouped by server (outermost) and with concurrency innermost,
    /// so that the scenes of one chart line run back to back. Dimensions that do not
    /// apply collapse: payload is used by echo only, the connection count by pooled and
    /// fixed only.
    pub fn scenes(&self) -> Vec<Scene> {
        let mut out = Vec::new();
        for server in self.servers() {
            for &scenario in &dedup(self.scenarios.clone()) {
                let payloads = if scenario == Scenario::Echo {
                    dedup(self.payloads.clone())
                } else {
                    vec![0]
                };
                for &payload in &payloads {
                    for &connect in &dedup(self.connect_types.clone()) {
                        let conns = if connect.uses_connection_count() {
                            dedup(self.connections.clone())
                        } else {
                            vec![1]
                        };
                        for &connections in &conns {
                            for &write_mode in &dedup(self.write_modes.clone()) {
                                for &serializer in &dedup(self.serializers.clone()) {
                                    for &call_mode in &dedup(self.call_modes.clone()) {
                                        for &requests in
                                            &dedup(self.requests_for(scenario).to_vec())
                                        {
                                            for &concurrency in &dedup(self.concurrency.clone()) {
                                                out.push(Scene {
                                                    scenario,
                                                    concurrency,
                                                    requests,
                                                    call_mode,
                                                    connect,
                                                    connections,
                                                    write_mode,
                                                    serializer,
                                                    payload,
                                                    server,
                                                });
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The option the charts compare: `compare_by` if set, else the first of
    /// connect_type, queue, dispatch, write_mode, serializer, connections that takes more
    /// than one value in this plan, else `call_mode`.
    pub fn chart_compare_by(&self) -> String {
        if let Some(c) = &self.compare_by {
            return c.clone();
        }
        let scenes = self.scenes();
        let distinct = |f: SceneKey| {
            let mut v: Vec<String> = scenes.iter().map(f).collect();
            v.sort();
            v.dedup();
            v.len()
        };
        let candidates: [(&str, SceneKey); 6] = [
            ("connect_type", |s| s.connect.to_string()),
            ("queue", |s| s.server.queue_name()),
            ("dispatch", |s| s.server.dispatch.to_string()),
            ("write_mode", |s| s.write_mode.to_string()),
            ("serializer", |s| s.serializer.to_string()),
            ("connections", |s| s.connections.to_string()),
        ];
        candidates
            .iter()
            .find(|(_, f)| distinct(*f) > 1)
            .map(|(name, _)| (*name).to_owned())
            .unwrap_or_else(|| "call_mode".to_owned())
    }

    /// The charts' x axis: `x_by` if set, else `payload` when several payloads are swept at
    /// a single concurrency, else `concurrency`.
    pub fn chart_x_by(&self) -> String {
        if let Some(x) = &self.x_by {
            return x.clone();
        }
        let echo = self.scenarios.contains(&Scenario::Echo);
        if echo
            && dedup(self.payloads.clone()).len() > 1
            && dedup(self.concurrency.clone()).len() == 1
        {
            "payload".to_owned()
        } else {
            "concurrency".to_owned()
        }
    }
}

/// One option of a scene as text.
type SceneKey = fn(&Scene) -> String;

/// Removes repeated values, keeping the first occurrence's order.
fn dedup<T: PartialEq + Clone>(v: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(v.len());
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// Logical CPUs (at least 1).
pub fn cpus() -> u32 {
    std::thread::available_parallelism()
        .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
        .unwrap_or(1)
}

/// A named set of defaults reproducing one of the classic comparisons, sized to finish in
/// a few minutes on a 2-core machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// Seeds 000/003: echo 1 KiB over one fixed connection, 100 sync callers; compares
    /// serializers and prints the boxed Dubbo report.
    DubboReport,
    /// Seed 004: nth/cache/file/db × c 1/20/50/100 × sync/async over 10 fixed connections.
    JkrpcMatrix,
    /// Seed 004: nth async, reused/pooled/fixed × c 1/20/50/100.
    ConnectType,
    /// Seed 004: nth async on the worker pool, blocking vs transfer queue.
    Queue,
    /// Seed 004: nth async, sync vs async write completion.
    WriteMode,
    /// Seed 002: echo 1k…100k at c = cores, with server CPU % and MB/s.
    PayloadSweep,
    /// Seed 001: nth with a new connection per call vs persistent connections, c = 10; then
    /// `ab`, `ab -k` and `wrk` against the server's HTTP/JSON listener when installed.
    Keepalive,
    /// Every scenario with tiny counts: an end-to-end check in seconds.
    Smoke,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 8] = [
        Preset::DubboReport,
        Preset::JkrpcMatrix,
        Preset::ConnectType,
        Preset::Queue,
        Preset::WriteMode,
        Preset::PayloadSweep,
        Preset::Keepalive,
        Preset::Smoke,
    ];

    /// The preset's command-line name (also its output directory under `bench-results/`).
    pub fn name(self) -> &'static str {
        match self {
            Preset::DubboReport => "dubbo-report",
            Preset::JkrpcMatrix => "jkrpc-matrix",
            Preset::ConnectType => "connect-type",
            Preset::Queue => "queue",
            Preset::WriteMode => "write-mode",
            Preset::PayloadSweep => "payload-sweep",
            Preset::Keepalive => "keepalive",
            Preset::Smoke => "smoke",
        }
    }

    /// A title for reports.
    pub fn title(self) -> &'static str {
        match self {
            Preset::DubboReport => {
                "brisk — Dubbo remoting performance test (echo 1 KiB, 1 connection, 100 callers)"
            }
            Preset::JkrpcMatrix => {
                "brisk — jkrpc benchmark matrix (scenarios × concurrency × call mode)"
            }
            Preset::ConnectType => "brisk — connection types (nth, async)",
            Preset::Queue => "brisk — worker-pool queues (nth, async)",
            Preset::WriteMode => "brisk — write modes (nth, async)",
            Preset::PayloadSweep => "brisk — echo payload sweep",
            Preset::Keepalive => "brisk — connection per call vs persistent connections",
            Preset::Smoke => "brisk — smoke run of every scenario",
        }
    }

    /// The preset's settings layer.
    pub fn settings(self) -> Settings {
        let c4 = Some(vec![1, 20, 50, 100]);
        let base = Settings {
            pause: Some(Duration::from_millis(500)),
            ..Settings::default()
        };
        match self {
            Preset::DubboReport => Settings {
                scenarios: Some(vec![Scenario::Echo]),
                payloads: Some(vec![1024]),
                connect_types: Some(vec![ConnectKind::Fixed]),
                connections: Some(vec![1]),
                concurrency: Some(vec![100]),
                call_modes: Some(vec![CallMode::Sync]),
                // 100 callers × 1 000 calls (the original ran 10 000 each).
                requests: Some(vec![100_000]),
                serializers: Some(SerializerKind::ALL.to_vec()),
                rounds: Some(1),
                dubbo_report: Some(true),
                ..base
            },
            Preset::JkrpcMatrix => Settings {
                scenarios: Some(vec![
                    Scenario::Nth,
                    Scenario::Cache,
                    Scenario::File,
                    Scenario::Db,
                ]),
                concurrency: c4,
                call_modes: Some(vec![CallMode::Sync, CallMode::Async]),
                connect_types: Some(vec![ConnectKind::Fixed]),
                connections: Some(vec![10]),
                requests_by_scenario: Some(BTreeMap::from([
                    (Scenario::Nth, vec![20_000]),
                    (Scenario::Cache, vec![20_000]),
                    (Scenario::File, vec![5_000]),
                    (Scenario::Db, vec![5_000]),
                ])),
                warmup: Some(500),
                pause: Some(Duration::from_millis(300)),
                compare_by: Some("call_mode".into()),
                ..base
            },
            Preset::ConnectType => Settings {
                scenarios: Some(vec![Scenario::Nth]),
                call_modes: Some(vec![CallMode::Async]),
                connect_types: Some(vec![
                    ConnectKind::Reused,
                    ConnectKind::Pooled,
                    ConnectKind::Fixed,
                ]),
                connections: Some(vec![10]),
                concurrency: c4,
                requests: Some(vec![100_000]),
                ..base
            },
            Preset::Queue => Settings {
                scenarios: Some(vec![Scenario::Nth]),
                call_modes: Some(vec![CallMode::Async]),
                dispatches: Some(vec![Dispatch::Pool]),
                queues: Some(vec![QueueKind::Blocking, QueueKind::Transfer]),
                concurrency: c4,
                requests: Some(vec![100_000]),
                ..base
            },
            Preset::WriteMode => Settings {
                scenarios: Some(vec![Scenario::Nth]),
                call_modes: Some(vec![CallMode::Async]),
                write_modes: Some(vec![WriteMode::Sync, WriteMode::Async]),
                concurrency: c4,
                requests: Some(vec![100_000]),
                ..base
            },
            Preset::PayloadSweep => Settings {
                scenarios: Some(vec![Scenario::Echo]),
                payloads: Some(vec![1024, 2048, 5120, 10_240, 51_200, 102_400]),
                concurrency: Some(vec![cpus()]),
                call_modes: Some(vec![CallMode::Sync]),
                requests: Some(vec![20_000]),
                warmup: Some(500),
                x_by: Some("payload".into()),
                ..base
            },
            Preset::Keepalive => Settings {
                scenarios: Some(vec![Scenario::Nth]),
                connect_types: Some(vec![ConnectKind::PerCall, ConnectKind::Fixed]),
                concurrency: Some(vec![10]),
                call_modes: Some(vec![CallMode::Sync]),
                // ab -n 10000 -c 10, scaled so the per-call connections fit the ephemeral
                // port range together with their TIME_WAIT sockets.
                requests: Some(vec![5_000]),
                warmup: Some(200),
                // Then `ab`, `ab -k` and `wrk` against the same server's HTTP/JSON listener.
                http_load: Some(true),
                ..base
            },
            Preset::Smoke => Settings {
                scenarios: Some(Scenario::ALL.to_vec()),
                concurrency: Some(vec![4]),
                requests: Some(vec![200]),
                call_modes: Some(vec![CallMode::Sync, CallMode::Async]),
                connections: Some(vec![2]),
                payloads: Some(vec![1024]),
                warmup: Some(10),
                rounds: Some(1),
                pause: Some(Duration::ZERO),
                compare_by: Some("call_mode".into()),
                ..base
            },
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase().replace('_', "-");
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == t)
            .ok_or_else(|| {
                let names: Vec<&str> = Preset::ALL.iter().map(|p| p.name()).collect();
                format!(
                    "unknown preset `{s}` (expected one of: {})",
                    names.join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_resolve_to_one_scene() {
        let plan = Settings::default().resolve().unwrap();
        let scenes = plan.scenes();
        assert_eq!(scenes.len(), 1);
        assert_eq!(scenes[0].scenario, Scenario::Nth);
        assert_eq!(scenes[0].connect, ConnectKind::Fixed);
        assert_eq!(scenes[0].payload, 0);
        assert_eq!(plan.rounds, 2);
        assert_eq!(plan.pause, Duration::from_secs(3));
        assert_eq!(plan.max_in_flight, None);
    }

    #[test]
    fn cross_product_collapses_dimensions_that_do_not_apply() {
        let plan = Settings {
            scenarios: Some(vec![Scenario::Nth, Scenario::Echo]),
            payloads: Some(vec![1024, 2048]),
            connect_types: Some(vec![ConnectKind::Reused, ConnectKind::Fixed]),
            connections: Some(vec![1, 10]),
            concurrency: Some(vec![1, 20]),
            call_modes: Some(vec![CallMode::Sync, CallMode::Async]),
            dispatches: Some(vec![Dispatch::Direct, Dispatch::Pool]),
            queues: Some(vec![QueueKind::Blocking, QueueKind::Transfer]),
            ..Settings::default()
        }
        .resolve()
        .unwrap();
        // servers: direct (once) + pool × 2 queues
        assert_eq!(plan.servers().len(), 3);
        // per server: scenarios {nth: 1 payload, echo: 2} = 3 × connect {reused: 1,
        // fixed: 2 counts} = 3 × 2 call modes × 2 concurrencies
        assert_eq!(plan.scenes().len(), 3 * 3 * 3 * 2 * 2);
        assert!(plan
            .scenes()
            .iter()
            .all(|s| (s.scenario == Scenario::Echo) == (s.payload > 0)));
        assert!(plan
            .scenes()
            .iter()
            .filter(|s| s.connect == ConnectKind::Reused)
            .all(|s| s.connections == 1));
        // concurrency is innermost
        let s = plan.scenes();
        assert_eq!((s[0].concurrency, s[1].concurrency), (1, 20));
        assert_eq!(s[0].call_mode, s[1].call_mode);
    }

    #[test]
    fn flags_override_a_preset_field_by_field() {
        let cli = Settings {
            concurrency: Some(vec![7]),
            rounds: Some(3),
            ..Settings::default()
        };
        let plan = cli.over(Preset::ConnectType.settings()).resolve().unwrap();
        assert_eq!(plan.concurrency, vec![7]);
        assert_eq!(plan.rounds, 3);
        // untouched preset fields stay
        assert_eq!(plan.connect_types.len(), 3);
        assert_eq!(plan.call_modes, vec![CallMode::Async]);
        assert_eq!(plan.pause, Duration::from_millis(500));
        assert_eq!(plan.scenes().len(), 3);
        assert_eq!(plan.chart_compare_by(), "connect_type");
    }

    #[test]
    fn requests_flag_hides_per_scenario_counts() {
        let preset = Preset::JkrpcMatrix.settings();
        let plan = Settings::default().over(preset.clone()).resolve().unwrap();
        assert_eq!(plan.requests_for(Scenario::Db), &[5_000]);
        assert_eq!(plan.requests_for(Scenario::Nth), &[20_000]);
        let cli = Settings {
            requests: Some(vec![123]),
            ..Settings::default()
        };
        let plan = cli.over(preset).resolve().unwrap();
        assert_eq!(plan.requests_for(Scenario::Db), &[123]);
        assert_eq!(plan.scenes().len(), 4 * 4 * 2);
        assert_eq!(plan.chart_compare_by(), "call_mode");
    }

    #[test]
    fn presets_resolve_and_pick_sensible_charts() {
        for p in Preset::ALL {
            let plan = p.settings().resolve().unwrap();
            assert!(!plan.scenes().is_empty(), "{p}");
            assert_eq!(p.name().parse::<Preset>().unwrap(), p);
        }
        let sweep = Preset::PayloadSweep.settings().resolve().unwrap();
        assert_eq!(sweep.chart_x_by(), "payload");
        assert_eq!(sweep.scenes().len(), 6);
        let q = Preset::Queue.settings().resolve().unwrap();
        assert_eq!(q.chart_compare_by(), "queue");
        let w = Preset::WriteMode.settings().resolve().unwrap();
        assert_eq!(w.chart_compare_by(), "write_mode");
        let k = Preset::Keepalive.settings().resolve().unwrap();
        assert_eq!(k.chart_compare_by(), "connect_type");
        let smoke = Preset::Smoke.settings().resolve().unwrap();
        let names: Vec<Scenario> = smoke.scenes().iter().map(|s| s.scenario).collect();
        for s in Scenario::ALL {
            assert!(names.contains(&s));
        }
        assert_eq!(smoke.rounds, 1);
        assert_eq!(smoke.pause, Duration::ZERO);
    }

    #[test]
    fn bad_values_are_errors_not_panics() {
        assert!("nope".parse::<Scenario>().is_err());
        assert!("x".parse::<Preset>().is_err());
        assert!(parse_bytes("12q").is_err());
        assert_eq!(parse_bytes("1k").unwrap(), 1024);
        assert_eq!(parse_bytes("100KiB").unwrap(), 102_400);
        assert_eq!(parse_count("20k").unwrap(), 20_000);
        assert!(parse_count("-1").is_err());
        let zero = Settings {
            concurrency: Some(vec![0]),
            ..Settings::default()
        };
        assert!(zero.resolve().is_err());
        let empty = Settings {
            scenarios: Some(vec![]),
            ..Settings::default()
        };
        assert!(empty.resolve().is_err());
    }
}
