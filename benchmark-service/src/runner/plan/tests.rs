//! The plan's behaviour: defaults, the cross product and how dimensions collapse, layering,
//! count mode, the presets' chart choices, and bad values.

use std::time::Duration;

use brisk::{Compression, Dispatch, QueueKind, SerializerKind};

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
fn volo_runs_once_per_transport_each_on_its_own_server() {
    let plan = Settings::default()
        .over(Preset::Peers.settings())
        .resolve()
        .unwrap();
    for point in plan.points() {
        let volo: Vec<Option<VoloTransport>> = point
            .iter()
            .filter(|s| s.player == Player::Volo)
            .map(|s| s.volo_transport)
            .collect();
        assert_eq!(volo, [Some(VoloTransport::Pool), Some(VoloTransport::Mux)]);
        assert!(point
            .iter()
            .filter(|s| s.player != Player::Volo)
            .all(|s| s.volo_transport.is_none()));
    }
    let mux = plan
        .scenes()
        .into_iter()
        .find(|s| s.volo_transport == Some(VoloTransport::Mux))
        .unwrap();
    assert_eq!(mux.label(), "volo-echo-c1-n0-sync [mux, 1 conn, 1024 B]");
    // brisk × 2 dispatches, tarpc, tonic, volo × 2 transports, raw: a server each.
    let keys = plan.server_keys();
    assert_eq!(keys.len(), 2 + 2 + 2 + 1);
    let volo: Vec<Option<VoloTransport>> = keys
        .iter()
        .filter(|k| k.player == Player::Volo)
        .map(|k| k.volo_transport)
        .collect();
    assert_eq!(volo, [Some(VoloTransport::Pool), Some(VoloTransport::Mux)]);
    // Each transport its own series beside brisk's dispatches.
    assert_eq!(plan.chart_compare_by(), "player+dispatch+volo_transport");

    // Unless told, volo runs its default transport only, and the charts are as before.
    let volo_only = Settings {
        players: Some(vec![Player::Volo]),
        ..Settings::default()
    };
    let plan = volo_only.clone().resolve().unwrap();
    assert!(plan
        .scenes()
        .iter()
        .all(|s| s.volo_transport == Some(VoloTransport::Pool)));
    assert_eq!(plan.chart_compare_by(), "call_mode");
    // volo alone on both transports: the charts compare them.
    let both = Settings {
        volo_transports: Some(VoloTransport::ALL.to_vec()),
        ..volo_only.clone()
    }
    .resolve()
    .unwrap();
    assert_eq!(both.scenes().len(), 2);
    assert_eq!(both.chart_compare_by(), "volo_transport");
    let none = Settings {
        volo_transports: Some(vec![]),
        ..volo_only
    };
    let err = none.resolve().unwrap_err();
    assert!(err.contains("--volo-transport"), "{err}");
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
    // brisk direct + pool, tarpc, tonic, volo pool + mux, raw
    assert!(points.iter().all(|p| p.len() == 7));
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
    let no_batch = Settings {
        coalesce_calls: Some(0),
        ..Settings::default()
    };
    let err = no_batch.resolve().unwrap_err();
    assert!(err.contains("--coalesce-calls"), "{err}");
    let strict = Settings {
        coalesce_calls: Some(1),
        ..Settings::default()
    };
    assert_eq!(strict.resolve().unwrap().coalesce_calls, Some(1));
}

#[test]
fn the_streams_preset_plans_brisk_and_tonic_on_both_streams_at_both_load_points() {
    let plan = Preset::Streams.settings().resolve().unwrap();
    let points = plan.points();
    // 2 scenarios × 2 load points, brisk and tonic in each.
    assert_eq!(points.len(), 2 * 2);
    for point in &points {
        let players: Vec<Player> = point.iter().map(|s| s.player).collect();
        assert_eq!(players, [Player::Brisk, Player::Tonic]);
        assert!(point.iter().all(|s| s.scenario.is_stream()
            && s.payload == 1024
            && s.connections == 1
            && s.call_mode == CallMode::Sync));
    }
    let shapes: Vec<(Scenario, u32)> = points
        .iter()
        .map(|p| (p[0].scenario, p[0].concurrency))
        .collect();
    assert_eq!(
        shapes,
        [
            (Scenario::Stream, 1),
            (Scenario::Stream, 10),
            (Scenario::PingPong, 1),
            (Scenario::PingPong, 10),
        ]
    );
    assert_eq!(plan.rounds, 5);
    assert_eq!(plan.scene_secs, Some(Duration::from_secs(2)));
    assert_eq!(plan.chart_compare_by(), "player");
    assert_eq!(plan.chart_x_by(), "concurrency");
    assert_eq!(
        points[0][0].options(),
        "[fixed/1, write async, msgpack, pool/transfer, 1024 B, 100 msgs/call]"
    );
    // About a minute and a half of measurement.
    let window = plan.scene_secs.unwrap() + plan.warmup_time;
    let secs = window.as_secs_f64() * plan.scenes().len() as f64 * f64::from(plan.rounds);
    assert!(secs <= 120.0, "{secs} s");
}

#[test]
fn players_without_streams_are_left_out_of_the_streaming_scenarios() {
    let plan = Settings {
        players: Some(Player::ALL.to_vec()),
        scenarios: Some(vec![Scenario::Echo, Scenario::Stream, Scenario::PingPong]),
        ..Settings::default()
    }
    .resolve()
    .unwrap();
    let points = plan.points();
    assert_eq!(points.len(), 3);
    let players = |p: &[Scene]| p.iter().map(|s| s.player).collect::<Vec<_>>();
    assert_eq!(players(&points[0]), Player::ALL);
    for point in &points[1..] {
        assert_eq!(players(point), [Player::Brisk, Player::Tonic]);
        assert!(point.iter().all(|s| s.payload == 1024));
    }
    // A plan of streams with only players that have none is refused, naming why.
    for only in [Player::Tarpc, Player::Volo, Player::Raw] {
        let err = Settings {
            players: Some(vec![only]),
            scenarios: Some(vec![Scenario::Stream, Scenario::PingPong]),
            ..Settings::default()
        }
        .resolve()
        .unwrap_err();
        assert!(err.contains("brisk's and tonic's"), "{only}: {err}");
    }
    // tarpc beside brisk: brisk alone plays the streams.
    let plan = Settings {
        players: Some(vec![Player::Brisk, Player::Tarpc]),
        scenarios: Some(vec![Scenario::PingPong]),
        ..Settings::default()
    }
    .resolve()
    .unwrap();
    assert!(plan.scenes().iter().all(|s| s.player == Player::Brisk));
}

#[test]
fn compressions_multiply_brisk_scenes_only_and_name_them_unless_none() {
    let plan = Settings {
        players: Some(vec![Player::Brisk, Player::Tonic]),
        scenarios: Some(vec![Scenario::Nth, Scenario::Echo]),
        compressions: Some(vec![
            Compression::None,
            Compression::Zstd,
            Compression::Gzip,
            Compression::Zstd,
        ]),
        ..Settings::default()
    }
    .resolve()
    .unwrap();
    let points = plan.points();
    assert_eq!(points.len(), 2, "compression is not a point dimension");
    for point in &points {
        // brisk × 3 compressions (the repeat dropped), tonic once without any.
        let got: Vec<(Player, Compression)> =
            point.iter().map(|s| (s.player, s.compression)).collect();
        assert_eq!(
            got,
            [
                (Player::Brisk, Compression::None),
                (Player::Brisk, Compression::Zstd),
                (Player::Brisk, Compression::Gzip),
                (Player::Tonic, Compression::None),
            ]
        );
    }
    let names: Vec<String> = points[1].iter().map(|s| s.name(100)).collect();
    assert_eq!(
        names,
        [
            "brisk-echo-c20-n100-sync",
            "brisk-echo-c20-n100-sync-zstd",
            "brisk-echo-c20-n100-sync-gzip",
            "tonic-echo-c20-n100-sync",
        ]
    );
    assert_eq!(plan.chart_compare_by(), "player+compression");
    // The default: no compression, and today's names.
    let plain = Settings::default().resolve().unwrap();
    assert_eq!(plain.compressions, [Compression::None]);
    assert!(plain
        .scenes()
        .iter()
        .all(|s| s.compression == Compression::None));
}

#[test]
fn payload_kinds_are_points_of_the_payload_scenarios_for_every_player() {
    let plan = Settings {
        players: Some(vec![Player::Brisk, Player::Raw]),
        scenarios: Some(vec![Scenario::Nth, Scenario::Echo]),
        payloads: Some(vec![1024, 2048]),
        payload_kinds: Some(vec![
            PayloadKind::Random,
            PayloadKind::Fill,
            PayloadKind::Random,
        ]),
        ..Settings::default()
    }
    .resolve()
    .unwrap();
    let points = plan.points();
    // nth: one point (no payload, the kind collapses); echo: 2 kinds × 2 sizes, the kind
    // outermost.
    assert_eq!(points.len(), 1 + 2 * 2);
    assert!(points[0]
        .iter()
        .all(|s| s.payload_kind == PayloadKind::Fill && s.payload_kind_name().is_empty()));
    let shapes: Vec<(PayloadKind, u64)> = points[1..]
        .iter()
        .map(|p| (p[0].payload_kind, p[0].payload))
        .collect();
    assert_eq!(
        shapes,
        [
            (PayloadKind::Random, 1024),
            (PayloadKind::Random, 2048),
            (PayloadKind::Fill, 1024),
            (PayloadKind::Fill, 2048),
        ]
    );
    for point in &points[1..] {
        // Every player plays every kind; a point holds one kind.
        let players: Vec<Player> = point.iter().map(|s| s.player).collect();
        assert_eq!(players, [Player::Brisk, Player::Raw]);
        assert!(point
            .iter()
            .all(|s| s.payload_kind == point[0].payload_kind));
    }
    assert_eq!(points[1][1].name(7), "raw-echo-c20-n7-sync-random");
    assert_eq!(points[3][1].name(7), "raw-echo-c20-n7-sync");
    assert_eq!(points[1][0].payload_kind_name(), "random");
    assert_eq!(plan.chart_compare_by(), "player+payload_kind");
    // A scenario without a payload beside one with is no variation of the kind.
    let one_kind = Settings {
        scenarios: Some(vec![Scenario::Nth, Scenario::Echo]),
        payload_kinds: Some(vec![PayloadKind::Text]),
        ..Settings::default()
    }
    .resolve()
    .unwrap();
    assert_eq!(one_kind.chart_compare_by(), "call_mode");
    // Both suffixes: the kind, then the compression.
    let both = Scene {
        compression: Compression::Gzip,
        ..points[1][0].clone()
    };
    assert_eq!(both.name(7), "brisk-echo-c20-n7-sync-random-gzip");
}

#[test]
fn the_compression_preset_sweeps_sizes_per_kind_and_compares_compressions() {
    let plan = Preset::Compression.settings().resolve().unwrap();
    let points = plan.points();
    // 2 kinds × 3 sizes, each point brisk × none, zstd, gzip.
    assert_eq!(points.len(), 2 * 3);
    for point in &points {
        let got: Vec<Compression> = point.iter().map(|s| s.compression).collect();
        assert_eq!(
            got,
            [Compression::None, Compression::Zstd, Compression::Gzip]
        );
        assert!(point
            .iter()
            .all(|s| s.player == Player::Brisk && s.scenario == Scenario::Echo));
    }
    let kinds: Vec<(PayloadKind, u64)> = points
        .iter()
        .map(|p| (p[0].payload_kind, p[0].payload))
        .collect();
    assert_eq!(kinds[0], (PayloadKind::Text, 1024));
    assert_eq!(kinds[5], (PayloadKind::Random, 102_400));
    assert_eq!(plan.chart_compare_by(), "compression");
    assert_eq!(plan.chart_x_by(), "payload");
    // A few minutes of measurement.
    let window = plan.scene_secs.unwrap() + plan.warmup_time;
    let secs = window.as_secs_f64() * plan.scenes().len() as f64 * f64::from(plan.rounds);
    assert!(secs <= 180.0, "{secs} s");
    // The flags override it like any preset.
    let cli = Settings {
        compressions: Some(vec![Compression::Zstd]),
        payload_kinds: Some(vec![PayloadKind::Fill]),
        ..Settings::default()
    };
    let plan = cli.over(Preset::Compression.settings()).resolve().unwrap();
    assert_eq!(plan.scenes().len(), 3);
    assert!(plan
        .scenes()
        .iter()
        .all(|s| s.name(1).ends_with("-sync-zstd")));
    let none = Settings {
        compressions: Some(vec![]),
        ..Settings::default()
    };
    assert!(none.resolve().unwrap_err().contains("--compression"));
}

#[test]
fn payload_kinds_make_deterministic_bytes_of_the_asked_length() {
    for kind in PayloadKind::ALL {
        for len in [0, 1, 7, 1024, 10_240, 100_000] {
            let bytes = kind.bytes(len);
            assert_eq!(bytes.len(), len, "{kind} {len}");
            assert_eq!(bytes, kind.bytes(len), "{kind} {len}: deterministic");
        }
    }
    assert_eq!(PayloadKind::Fill.bytes(1024), vec![b'x'; 1024]);
    let text = PayloadKind::Text.bytes(10_240);
    let text = std::str::from_utf8(&text).expect("text is UTF-8");
    assert!(text.starts_with("{\"id\":"), "{}", &text[..80]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() > 40, "{} lines", lines.len());
    assert_ne!(lines[0], lines[1], "the values vary");
    // Every byte value shows up in random bytes, none much more often than its share.
    let random = PayloadKind::Random.bytes(256 * 1024);
    let mut counts = [0usize; 256];
    for b in &random {
        counts[usize::from(*b)] += 1;
    }
    assert!(
        counts.iter().all(|&n| (800..1250).contains(&n)),
        "{counts:?}"
    );
}

#[test]
fn text_compresses_like_real_traffic_and_random_does_not() {
    use brisk::codec::compression::BodyCompressor;
    use bytes::Bytes;
    let zstd = BodyCompressor::new(Compression::Zstd, 1024, 1);
    let ratio = |kind: PayloadKind, len: usize| {
        let (packed, algorithm) = zstd.compress(Bytes::from(kind.bytes(len)));
        (len as f64 / packed.len() as f64, algorithm)
    };
    for len in [10_240, 102_400] {
        let (r, algorithm) = ratio(PayloadKind::Text, len);
        assert_eq!(algorithm, Compression::Zstd);
        assert!((3.0..=6.0).contains(&r), "text {len}: {r:.2}×");
        // Random bytes do not shrink: the sender keeps them as they are.
        let (r, algorithm) = ratio(PayloadKind::Random, len);
        assert_eq!((r, algorithm), (1.0, Compression::None), "random {len}");
    }
    let (fill, _) = ratio(PayloadKind::Fill, 102_400);
    assert!(fill > 100.0, "fill: {fill:.0}×");
}
