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
pub use crate::players::Player;
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

/// One load point given whole, `C:N:P`: C connections, N calls in flight (sync callers), P
/// bytes of echo payload (the `peers` preset; replaces the connections × concurrency × payload
/// cross product).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadShape {
    /// Connections (C).
    pub connections: u32,
    /// Calls in flight (N): the scene's concurrency.
    pub in_flight: u32,
    /// Echo payload bytes (P).
    pub payload: u64,
}

impl LoadShape {
    /// `C:N:P`.
    pub fn label(&self) -> String {
        format!("{}:{}:{}", self.connections, self.in_flight, self.payload)
    }
}

impl FromStr for LoadShape {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.trim().split(':').collect();
        let [c, n, p] = parts[..] else {
            return Err(format!(
                "config `{s}` is not C:N:P (connections : calls in flight : payload bytes)"
            ));
        };
        let positive = |v: &str, what: &str| match v.trim().parse::<u32>() {
            Ok(x) if x > 0 => Ok(x),
            _ => Err(format!("config `{s}`: {what} must be a positive integer")),
        };
        Ok(LoadShape {
            connections: positive(c, "C (connections)")?,
            in_flight: positive(n, "N (calls in flight)")?,
            payload: parse_bytes(p).map_err(|e| format!("config `{s}`: {e}"))?,
        })
    }
}

/// One layer of settings; `None` means "this layer does not say".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// Frameworks under test.
    pub players: Option<Vec<Player>>,
    /// Measured window per scene and round (time mode); zero selects jkbenchmark's count mode,
    /// where `requests` calls make a round.
    pub scene_secs: Option<Duration>,
    /// Warm-up before each measured window (time mode).
    pub warmup_time: Option<Duration>,
    /// Calls each async caller keeps in flight (time mode).
    pub async_depth: Option<usize>,
    /// Whole load points `C:N:P`, instead of connections × concurrency × payload.
    pub configs: Option<Vec<LoadShape>>,
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
    /// Warm-up requests before each round (count mode).
    pub warmup: Option<u64>,
    /// Rounds per scene, interleaved across the variants of a point (figures are medians).
    pub rounds: Option<u32>,
    /// Pause before each round of each scene.
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
        or_fields!(hi, lo; players, scene_secs, warmup_time, async_depth, configs, scenarios, concurrency, requests, requests_by_scenario, call_modes,
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
            payloads: non_empty("payload", self.payloads.unwrap_or(vec![1024]))?,
            dispatches: non_empty("dispatch", self.dispatches.unwrap_or(vec![Dispatch::Pool]))?,
            queues: non_empty("queue", self.queues.unwrap_or(vec![QueueKind::Transfer]))?,
            warmup: self.warmup.unwrap_or(1000),
            rounds: self.rounds.unwrap_or(3),
            pause: self.pause.unwrap_or(Duration::ZERO),
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

/// Measured window of a scene round unless `--scene-secs` says otherwise.
pub const DEFAULT_SCENE: Duration = Duration::from_secs(1);

/// Warm-up before each measured window unless `--warmup-ms` says otherwise.
pub const DEFAULT_WARMUP_TIME: Duration = Duration::from_millis(300);

/// Calls each async caller keeps in flight unless `--async-depth` says otherwise.
pub const DEFAULT_ASYNC_DEPTH: usize = 8;

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
    /// Echo payload sizes.
    pub payloads: Vec<u64>,
    /// Server dispatch policies.
    pub dispatches: Vec<Dispatch>,
    /// Server queues.
    pub queues: Vec<QueueKind>,
    /// Warm-up requests per scene round (count mode).
    pub warmup: u64,
    /// Rounds per scene (interleaved across the variants of a point).
    pub rounds: u32,
    /// Pause before each round of each scene.
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
    /// The framework under test.
    pub player: Player,
    /// Service method.
    pub scenario: Scenario,
    /// Concurrent callers.
    pub concurrency: u32,
    /// Requests in a round (count mode; 0 in time mode, where the window decides).
    pub requests: u64,
    /// Call mode.
    pub call_mode: CallMode,
    /// Connect type (brisk; peers report `fixed`: their own connections, as many as
    /// `connections`).
    pub connect: ConnectKind,
    /// Connections (1 for reused and percall).
    pub connections: u32,
    /// Write mode (brisk only).
    pub write_mode: WriteMode,
    /// Serializer (brisk only).
    pub serializer: SerializerKind,
    /// Echo payload bytes (0 for other scenarios).
    pub payload: u64,
    /// The brisk server this scene runs against (`None` for the peers, which have one server
    /// each).
    pub server: Option<ServerChoice>,
}

/// The server a scene runs against: a player, and for brisk its dispatch × queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerKey {
    /// The framework.
    pub player: Player,
    /// brisk's dispatch × queue (`None` for the peers).
    pub choice: Option<ServerChoice>,
}

impl Scene {
    /// The server this scene runs against.
    pub fn server_key(&self) -> ServerKey {
        ServerKey {
            player: self.player,
            choice: self.server,
        }
    }

    /// jkbenchmark's scene name, `<player>-<action>-c<conc>-n<requests>-<sync|async>`, with
    /// `requests` the calls of the round (in time mode: those the window measured).
    pub fn name(&self, requests: u64) -> String {
        format!(
            "{}-{}-c{}-n{}-{}",
            self.player, self.scenario, self.concurrency, requests, self.call_mode
        )
    }

    /// The options that tell this scene apart from the others of its run, in brackets.
    pub fn options(&self) -> String {
        let mut s = String::from("[");
        match self.server {
            Some(server) => {
                s.push_str(&format!("{}", self.connect));
                if self.connect.uses_connection_count() {
                    s.push_str(&format!("/{}", self.connections));
                }
                s.push_str(&format!(
                    ", write {}, {}, {}",
                    self.write_mode, self.serializer, server.dispatch
                ));
                if let Some(q) = server.queue {
                    s.push_str(&format!("/{q}"));
                }
            }
            None => s.push_str(&format!("{} conn", self.connections)),
        }
        if self.scenario == Scenario::Echo {
            s.push_str(&format!(", {} B", self.payload));
        }
        s.push(']');
        s
    }

    /// [`name`](Self::name) with the scene's configured requests, then its
    /// [`options`](Self::options).
    pub fn label(&self) -> String {
        format!("{} {}", self.name(self.requests), self.options())
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
        if self.async_depth == 0 {
            return Err("--async-depth must be at least 1".into());
        }
        if self.scenes().is_empty() {
            return Err(format!(
                "no scene to run: none of the players ({}) implements the scenarios ({}); raw \
                 implements echo only",
                join(&self.players),
                join(&self.scenarios)
            ));
        }
        if self.timeout.is_zero() {
            return Err("--timeout-ms must be at least 1".into());
        }
        let config_payloads = self.configs.iter().flatten().map(|c| c.payload);
        if self
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

    /// The cross product as a flat list, point by point (see [`points`](Self::points)).
    pub fn scenes(&self) -> Vec<Scene> {
        self.points().into_iter().flatten().collect()
    }

    /// The cross product grouped into *points*: the scenes that share scenario, call mode,
    /// requests, concurrency and payload — one x of one chart — and differ only in player and
    /// in brisk's options. The runner interleaves a point's scenes round by round, so a slow
    /// moment of the machine lands on every variant instead of on whichever ran then.
    ///
    /// Dimensions that do not apply collapse: payload is used by echo only; the connection
    /// count by pooled and fixed only; a player skips scenarios it does not implement; the
    /// peers take none of brisk's options (one server each, their own connections, as many as
    /// the scene's `connections`). With `configs` the `C:N:P` triples replace connections ×
    /// concurrency × payload.
    pub fn points(&self) -> Vec<Vec<Scene>> {
        let mut out = Vec::new();
        for &scenario in &dedup(self.scenarios.clone()) {
            // (concurrency, connections if fixed by a config, payload), payload outermost.
            let shapes: Vec<(u32, Option<u32>, u64)> = match &self.configs {
                Some(configs) => configs
                    .iter()
                    .map(|c| {
                        let payload = if scenario == Scenario::Echo {
                            c.payload
                        } else {
                            0
                        };
                        (c.in_flight, Some(c.connections), payload)
                    })
                    .collect(),
                None => {
                    let payloads = if scenario == Scenario::Echo {
                        dedup(self.payloads.clone())
                    } else {
                        vec![0]
                    };
                    let concurrency = dedup(self.concurrency.clone());
                    payloads
                        .iter()
                        .flat_map(|&p| concurrency.iter().map(move |&c| (c, None, p)))
                        .collect()
                }
            };
            let requests = match self.scene_secs {
                Some(_) => vec![0],
                None => dedup(self.requests_for(scenario).to_vec()),
            };
            for &call_mode in &dedup(self.call_modes.clone()) {
                for &requests in &requests {
                    for &(concurrency, fixed_conns, payload) in &shapes {
                        let base = Scene {
                            player: Player::Brisk,
                            scenario,
                            concurrency,
                            requests,
                            call_mode,
                            connect: ConnectKind::Fixed,
                            connections: 1,
                            write_mode: WriteMode::Async,
                            serializer: SerializerKind::MsgPack,
                            payload,
                            server: None,
                        };
                        let point = self.variants(&base, fixed_conns);
                        if !point.is_empty() {
                            out.push(point);
                        }
                    }
                }
            }
        }
        out
    }

    /// Every player × brisk option of one point.
    fn variants(&self, base: &Scene, fixed_conns: Option<u32>) -> Vec<Scene> {
        let conns_for = |connect: ConnectKind| match fixed_conns {
            _ if !connect.uses_connection_count() => vec![1],
            Some(c) => vec![c],
            None => dedup(self.connections.clone()),
        };
        let mut point = Vec::new();
        for &player in &dedup(self.players.clone()) {
            if !player.supports(base.scenario) {
                continue;
            }
            if player != Player::Brisk {
                for connections in conns_for(ConnectKind::Fixed) {
                    point.push(Scene {
                        player,
                        connections,
                        ..base.clone()
                    });
                }
                continue;
            }
            for server in self.servers() {
                for &connect in &dedup(self.connect_types.clone()) {
                    for connections in conns_for(connect) {
                        for &write_mode in &dedup(self.write_modes.clone()) {
                            for &serializer in &dedup(self.serializers.clone()) {
                                point.push(Scene {
                                    player,
                                    connect,
                                    connections,
                                    write_mode,
                                    serializer,
                                    server: Some(server),
                                    ..base.clone()
                                });
                            }
                        }
                    }
                }
            }
        }
        point
    }

    /// The servers the plan's scenes run against, in order of first use.
    pub fn server_keys(&self) -> Vec<ServerKey> {
        dedup(self.scenes().iter().map(Scene::server_key).collect())
    }

    /// The option the charts compare: `compare_by` if set; else `player` when several players
    /// run, joined by `+` with the first of connect_type, dispatch, queue, write_mode,
    /// serializer, connections that takes more than one value among brisk's scenes; else that
    /// option alone; else `call_mode`.
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
        let brisk: Vec<Scene> = scenes
            .iter()
            .filter(|s| s.player == Player::Brisk)
            .cloned()
            .collect();
        let distinct_brisk = |f: SceneKey| {
            let mut v: Vec<String> = brisk.iter().map(f).collect();
            v.sort();
            v.dedup();
            v.len()
        };
        let candidates: [(&str, SceneKey); 6] = [
            ("connect_type", |s| s.connect.to_string()),
            ("dispatch", |s| {
                s.server.map(|c| c.dispatch.to_string()).unwrap_or_default()
            }),
            ("queue", |s| {
                s.server.map(|c| c.queue_name()).unwrap_or_default()
            }),
            ("write_mode", |s| s.write_mode.to_string()),
            ("serializer", |s| s.serializer.to_string()),
            ("connections", |s| s.connections.to_string()),
        ];
        let setting = candidates
            .iter()
            .find(|(_, f)| distinct_brisk(*f) > 1)
            .map(|(name, _)| *name);
        let players = distinct(|s| s.player.to_string()) > 1;
        match (players, setting) {
            (true, Some(setting)) => format!("player+{setting}"),
            (true, None) => "player".to_owned(),
            (false, Some(setting)) => setting.to_owned(),
            (false, None) => "call_mode".to_owned(),
        }
    }

    /// The charts' x axis: `x_by` if set, else `payload` when several payloads are swept at
    /// a single concurrency, else `concurrency`.
    pub fn chart_x_by(&self) -> String {
        if let Some(x) = &self.x_by {
            return x.clone();
        }
        let echo = self.scenarios.contains(&Scenario::Echo);
        if let Some(configs) = &self.configs {
            let payloads = dedup(configs.iter().map(|c| c.payload).collect());
            return if echo && payloads.len() == configs.len() {
                "payload".to_owned()
            } else {
                "concurrency".to_owned()
            };
        }
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

fn join<T: fmt::Display>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
}

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
    /// brisk (direct and pool dispatch), tarpc, tonic, volo and the raw ceiling on echo over
    /// `C:N:P` load points, with CPU µs and TCP data segments (≈ writes) per call.
    Peers,
    /// Seed 001: nth with a new connection per call vs persistent connections, c = 10; then
    /// `ab`, `ab -k` and `wrk` against the server's HTTP/JSON listener when installed.
    Keepalive,
    /// Every scenario with tiny counts: an end-to-end check in seconds.
    Smoke,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 9] = [
        Preset::DubboReport,
        Preset::JkrpcMatrix,
        Preset::ConnectType,
        Preset::Queue,
        Preset::WriteMode,
        Preset::PayloadSweep,
        Preset::Peers,
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
            Preset::Peers => "peers",
            Preset::Keepalive => "keepalive",
            Preset::Smoke => "smoke",
        }
    }

    /// A title for reports.
    pub fn title(self) -> &'static str {
        match self {
            Preset::DubboReport => {
                "Dubbo remoting performance test per player (echo 1 KiB, 1 connection, 100 callers)"
            }
            Preset::JkrpcMatrix => {
                "jkrpc benchmark matrix: brisk, tarpc, tonic, volo (scenarios × concurrency × call mode)"
            }
            Preset::ConnectType => "brisk — connection types (nth, async)",
            Preset::Queue => "brisk — worker-pool queues (nth, async)",
            Preset::WriteMode => "brisk — write modes (nth, async)",
            Preset::PayloadSweep => "echo payload sweep per player",
            Preset::Peers => "brisk vs tarpc, tonic, volo and raw tokio: echo over C:N:P",
            Preset::Keepalive => "brisk — connection per call vs persistent connections",
            Preset::Smoke => "brisk — smoke run of every scenario",
        }
    }

    /// The preset's settings layer.
    pub fn settings(self) -> Settings {
        let c4 = Some(vec![1, 20, 50, 100]);
        let peers = Some(vec![
            Player::Brisk,
            Player::Tarpc,
            Player::Tonic,
            Player::Volo,
        ]);
        let with_raw = Some(Player::ALL.to_vec());
        let base = Settings::default();
        // Count mode (jkbenchmark's fixed number of calls per round).
        let count_mode = Some(Duration::ZERO);
        match self {
            Preset::DubboReport => Settings {
                scenarios: Some(vec![Scenario::Echo]),
                payloads: Some(vec![1024]),
                connect_types: Some(vec![ConnectKind::Fixed]),
                connections: Some(vec![1]),
                concurrency: Some(vec![100]),
                call_modes: Some(vec![CallMode::Sync]),
                serializers: Some(SerializerKind::ALL.to_vec()),
                players: with_raw.clone(),
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
                // In count mode (`--scene-secs 0`): seed 004's request counts.
                requests_by_scenario: Some(BTreeMap::from([
                    (Scenario::Nth, vec![20_000]),
                    (Scenario::Cache, vec![20_000]),
                    (Scenario::File, vec![5_000]),
                    (Scenario::Db, vec![5_000]),
                ])),
                warmup: Some(500),
                players: peers.clone(),
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
                players: with_raw.clone(),
                x_by: Some("payload".into()),
                ..base
            },
            Preset::Peers => Settings {
                scenarios: Some(vec![Scenario::Echo]),
                configs: Some(vec![
                    LoadShape {
                        connections: 1,
                        in_flight: 1,
                        payload: 1024,
                    },
                    LoadShape {
                        connections: 1,
                        in_flight: 100,
                        payload: 1024,
                    },
                    LoadShape {
                        connections: 10,
                        in_flight: 100,
                        payload: 1024,
                    },
                    LoadShape {
                        connections: 1,
                        in_flight: 100,
                        payload: 10_240,
                    },
                ]),
                call_modes: Some(vec![CallMode::Sync]),
                dispatches: Some(vec![Dispatch::Direct, Dispatch::Pool]),
                players: with_raw.clone(),
                scene_secs: Some(Duration::from_secs(2)),
                x_by: Some("concurrency".into()),
                ..base
            },
            Preset::Keepalive => Settings {
                scenarios: Some(vec![Scenario::Nth]),
                connect_types: Some(vec![ConnectKind::PerCall, ConnectKind::Fixed]),
                concurrency: Some(vec![10]),
                call_modes: Some(vec![CallMode::Sync]),
                // ab -n 10000 -c 10, scaled so the per-call connections fit the ephemeral
                // port range together with their TIME_WAIT sockets: a count, not a window.
                scene_secs: count_mode,
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
                scene_secs: count_mode,
                players: with_raw.clone(),
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
    fn defaults_resolve_to_one_timed_scene() {
        let plan = Settings::default().resolve().unwrap();
        let scenes = plan.scenes();
        assert_eq!(scenes.len(), 1);
        assert_eq!(scenes[0].player, Player::Brisk);
        assert_eq!(scenes[0].scenario, Scenario::Nth);
        assert_eq!(scenes[0].connect, ConnectKind::Fixed);
        assert_eq!(scenes[0].payload, 0);
        assert_eq!(scenes[0].requests, 0, "time mode: the window decides");
        assert_eq!(plan.scene_secs, Some(DEFAULT_SCENE));
        assert_eq!(plan.rounds, 3);
        assert_eq!(plan.pause, Duration::ZERO);
        assert_eq!(plan.max_in_flight, None);
        assert_eq!(scenes[0].name(20_000), "brisk-nth-c20-n20000-sync");
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
        // points: {nth: 1 payload, echo: 2} = 3 × 2 call modes × 2 concurrencies; per point:
        // 3 servers × connect {reused: 1, fixed: 2 counts}
        assert_eq!(plan.points().len(), 3 * 2 * 2);
        assert!(plan.points().iter().all(|p| p.len() == 3 * 3));
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
        // A point holds one scenario, call mode, concurrency and payload.
        for point in plan.points() {
            let first = &point[0];
            assert!(point
                .iter()
                .all(|s| (s.scenario, s.call_mode, s.concurrency, s.payload)
                    == (
                        first.scenario,
                        first.call_mode,
                        first.concurrency,
                        first.payload
                    )));
        }
        // Concurrency is the innermost point dimension.
        let p = plan.points();
        assert_eq!((p[0][0].concurrency, p[1][0].concurrency), (1, 20));
        assert_eq!(plan.server_keys().len(), 3);
    }

    #[test]
    fn players_join_every_point_they_implement_and_take_no_brisk_options() {
        let plan = Settings {
            players: Some(Player::ALL.to_vec()),
            scenarios: Some(vec![Scenario::Nth, Scenario::Echo]),
            serializers: Some(vec![SerializerKind::MsgPack, SerializerKind::Json]),
            dispatches: Some(vec![Dispatch::Direct, Dispatch::Pool]),
            ..Settings::default()
        }
        .resolve()
        .unwrap();
        let points = plan.points();
        assert_eq!(points.len(), 2);
        // nth: brisk × 2 dispatches × 2 serializers + tarpc, tonic, volo (raw: echo only)
        assert_eq!(points[0].len(), 4 + 3);
        assert!(points[0].iter().all(|s| s.player != Player::Raw));
        // echo: the same plus raw
        assert_eq!(points[1].len(), 4 + 4);
        for s in points
            .iter()
            .flatten()
            .filter(|s| s.player != Player::Brisk)
        {
            assert_eq!(s.server, None);
            assert_eq!(s.connections, 10);
        }
        // One server per brisk dispatch, one per peer.
        assert_eq!(plan.server_keys().len(), 2 + 4);
        assert_eq!(plan.chart_compare_by(), "player+dispatch");
        let raw_only = Settings {
            players: Some(vec![Player::Raw]),
            ..Settings::default()
        };
        let err = raw_only.resolve().unwrap_err();
        assert!(err.contains("echo only"), "{err}");
    }

    #[test]
    fn configs_replace_connections_concurrency_and_payload() {
        let plan = Settings::default()
            .over(Preset::Peers.settings())
            .resolve()
            .unwrap();
        let points = plan.points();
        assert_eq!(points.len(), 4);
        let shapes: Vec<(u32, u32, u64)> = points
            .iter()
            .map(|p| (p[0].connections, p[0].concurrency, p[0].payload))
            .collect();
        assert_eq!(
            shapes,
            [
                (1, 1, 1024),
                (1, 100, 1024),
                (10, 100, 1024),
                (1, 100, 10_240)
            ]
        );
        // brisk direct + pool, tarpc, tonic, volo, raw
        assert!(points.iter().all(|p| p.len() == 6));
        assert_eq!(
            "10:100:1k".parse::<LoadShape>().unwrap().label(),
            "10:100:1024"
        );
        assert!("10:100".parse::<LoadShape>().is_err());
        assert!("0:1:1".parse::<LoadShape>().is_err());
    }

    #[test]
    fn flags_override_a_preset_field_by_field() {
        let cli = Settings {
            concurrency: Some(vec![7]),
            rounds: Some(5),
            ..Settings::default()
        };
        let plan = cli.over(Preset::ConnectType.settings()).resolve().unwrap();
        assert_eq!(plan.concurrency, vec![7]);
        assert_eq!(plan.rounds, 5);
        // untouched preset fields stay
        assert_eq!(plan.connect_types.len(), 3);
        assert_eq!(plan.call_modes, vec![CallMode::Async]);
        assert_eq!(plan.scenes().len(), 3);
        assert_eq!(plan.points().len(), 1, "the three connect types interleave");
        assert_eq!(plan.chart_compare_by(), "connect_type");
    }

    #[test]
    fn count_mode_uses_requests_and_the_flag_hides_per_scenario_counts() {
        let count = Settings {
            scene_secs: Some(Duration::ZERO),
            ..Settings::default()
        };
        let preset = Preset::JkrpcMatrix.settings();
        let plan = count.clone().over(preset.clone()).resolve().unwrap();
        assert_eq!(plan.scene_secs, None);
        assert_eq!(plan.requests_for(Scenario::Db), &[5_000]);
        assert_eq!(plan.requests_for(Scenario::Nth), &[20_000]);
        assert!(plan.scenes().iter().any(|s| s.requests == 5_000));
        let cli = Settings {
            requests: Some(vec![123]),
            ..count
        };
        let plan = cli.over(preset).resolve().unwrap();
        assert_eq!(plan.requests_for(Scenario::Db), &[123]);
        // 4 scenarios × 4 concurrencies × 2 modes, × brisk, tarpc, tonic, volo
        assert_eq!(plan.points().len(), 4 * 4 * 2);
        assert_eq!(plan.scenes().len(), 4 * 4 * 2 * 4);
        assert_eq!(plan.chart_compare_by(), "player");
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
        assert_eq!(sweep.scenes().len(), 6 * 5);
        assert_eq!(sweep.chart_compare_by(), "player");
        let q = Preset::Queue.settings().resolve().unwrap();
        assert_eq!(q.chart_compare_by(), "queue");
        let w = Preset::WriteMode.settings().resolve().unwrap();
        assert_eq!(w.chart_compare_by(), "write_mode");
        let k = Preset::Keepalive.settings().resolve().unwrap();
        assert_eq!(k.chart_compare_by(), "connect_type");
        assert_eq!(
            k.scene_secs, None,
            "per-call connections are counted, not timed"
        );
        let smoke = Preset::Smoke.settings().resolve().unwrap();
        let names: Vec<Scenario> = smoke.scenes().iter().map(|s| s.scenario).collect();
        for s in Scenario::ALL {
            assert!(names.contains(&s));
        }
        assert_eq!(smoke.rounds, 1);
        assert_eq!(smoke.scene_secs, None);
        let dubbo = Preset::DubboReport.settings().resolve().unwrap();
        // brisk × 3 serializers + tarpc, tonic, volo, raw
        assert_eq!(dubbo.scenes().len(), 3 + 4);
        assert_eq!(dubbo.chart_compare_by(), "player+serializer");
        // The main job: about ten minutes of measurement at most.
        let main = Preset::JkrpcMatrix.settings().resolve().unwrap();
        let window = main.scene_secs.unwrap() + main.warmup_time;
        let secs = window.as_secs_f64() * main.scenes().len() as f64 * f64::from(main.rounds);
        assert!(secs <= 10.0 * 60.0, "{secs} s");
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
