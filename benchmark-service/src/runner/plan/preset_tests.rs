//! The shipped preset files against what the presets were before they became files: for every
//! preset, the file's settings layer, the plan it resolves to and its title equal the values
//! below, which are the presets as code. Also: the files on disk are the ones compiled in, the
//! names parse with their aliases, and a bad file is an error naming the key and line.

use std::collections::BTreeMap;
use std::time::Duration;

use brisk::{Compression, Dispatch, QueueKind, SerializerKind, WriteMode};
use strum::VariantNames;

use super::*;

/// Each preset's settings layer as the code built it.
fn expected_settings(preset: Preset) -> Settings {
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
    match preset {
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
            volo_transports: Some(vec![VoloTransport::Pool, VoloTransport::Mux]),
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
        Preset::Streams => Settings {
            players: Some(vec![Player::Brisk, Player::Tonic]),
            scenarios: Some(vec![Scenario::Stream, Scenario::PingPong]),
            configs: Some(vec![
                LoadShape {
                    connections: 1,
                    in_flight: 1,
                    payload: 1024,
                },
                LoadShape {
                    connections: 1,
                    in_flight: 10,
                    payload: 1024,
                },
            ]),
            call_modes: Some(vec![CallMode::Sync]),
            scene_secs: Some(Duration::from_secs(2)),
            rounds: Some(5),
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
        Preset::Compression => Settings {
            players: Some(vec![Player::Brisk]),
            scenarios: Some(vec![Scenario::Echo]),
            payloads: Some(vec![1024, 10_240, 102_400]),
            payload_kinds: Some(vec![PayloadKind::Text, PayloadKind::Random]),
            compressions: Some(vec![
                Compression::None,
                Compression::Zstd,
                Compression::Gzip,
            ]),
            concurrency: Some(vec![cpus()]),
            call_modes: Some(vec![CallMode::Sync]),
            rounds: Some(3),
            scene_secs: Some(Duration::from_secs(2)),
            x_by: Some("payload".into()),
            compare_by: Some("compression".into()),
            ..base
        },
    }
}

/// Each preset's title as the code gave it.
fn expected_title(preset: Preset) -> &'static str {
    match preset {
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
        Preset::Streams => {
            "brisk vs tonic: streams (server stream and ping-pong, 100 × 1 KiB items per call)"
        }
        Preset::Compression => {
            "brisk — body compression: none, zstd, gzip on text and random echo payloads"
        }
    }
}

#[test]
fn every_preset_file_gives_the_plan_the_code_gave() {
    for preset in Preset::ALL {
        let file = PresetFile::parse(preset.source(), preset.name())
            .unwrap_or_else(|e| panic!("{preset}: {e}"));
        assert_eq!(
            file.settings,
            expected_settings(preset),
            "{preset}: settings"
        );
        assert_eq!(file.title, expected_title(preset), "{preset}: title");
        let from_file = file.settings.resolve().unwrap();
        let from_code = expected_settings(preset).resolve().unwrap();
        assert_eq!(from_file, from_code, "{preset}: plan");
        assert_eq!(from_file.scenes(), from_code.scenes(), "{preset}: scenes");
        assert_eq!(preset.settings(), expected_settings(preset));
        assert_eq!(preset.title(), expected_title(preset));
    }
}

#[test]
fn every_shipped_goal_is_about_scenes_its_preset_runs() {
    for preset in Preset::ALL {
        let file = preset.file();
        let plan = file.settings.resolve().unwrap();
        let points: Vec<String> = plan
            .configs
            .iter()
            .flatten()
            .map(LoadShape::label)
            .collect();
        let players: Vec<&str> = plan.players.iter().map(|p| p.name()).collect();
        for goal in &file.goals {
            if let Some(at) = &goal.at {
                assert!(points.contains(at), "{preset}: {at} is not run: {points:?}");
            }
            for side in [&goal.subject, &goal.rivals] {
                let player = side
                    .get("player")
                    .expect("a shipped goal names its players");
                assert!(
                    player.split('|').all(|p| players.contains(&p)),
                    "{preset}: {player} does not play"
                );
            }
        }
    }
}

#[test]
fn a_goal_that_cannot_be_judged_is_an_error_naming_the_file() {
    let text = "[[goals]]\ntext = \"fast\"\nmetric = \"tps\"\nat = \"1:100\"\n\
                subject = { dispatch = \"pool\" }\nrivals = { dispatch = \"direct\" }\n\
                ratio = 0.8\n";
    let e = PresetFile::parse(text, "my.toml").unwrap_err().to_string();
    assert!(
        e.contains("my.toml") && e.contains("goals[0]: goal \"fast\"") && e.contains("C:N:P"),
        "{e}"
    );
    let metric = PresetFile::parse(&text.replace("\"tps\"", "\"qps\""), "my.toml")
        .unwrap_err()
        .to_string();
    assert!(
        metric.contains("unknown variant `qps`") && metric.contains("p99"),
        "{metric}"
    );
    let good = PresetFile::parse(&text.replace("1:100", "1:100:1024"), "my.toml").unwrap();
    assert_eq!(good.goals[0].metric, GoalMetric::Tps);
    assert_eq!(good.goals[0].ratio, 0.8);
}

#[test]
fn the_compiled_in_files_are_the_presets_directory() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("presets");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut shipped: Vec<String> = Preset::ALL
        .iter()
        .map(|p| format!("{}.toml", p.name()))
        .collect();
    shipped.sort();
    assert_eq!(on_disk, shipped, "one file per preset, named after it");
    for preset in Preset::ALL {
        let path = dir.join(format!("{}.toml", preset.name()));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            preset.source(),
            "{preset}"
        );
        assert_eq!(PresetFile::load(&path).unwrap(), preset.file());
    }
}

#[test]
fn names_come_from_one_list_and_keep_their_aliases() {
    fn names<T: Into<&'static str> + Copy>(all: &[T]) -> Vec<&'static str> {
        all.iter().map(|&v| v.into()).collect()
    }
    assert_eq!(names(&Preset::ALL), Preset::VARIANTS);
    assert_eq!(names(&Player::ALL), Player::VARIANTS);
    assert_eq!(names(&Scenario::ALL), Scenario::VARIANTS);
    assert_eq!(
        names(&[CallMode::Sync, CallMode::Async]),
        CallMode::VARIANTS
    );
    assert_eq!(names(&PayloadKind::ALL), PayloadKind::VARIANTS);
    assert_eq!("TEXT".parse::<PayloadKind>().unwrap(), PayloadKind::Text);
    assert_eq!(PayloadKind::Random.to_string(), "random");
    let connects = [
        ConnectKind::Reused,
        ConnectKind::Pooled,
        ConnectKind::Fixed,
        ConnectKind::PerCall,
    ];
    assert_eq!(names(&connects), ConnectKind::VARIANTS);
    for p in Preset::ALL {
        assert_eq!(p.name().parse::<Preset>().unwrap(), p);
        assert_eq!(p.name().replace('-', "_").parse::<Preset>().unwrap(), p);
        assert_eq!(p.name().to_uppercase().parse::<Preset>().unwrap(), p);
        assert_eq!(p.to_string(), p.name());
    }
    for (text, kind) in [
        ("single", ConnectKind::Reused),
        ("pool", ConnectKind::Pooled),
        ("Fixed", ConnectKind::Fixed),
        ("per-call", ConnectKind::PerCall),
        ("short", ConnectKind::PerCall),
        ("PERCALL", ConnectKind::PerCall),
    ] {
        assert_eq!(text.parse::<ConnectKind>().unwrap(), kind, "{text}");
    }
    assert_eq!("nothing".parse::<Scenario>().unwrap(), Scenario::Nth);
    assert_eq!("ECHO".parse::<Scenario>().unwrap(), Scenario::Echo);
    assert_eq!("Tonic".parse::<Player>().unwrap(), Player::Tonic);
    assert_eq!("ASYNC".parse::<CallMode>().unwrap(), CallMode::Async);
    assert_eq!(Scenario::Nth.to_string(), "nth");
    assert_eq!(ConnectKind::PerCall.to_string(), "percall");
    let err = "fast".parse::<Preset>().unwrap_err();
    assert!(
        err.contains("`fast`") && err.contains("jkrpc-matrix, connect-type"),
        "{err}"
    );
    let err = "grpc".parse::<Player>().unwrap_err();
    assert!(err.contains("brisk, tarpc, tonic, volo, raw"), "{err}");
    let err = "x".parse::<ConnectKind>().unwrap_err();
    assert!(err.contains("reused, pooled, fixed, percall"), "{err}");
    let err = "later".parse::<CallMode>().unwrap_err();
    assert!(err.contains("sync, async"), "{err}");
    let err = "nope".parse::<Scenario>().unwrap_err();
    assert!(
        err.contains("nth, cache, file, db, echo, stream, pingpong"),
        "{err}"
    );
    assert_eq!("ping-pong".parse::<Scenario>().unwrap(), Scenario::PingPong);
    assert_eq!("PingPong".parse::<Scenario>().unwrap(), Scenario::PingPong);
    assert_eq!(Scenario::PingPong.to_string(), "pingpong");
}

#[test]
fn a_file_spells_values_as_the_flags_do() {
    let text = r#"
title = "mine"

[settings]
players = ["Brisk", " tonic "]
scenarios = ["echo", "nothing"]
payloads = [512, "1k", "100KiB"]
requests = ["20k", 5]
concurrency = [1, "cpus"]
connect_types = ["pool", "per-call"]
write_modes = ["SYNC"]
serializers = ["json"]
compressions = ["ZSTD", "off"]
payload_kinds = ["Random", " text "]
dispatches = ["direct"]
queues = ["blocking"]
configs = ["10:100:1k"]
scene_secs = 0.5
warmup_ms = 20
pause_ms = 3
timeout_ms = 700
warmup = "2k"

[settings.requests_by_scenario]
db = ["5k"]
"#;
    let file = PresetFile::parse(text, "mine.toml").unwrap();
    assert_eq!(file.title, "mine");
    let s = file.settings;
    assert_eq!(s.players, Some(vec![Player::Brisk, Player::Tonic]));
    assert_eq!(s.scenarios, Some(vec![Scenario::Echo, Scenario::Nth]));
    assert_eq!(s.payloads, Some(vec![512, 1024, 102_400]));
    assert_eq!(s.requests, Some(vec![20_000, 5]));
    assert_eq!(s.concurrency, Some(vec![1, cpus()]));
    assert_eq!(
        s.connect_types,
        Some(vec![ConnectKind::Pooled, ConnectKind::PerCall])
    );
    assert_eq!(s.write_modes, Some(vec![WriteMode::Sync]));
    assert_eq!(s.serializers, Some(vec![SerializerKind::Json]));
    assert_eq!(
        s.compressions,
        Some(vec![Compression::Zstd, Compression::None])
    );
    assert_eq!(
        s.payload_kinds,
        Some(vec![PayloadKind::Random, PayloadKind::Text])
    );
    assert_eq!(s.dispatches, Some(vec![Dispatch::Direct]));
    assert_eq!(s.queues, Some(vec![QueueKind::Blocking]));
    assert_eq!(s.configs.unwrap()[0].label(), "10:100:1024");
    assert_eq!(s.scene_secs, Some(Duration::from_millis(500)));
    assert_eq!(s.warmup_time, Some(Duration::from_millis(20)));
    assert_eq!(s.pause, Some(Duration::from_millis(3)));
    assert_eq!(s.timeout, Some(Duration::from_millis(700)));
    assert_eq!(s.warmup, Some(2000));
    assert_eq!(
        s.requests_by_scenario,
        Some(BTreeMap::from([(Scenario::Db, vec![5000])]))
    );
    // Both halves are optional: an empty file is an empty layer with the plain title.
    let empty = PresetFile::parse("", "empty.toml").unwrap();
    assert_eq!(empty.title, "brisk benchmark");
    assert_eq!(empty.settings, Settings::default());
}

#[test]
fn a_bad_file_is_an_error_naming_the_file_the_line_and_the_key() {
    let err = |text: &str| PresetFile::parse(text, "my.toml").unwrap_err().to_string();
    let typo = err("title = \"t\"\n\n[settings]\nscenarioz = [\"echo\"]\n");
    assert!(typo.contains("my.toml"), "{typo}");
    assert!(typo.contains("line 4"), "{typo}");
    assert!(typo.contains("unknown field `scenarioz`"), "{typo}");
    assert!(
        typo.contains("scenarios"),
        "lists the keys it knows: {typo}"
    );
    let top = err("scenarios = [\"echo\"]\n");
    assert!(top.contains("unknown field `scenarios`"), "{top}");
    let name = err("[settings]\nplayers = [\"brisk\", \"grpc\"]\n");
    assert!(name.contains("line 2"), "{name}");
    assert!(name.contains("unknown player `grpc`"), "{name}");
    let size = err("[settings]\npayloads = [\"1q\"]\n");
    assert!(size.contains("`1q` is not a byte size"), "{size}");
    let negative = err("[settings]\nrequests = [-1]\n");
    assert!(negative.contains("-1 is negative"), "{negative}");
    let kind = err("[settings]\nscenarios = \"echo\"\n");
    assert!(
        kind.contains("line 2") && kind.contains("sequence"),
        "{kind}"
    );
    let secs = err("[settings]\nscene_secs = 7200\n");
    assert!(secs.contains("between 0 and 3600"), "{secs}");
    let cpus = err("[settings]\nconcurrency = [\"all\"]\n");
    assert!(cpus.contains("\"cpus\""), "{cpus}");
    let lz4 = err("[settings]\ncompressions = [\"zstd\", \"lz4\"]\n");
    assert!(
        lz4.contains("line 2") && lz4.contains("none, gzip, zstd"),
        "{lz4}"
    );
    let kind = err("[settings]\npayload_kinds = [\"zeros\"]\n");
    assert!(
        kind.contains("unknown payload kind `zeros`") && kind.contains("fill, text, random"),
        "{kind}"
    );
    let toml = err("[settings\n");
    assert!(
        toml.contains("my.toml") && toml.contains("line 1"),
        "{toml}"
    );
    let missing = PresetFile::load(std::path::Path::new("/nonexistent/preset.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("cannot read preset file /nonexistent/preset.toml"),
        "{missing}"
    );
}
