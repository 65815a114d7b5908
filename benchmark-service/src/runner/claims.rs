//! The claims a run can judge, derived from its plan, and the seed 004 framework table.
//!
//! The runner states each seed's claims from what the plan varies and judges each from the rounds ([`judge`]): with players,
//! "brisk beats every peer" at every point (and "within 1.1× of raw" where the raw ceiling
//! ran, and issue 19's "at least 2× every peer's messages/s" on the streaming scenarios); with
//! brisk settings, the seed's own claims — fixed beats reused, async write lowers
//! latency, the transfer queue lowers latency, direct beats pool dispatch, persistent
//! connections beat one per call, msgpack beats json.

use std::fmt::Write as _;

use crate::players::Player;
use crate::report::{judge, Claim, Filter, Judgement, Metric, SceneResult};

use brisk::Compression;

use super::plan::{ConnectKind, PayloadKind, Plan, Scenario, Scene};

/// Issue 19's goal on the streaming scenarios: brisk moves at least this many times the best
/// peer's messages per second. Every player's call of a streaming scenario moves the same
/// [`STREAM_ITEMS`](crate::scenario::STREAM_ITEMS) messages, so the ratio of messages/s is the
/// ratio of calls/s, and the claim is judged on the rounds' TPS with a tolerance of 1 / 2.
pub const STREAM_GOAL: f64 = 2.0;

/// The options that make one comparison point of players.
pub(super) const POINT: [&str; 6] = [
    "scenario",
    "call_mode",
    "concurrency",
    "payload",
    "payload_kind",
    "connections",
];

/// brisk's own options besides the one compared.
const BRISK_OPTIONS: [&str; 7] = [
    "connect_type",
    "connections",
    "write_mode",
    "serializer",
    "compression",
    "dispatch",
    "queue",
];

/// The claims of `plan`, in print order.
pub fn claims(plan: &Plan) -> Vec<Claim> {
    let scenes = plan.scenes();
    let mut out = Vec::new();
    player_claims(plan, &scenes, &mut out);
    setting_claims(plan, &scenes, &mut out);
    out
}

/// The options that make one comparison point: `base`, plus the configured request count in
/// count mode (scenes of different counts ran in different points).
pub(super) fn point_keys(plan: &Plan, base: &[&str]) -> Vec<String> {
    let mut keys: Vec<String> = base.iter().map(|s| (*s).to_owned()).collect();
    if plan.scene_secs.is_none() {
        keys.push("requests".to_owned());
    }
    keys
}

fn distinct<T: PartialEq + Clone>(values: impl Iterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

fn point_text(s: &Scene) -> String {
    let mut t = format!("{} {} c={}", s.scenario, s.call_mode, s.concurrency);
    if s.payload > 0 {
        let _ = write!(t, " {} B", s.payload);
    }
    if !matches!(s.payload_kind_name(), "" | "fill") {
        let _ = write!(t, " {}", s.payload_kind);
    }
    let _ = write!(t, " ×{} conn", s.connections);
    t
}

fn point_scope(s: &Scene) -> Filter {
    Filter(vec![
        ("scenario".into(), s.scenario.name().into()),
        ("call_mode".into(), s.call_mode.name().into()),
        ("concurrency".into(), s.concurrency.to_string()),
        ("payload".into(), s.payload.to_string()),
        (
            "payload_kind".into(),
            or_unset(s.payload_kind_name(), PayloadKind::Fill.name()),
        ),
        ("connections".into(), s.connections.to_string()),
    ])
}

/// A filter value for an option added after results were first written: `value`, and when it
/// is the option's default also the empty value that such older results (and hand-made ones)
/// hold for it.
fn or_unset(value: &str, default: &str) -> String {
    if value == default {
        format!("{value}|")
    } else {
        value.to_owned()
    }
}

/// brisk against the peers, and against raw, at every point where they ran; one claim per
/// brisk dispatch when several ran (brisk's connect type pinned to one that opens the point's
/// connections, its other options to their first value).
fn player_claims(plan: &Plan, scenes: &[Scene], out: &mut Vec<Claim>) {
    let players = distinct(scenes.iter().map(|s| s.player));
    if !players.contains(&Player::Brisk) {
        return;
    }
    let peers: Vec<&str> = players
        .iter()
        .filter(|p| p.is_peer())
        .map(|p| p.name())
        .collect();
    let brisk: Vec<&Scene> = scenes
        .iter()
        .filter(|s| s.player == Player::Brisk)
        .collect();
    let Some(pins) = brisk_pins(&brisk) else {
        return;
    };
    let dispatches = distinct(brisk.iter().filter_map(|s| s.server.map(|c| c.dispatch)));
    // The points where a rival (a peer or raw) ran; rivals take none of brisk's options, so
    // their scenes with the player (and volo's transport) set aside are the points.
    let key = |s: &Scene| {
        (
            s.scenario,
            s.call_mode,
            s.concurrency,
            s.payload,
            s.payload_kind,
            s.connections,
        )
    };
    let points = distinct(
        scenes
            .iter()
            .filter(|s| s.player != Player::Brisk)
            .map(|s| {
                let mut p = (*s).clone();
                p.player = Player::Brisk;
                p.volo_transport = None;
                p
            }),
    );
    let ran_at = |player: Player, point: &Scene| {
        scenes
            .iter()
            .any(|s| s.player == player && key(s) == key(point))
    };
    for &dispatch in &dispatches {
        let mut subject = vec![("player".to_owned(), "brisk".to_owned())];
        subject.extend(pins.iter().cloned());
        let who = if dispatches.len() > 1 {
            subject.push(("dispatch".to_owned(), dispatch.name().to_owned()));
            format!("brisk ({dispatch})")
        } else {
            "brisk".to_owned()
        };
        for point in &points {
            if Player::ALL.iter().any(|p| p.is_peer() && ran_at(*p, point)) {
                out.push(Claim {
                    text: format!("{who} beats every peer on {}", point_text(point)),
                    metric: Metric::Tps,
                    scope: point_scope(point),
                    subject: Filter(subject.clone()),
                    rivals: Filter::of(&[("player", &peers.join("|"))]),
                    group_by: point_keys(plan, &POINT),
                    tolerance: 1.0,
                });
                if point.scenario.is_stream() {
                    out.push(Claim {
                        text: format!(
                            "{who} ≥ {STREAM_GOAL}× every peer's messages/s on {}",
                            point_text(point)
                        ),
                        metric: Metric::Tps,
                        scope: point_scope(point),
                        subject: Filter(subject.clone()),
                        rivals: Filter::of(&[("player", &peers.join("|"))]),
                        group_by: point_keys(plan, &POINT),
                        tolerance: 1.0 / STREAM_GOAL,
                    });
                }
            }
            if ran_at(Player::Raw, point) {
                out.push(Claim {
                    text: format!("{who} p50 within 1.1× raw on {}", point_text(point)),
                    metric: Metric::P50,
                    scope: point_scope(point),
                    subject: Filter(subject.clone()),
                    rivals: Filter::of(&[("player", "raw")]),
                    group_by: point_keys(plan, &POINT),
                    tolerance: 1.1,
                });
            }
        }
    }
}

/// brisk's options besides the dispatch, pinned to one value each for a comparison with other
/// players (`brisk`: brisk's scenes): a connect type that opens the scene's connection count,
/// as the peers do — fixed (brisk's default), else pooled — when the plan has one, and the first
/// write mode, serializer and compression. `None` without brisk scenes.
pub(super) fn brisk_pins(brisk: &[&Scene]) -> Option<Vec<(String, String)>> {
    let first = brisk.first()?;
    let connects: Vec<ConnectKind> = brisk.iter().map(|s| s.connect).collect();
    let connect = [ConnectKind::Fixed, ConnectKind::Pooled]
        .into_iter()
        .find(|c| connects.contains(c))
        .unwrap_or(first.connect);
    Some(vec![
        ("connect_type".to_owned(), connect.name().to_owned()),
        ("write_mode".to_owned(), first.write_mode.name().to_owned()),
        ("serializer".to_owned(), first.serializer.name().to_owned()),
        (
            "compression".to_owned(),
            or_unset(first.compression.name(), Compression::None.name()),
        ),
    ])
}

/// The seeds' claims about brisk's settings, where the plan varies that setting. Connect types
/// are not compared under `--configs`: there a point's connection count is fixed, and a reused
/// connection of one point would meet the fixed connections of another.
fn setting_claims(plan: &Plan, scenes: &[Scene], out: &mut Vec<Claim>) {
    let brisk: Vec<&Scene> = scenes
        .iter()
        .filter(|s| s.player == Player::Brisk)
        .collect();
    let has = |option: &str, value: &str| {
        brisk.iter().any(|s| match option {
            "connect_type" => s.connect.name() == value,
            "write_mode" => s.write_mode.name() == value,
            "queue" => s
                .server
                .and_then(|c| c.queue)
                .is_some_and(|q| q.to_string() == value),
            "dispatch" => s.server.is_some_and(|c| c.dispatch.name() == value),
            "serializer" => s.serializer.name() == value,
            "compression" => s.compression.name() == value,
            _ => false,
        })
    };
    type Seed = (
        &'static str,
        &'static str,
        &'static str,
        Metric,
        &'static str,
    );
    let seeds: [Seed; 8] = [
        (
            "connect_type",
            "fixed",
            "reused",
            Metric::Tps,
            "fixed connections beat one reused connection",
        ),
        (
            "connect_type",
            "pooled",
            "reused",
            Metric::Tps,
            "pooled connections beat one reused connection",
        ),
        (
            "connect_type",
            "fixed",
            "percall",
            Metric::Tps,
            "persistent connections beat a connection per call",
        ),
        (
            "write_mode",
            "async",
            "sync",
            Metric::P50,
            "async write lowers latency",
        ),
        (
            "write_mode",
            "async",
            "sync",
            Metric::Tps,
            "async write raises TPS",
        ),
        (
            "queue",
            "transfer",
            "blocking",
            Metric::P50,
            "the transfer queue lowers latency",
        ),
        (
            "dispatch",
            "direct",
            "pool",
            Metric::Tps,
            "direct dispatch beats pool dispatch",
        ),
        (
            "serializer",
            "msgpack",
            "json",
            Metric::Tps,
            "msgpack beats json",
        ),
    ];
    for (option, subject, rival, metric, text) in seeds {
        if !(has(option, subject) && has(option, rival))
            || (option == "connect_type" && plan.configs.is_some())
        {
            continue;
        }
        let mut group_by = point_keys(
            plan,
            &[
                "scenario",
                "call_mode",
                "concurrency",
                "payload",
                "payload_kind",
            ],
        );
        group_by.extend(
            BRISK_OPTIONS
                .iter()
                .filter(|o| **o != option && !implied_by(option, o))
                .map(|o| (*o).to_owned()),
        );
        out.push(Claim {
            text: format!(
                "{text} ({} {})",
                metric.name(),
                if metric == Metric::Tps {
                    "higher"
                } else {
                    "lower"
                }
            ),
            metric,
            scope: Filter::of(&[("player", "brisk")]),
            subject: Filter::of(&[(option, subject)]),
            rivals: Filter::of(&[(option, rival)]),
            group_by,
            tolerance: 1.0,
        });
    }
}

/// Whether comparing `option` necessarily changes `other` too (a reused connection is one
/// connection; direct dispatch has no queue), so `other` must not split the points.
fn implied_by(option: &str, other: &str) -> bool {
    matches!(
        (option, other),
        ("connect_type", "connections") | ("dispatch", "queue")
    )
}

/// Whether a result's scenario is a streaming one.
fn is_stream(scenario: &str) -> bool {
    scenario.parse::<Scenario>().is_ok_and(Scenario::is_stream)
}

/// Judges every claim of `plan` over the results.
pub fn judge_all(plan: &Plan, results: &[SceneResult]) -> Vec<Judgement> {
    claims(plan).iter().map(|c| judge(c, results)).collect()
}

/// The verdicts as text lines.
pub fn verdict_lines(judgements: &[Judgement]) -> String {
    let mut out = String::new();
    for j in judgements {
        let _ = writeln!(out, "{j}");
    }
    out
}

/// One column of the framework table: a point of the scenes, and its label.
#[derive(Debug, Clone, PartialEq)]
struct Column {
    scenario: String,
    concurrency: u32,
    payload: u64,
    payload_kind: String,
    connections: u32,
    label: String,
}

/// Seed 004's framework table as Markdown: one row per player × call mode, one column per
/// scenario × concurrency, each cell the median TPS — for the streaming scenarios the median
/// messages/s (calls/s × messages per call), said in the column's label; then a row per call
/// mode with brisk's ratio to the best peer. `None` when the results hold a single player.
pub fn framework_table(results: &[SceneResult]) -> Option<String> {
    let players = distinct(results.iter().map(|s| s.player.clone()));
    if players.len() < 2 {
        return None;
    }
    let several_counts = distinct(results.iter().map(|s| s.connections)).len() > 1;
    let columns = distinct(results.iter().map(|s| {
        let mut label = format!("{} c={}", s.scenario, s.concurrency);
        if s.payload > 0 {
            let _ = write!(label, " {} B", s.payload);
        }
        if !matches!(s.payload_kind.as_str(), "" | "fill") {
            let _ = write!(label, " {}", s.payload_kind);
        }
        if several_counts {
            let _ = write!(label, " ×{} conn", s.connections);
        }
        if is_stream(&s.scenario) {
            label.push_str(" msgs/s");
        }
        Column {
            scenario: s.scenario.clone(),
            concurrency: s.concurrency,
            payload: s.payload,
            payload_kind: s.payload_kind.clone(),
            connections: s.connections,
            label,
        }
    }));
    let modes = distinct(results.iter().map(|s| s.call_mode.clone()));
    // brisk's first scene at each point (its first dispatch, connect type, write mode and
    // serializer in run order) stands for brisk in the table; the verdicts cover the others.
    let brisk_dispatch = results
        .iter()
        .find(|s| s.player == "brisk")
        .map(|s| s.dispatch.clone());
    let cell = |player: &str, mode: &str, col: &Column| {
        results
            .iter()
            .find(|s| {
                s.player == player
                    && s.call_mode == mode
                    && s.scenario == col.scenario
                    && s.concurrency == col.concurrency
                    && s.payload == col.payload
                    && s.payload_kind == col.payload_kind
                    && s.connections == col.connections
                    && (player != "brisk" || Some(&s.dispatch) == brisk_dispatch.as_ref())
            })
            .map(|s| match s.extra.get("msgs_per_s") {
                Some(&msgs) if is_stream(&s.scenario) => msgs,
                _ => s.tps,
            })
    };
    let mut out = String::from("| player | mode |");
    for c in &columns {
        let _ = write!(out, " {} |", c.label);
    }
    out.push_str("\n|---|---|");
    out.push_str(&"---|".repeat(columns.len()));
    out.push('\n');
    for mode in &modes {
        for player in &players {
            let _ = write!(out, "| {player} | {mode} |");
            for c in &columns {
                match cell(player, mode, c) {
                    Some(tps) => {
                        let _ = write!(out, " {tps:.0} |");
                    }
                    None => out.push_str(" — |"),
                }
            }
            out.push('\n');
        }
        let _ = write!(out, "| **brisk ÷ best peer** | {mode} |");
        for c in &columns {
            let brisk = cell("brisk", mode, c);
            let best_peer = players
                .iter()
                .filter(|p| p.parse::<Player>().is_ok_and(Player::is_peer))
                .filter_map(|p| cell(p, mode, c))
                .reduce(f64::max);
            match (brisk, best_peer) {
                (Some(b), Some(p)) if p > 0.0 => {
                    let _ = write!(out, " **{:.2}×** |", b / p);
                }
                _ => out.push_str(" — |"),
            }
        }
        out.push('\n');
    }
    Some(out)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::report::{median, RoundFigures, Verdict};
    use crate::runner::plan::{Preset, Settings};

    /// A result of `player` with `tps` per round (latencies derived from it); brisk's at its
    /// defaults and pool dispatch.
    pub(in crate::runner) fn result(
        player: &str,
        scenario: &str,
        c: u32,
        mode: &str,
        tps: &[f64],
    ) -> SceneResult {
        let mut s = SceneResult::new(player, scenario, c, 0, mode);
        s.connections = 10;
        if player == "brisk" {
            s.connect_type = "fixed".into();
            s.write_mode = "async".into();
            s.serializer = "msgpack".into();
            s.dispatch = "pool".into();
            s.queue = "transfer".into();
        }
        s.rounds = tps
            .iter()
            .map(|&t| RoundFigures {
                tps: t,
                p50_ms: 1.0 / t,
                p99_ms: 2.0 / t,
            })
            .collect();
        s.tps = median(tps).unwrap_or(0.0);
        s
    }

    #[test]
    fn the_main_job_claims_brisk_beats_every_peer_at_every_point() {
        let plan = Preset::JkrpcMatrix.settings().resolve().unwrap();
        let claims = claims(&plan);
        // 4 scenarios × 4 concurrencies × 2 modes, no raw, one dispatch, no brisk setting varies.
        assert_eq!(claims.len(), 32);
        assert!(claims[0]
            .text
            .starts_with("brisk beats every peer on nth sync c=1"));
        let results = vec![
            result("brisk", "nth", 1, "sync", &[300.0, 310.0, 320.0]),
            result("tarpc", "nth", 1, "sync", &[100.0, 100.0, 100.0]),
            result("tonic", "nth", 1, "sync", &[200.0, 330.0, 200.0]),
            result("volo", "nth", 1, "sync", &[50.0, 50.0, 50.0]),
        ];
        let j = judge(&claims[0], &results);
        assert_eq!(j.verdict, Verdict::Inconclusive);
        assert_eq!((j.agreeing, j.compared), (2, 3));
        let table = framework_table(&results).unwrap();
        assert!(table.contains("| tonic | sync | 200 |"), "{table}");
        assert!(table.contains("**1.55×**"), "{table}");
    }

    #[test]
    fn the_streams_preset_claims_twice_the_peers_messages_per_second() {
        let plan = Preset::Streams.settings().resolve().unwrap();
        let claims = claims(&plan);
        // 2 scenarios × 2 load points × (beats every peer, ≥ 2× every peer).
        assert_eq!(claims.len(), 8);
        let twice: Vec<&Claim> = claims
            .iter()
            .filter(|c| c.text.contains("≥ 2× every peer's messages/s"))
            .collect();
        assert_eq!(twice.len(), 4);
        assert_eq!(
            twice[0].text,
            "brisk ≥ 2× every peer's messages/s on stream sync c=1 1024 B ×1 conn"
        );
        assert!(twice[3].text.contains("pingpong sync c=10"));
        let scene = |player: &str, tps: &[f64]| {
            let mut s = result(player, "stream", 1, "sync", tps);
            s.payload = 1024;
            s.connections = 1;
            s.extra.insert("msgs_per_s".into(), s.tps * 100.0);
            s
        };
        let tonic = scene("tonic", &[100.0, 100.0, 100.0]);
        let fast = [scene("brisk", &[250.0, 260.0, 240.0]), tonic.clone()];
        let j = judge(twice[0], &fast);
        assert_eq!((j.verdict, j.agreeing, j.compared), (Verdict::Holds, 3, 3));
        assert!((j.ratio.unwrap() - 2.5).abs() < 1e-9);
        // Faster, but not twice as fast: "beats" holds, "≥ 2×" does not.
        let faster = [scene("brisk", &[150.0, 190.0, 210.0]), tonic];
        let j = judge(twice[0], &faster);
        assert_eq!((j.verdict, j.agreeing), (Verdict::Inconclusive, 1));
        let beats = claims
            .iter()
            .find(|c| c.text == "brisk beats every peer on stream sync c=1 1024 B ×1 conn")
            .unwrap();
        assert_eq!(judge(beats, &faster).verdict, Verdict::Holds);
        // The table shows messages/s for the streams, and says so.
        let table = framework_table(&fast).unwrap();
        assert!(table.contains("stream c=1 1024 B msgs/s"), "{table}");
        assert!(table.contains("| brisk | sync | 25000 |"), "{table}");
        assert!(table.contains("**2.50×**"), "{table}");
    }

    #[test]
    fn peers_beside_a_setting_preset_meet_brisk_at_their_connection_count() {
        let cli = Settings {
            players: Some(vec![Player::Brisk, Player::Tarpc]),
            ..Settings::default()
        };
        let plan = cli.over(Preset::ConnectType.settings()).resolve().unwrap();
        let claims = claims(&plan);
        let peers: Vec<&Claim> = claims
            .iter()
            .filter(|c| c.text.contains("beats every peer"))
            .collect();
        // One per concurrency, at the peers' 10 connections (none at reused's single one).
        assert_eq!(peers.len(), 4);
        assert!(peers.iter().all(|c| c.text.ends_with("×10 conn")));
        let mut fixed = result("brisk", "nth", 1, "async", &[300.0, 300.0]);
        let mut reused = fixed.clone();
        reused.connect_type = "reused".into();
        reused.connections = 1;
        fixed.rounds[1].tps = 50.0;
        let tarpc = result("tarpc", "nth", 1, "async", &[100.0, 100.0]);
        let j = judge(peers[0], &[reused, fixed, tarpc]);
        assert_eq!(
            (j.verdict, j.agreeing, j.compared),
            (Verdict::Inconclusive, 1, 2)
        );
    }

    #[test]
    fn compression_and_payload_kind_keep_claims_to_like_scenes() {
        use brisk::SerializerKind;
        let plan = Settings {
            players: Some(vec![Player::Brisk, Player::Tonic]),
            scenarios: Some(vec![Scenario::Echo]),
            serializers: Some(vec![SerializerKind::MsgPack, SerializerKind::Json]),
            compressions: Some(vec![Compression::Zstd, Compression::None]),
            payload_kinds: Some(vec![PayloadKind::Text, PayloadKind::Random]),
            ..Settings::default()
        }
        .resolve()
        .unwrap();
        let claims = claims(&plan);
        let peers: Vec<&Claim> = claims
            .iter()
            .filter(|c| c.text.contains("beats every peer"))
            .collect();
        // One per payload kind, brisk at its first serializer and compression.
        assert_eq!(peers.len(), 2);
        assert_eq!(
            peers[0].text,
            "brisk beats every peer on echo sync c=20 1024 B text ×10 conn"
        );
        assert!(peers[0]
            .subject
            .0
            .contains(&("compression".to_owned(), "zstd".to_owned())));
        assert!(peers[1]
            .scope
            .0
            .contains(&("payload_kind".to_owned(), "random".to_owned())));
        assert!(peers[0].group_by.contains(&"payload_kind".to_owned()));
        // msgpack vs json compares scenes of one compression and one kind.
        let serializers = claims
            .iter()
            .find(|c| c.text.starts_with("msgpack beats json"))
            .unwrap();
        for option in ["compression", "payload_kind"] {
            assert!(
                serializers.group_by.contains(&option.to_owned()),
                "{option}"
            );
        }
        let mut text = result("brisk", "echo", 20, "sync", &[300.0, 300.0]);
        text.payload = 1024;
        text.payload_kind = "text".into();
        text.compression = "zstd".into();
        let mut random = text.clone();
        random.payload_kind = "random".into();
        random.rounds[0].tps = 10.0;
        let mut tonic = result("tonic", "echo", 20, "sync", &[200.0, 200.0]);
        tonic.payload = 1024;
        tonic.payload_kind = "text".into();
        let j = judge(peers[0], &[random, text, tonic]);
        assert_eq!((j.verdict, j.compared), (Verdict::Holds, 2));
    }

    #[test]
    fn setting_presets_claim_the_seeds_findings() {
        let texts = |p: Preset| -> Vec<String> {
            claims(&p.settings().resolve().unwrap())
                .into_iter()
                .map(|c| c.text)
                .collect()
        };
        assert!(texts(Preset::ConnectType)
            .iter()
            .any(|t| t.starts_with("fixed connections beat one reused connection")));
        assert!(texts(Preset::WriteMode)
            .iter()
            .any(|t| t.starts_with("async write lowers latency")));
        assert!(texts(Preset::Queue)
            .iter()
            .any(|t| t.starts_with("the transfer queue lowers latency")));
        let peers = texts(Preset::Peers);
        assert!(peers.contains(
            &"brisk (direct) beats every peer on echo sync c=100 1024 B ×10 conn".to_owned()
        ));
        assert!(peers
            .iter()
            .any(|t| t.starts_with("brisk (direct) p50 within 1.1× raw")));
        assert!(peers
            .iter()
            .any(|t| t.starts_with("direct dispatch beats pool dispatch")));
        // volo's two transports are two rivals at a point, not two points: no claim twice.
        let mut once = peers.clone();
        once.sort();
        once.dedup();
        assert_eq!(once.len(), peers.len(), "{peers:#?}");
        // Per brisk dispatch, one per load point.
        assert_eq!(
            peers
                .iter()
                .filter(|t| t.contains("beats every peer"))
                .count(),
            2 * 4
        );
        let single = Settings::default().resolve().unwrap();
        assert!(claims(&single).is_empty());
    }
}
