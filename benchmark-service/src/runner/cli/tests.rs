//! The command line: comma lists, layering over a preset or a preset file, bad values as
//! clap errors, output directories, the started server's flags.

use std::path::PathBuf;
use std::time::Duration;

use brisk::{Compression, QueueKind, WriteMode};
use clap::Parser;

use super::ClientArgs;
use crate::runner::plan::{CallMode, PayloadKind, Player, Preset, Scenario, VoloTransport};
use crate::runner::target::{server_args, Transport};
use crate::store::test_util::TempDir;

#[test]
fn flags_parse_as_comma_lists_and_layer_over_presets() {
    let args = ClientArgs::try_parse_from([
        "benchmark_client",
        "--preset",
        "queue",
        "--concurrency",
        "5,10",
        "--requests",
        "2k",
        "--write-mode",
        "sync,async",
        "--payload",
        "1k,2048",
        "--pause-ms",
        "0",
    ])
    .unwrap();
    let plan = args.layered_settings().unwrap().resolve().unwrap();
    assert_eq!(plan.concurrency, vec![5, 10]);
    assert_eq!(plan.requests, vec![2000]);
    assert_eq!(plan.write_modes, vec![WriteMode::Sync, WriteMode::Async]);
    assert_eq!(plan.payloads, vec![1024, 2048]);
    assert_eq!(plan.pause, Duration::ZERO);
    // from the preset
    assert_eq!(plan.queues, vec![QueueKind::Blocking, QueueKind::Transfer]);
    assert_eq!(plan.call_modes, vec![CallMode::Async]);
    assert_eq!(args.out_dir(), Some(PathBuf::from("bench-results/queue")));
    // 2 queues × 2 write modes × 2 concurrencies
    assert_eq!(plan.scenes().len(), 8);
}

#[test]
fn bad_flag_values_are_clap_errors() {
    for bad in [
        ["--scenario", "nope"],
        ["--write-mode", "later"],
        ["--payload", "1q"],
        ["--preset", "fast"],
        ["--connect-type", "x"],
        ["--compression", "lz4"],
        ["--payload-kind", "zeros"],
        ["--volo-transport", "grpc"],
    ] {
        let args = std::iter::once("benchmark_client").chain(bad);
        assert!(ClientArgs::try_parse_from(args).is_err(), "{bad:?}");
    }
}

#[test]
fn no_out_wins_and_plain_runs_print_only() {
    let a = ClientArgs::try_parse_from(["b", "--preset", "smoke", "--no-out"]).unwrap();
    assert_eq!(a.out_dir(), None);
    let b = ClientArgs::try_parse_from(["b"]).unwrap();
    assert_eq!(b.out_dir(), None);
    let c = ClientArgs::try_parse_from(["b", "--out", "x"]).unwrap();
    assert_eq!(c.out_dir(), Some(PathBuf::from("x")));
}

#[test]
fn volo_transport_flag_overrides_the_peers_preset_and_reaches_volos_server() {
    let peers = ClientArgs::try_parse_from(["b", "--preset", "peers"]).unwrap();
    let plan = peers.layered_settings().unwrap().resolve().unwrap();
    assert_eq!(
        plan.volo_transports,
        [VoloTransport::Pool, VoloTransport::Mux]
    );
    let mux =
        ClientArgs::try_parse_from(["b", "--preset", "peers", "--volo-transport", " multiplex"])
            .unwrap();
    let plan = mux.layered_settings().unwrap().resolve().unwrap();
    assert_eq!(plan.volo_transports, [VoloTransport::Mux]);
    let key = plan
        .server_keys()
        .into_iter()
        .find(|k| k.player == Player::Volo)
        .unwrap();
    let argv = server_args(&mux.server_base(), key, Transport::Tcp).to_argv();
    assert!(
        argv.windows(2).any(|w| w == ["--player", "volo"]),
        "{argv:?}"
    );
    assert!(
        argv.windows(2).any(|w| w == ["--volo-transport", "mux"]),
        "{argv:?}"
    );
}

#[test]
fn server_flags_reach_the_server_args() {
    let a = ClientArgs::try_parse_from(["b", "--max-threads", "16", "--db", "sqlite::memory:"])
        .unwrap();
    let s = a.server_base();
    assert_eq!(s.max_threads, Some(16));
    assert_eq!(s.db.as_deref(), Some("sqlite::memory:"));
    assert_eq!(s.addr, None);
}

#[test]
fn a_preset_file_is_a_preset_of_ones_own() {
    let dir = TempDir::new("preset-file");
    let path = dir.path().join("my-echo.toml");
    std::fs::write(
        &path,
        "title = \"my echo\"\n[settings]\nscenarios = [\"echo\"]\npayloads = [\"2k\"]\n",
    )
    .unwrap();
    let file_arg = path.to_str().unwrap();
    let args =
        ClientArgs::try_parse_from(["b", "--preset-file", file_arg, "--concurrency", "3"]).unwrap();
    assert_eq!(args.preset_file().unwrap().title, "my echo");
    let plan = args.layered_settings().unwrap().resolve().unwrap();
    assert_eq!(plan.scenarios, vec![Scenario::Echo]);
    assert_eq!(plan.payloads, vec![2048]);
    assert_eq!(plan.concurrency, vec![3], "flags win over the file");
    assert_eq!(args.out_dir(), Some(PathBuf::from("bench-results/my-echo")));
    // A shipped preset's own file through --preset-file is the same preset.
    let shipped = dir.path().join("queue.toml");
    std::fs::write(&shipped, Preset::Queue.source()).unwrap();
    let by_file =
        ClientArgs::try_parse_from(["b", "--preset-file", shipped.to_str().unwrap()]).unwrap();
    let by_name = ClientArgs::try_parse_from(["b", "--preset", "queue"]).unwrap();
    assert_eq!(
        by_file.layered_settings().unwrap(),
        by_name.layered_settings().unwrap()
    );
    assert_eq!(by_file.out_dir(), by_name.out_dir());
    assert_eq!(by_name.preset_file().unwrap().title, Preset::Queue.title());
    // Not both.
    assert!(
        ClientArgs::try_parse_from(["b", "--preset", "queue", "--preset-file", file_arg]).is_err()
    );
    // A bad file is an error naming it, not a run with defaults.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[settings]\nplayer = [\"brisk\"]\n").unwrap();
    let args = ClientArgs::try_parse_from(["b", "--preset-file", bad.to_str().unwrap()]).unwrap();
    let err = args.layered_settings().unwrap_err().to_string();
    assert!(
        err.contains("bad.toml") && err.contains("unknown field `player`"),
        "{err}"
    );
}

#[test]
fn names_on_the_command_line_ignore_surrounding_spaces() {
    let args = ClientArgs::try_parse_from([
        "b",
        "--players",
        "brisk, tonic",
        "--scenario",
        " echo",
        "--call-mode",
        "sync, async",
        "--connect-type",
        "fixed, per-call",
        "--preset",
        " smoke ",
    ])
    .unwrap();
    assert_eq!(args.preset, Some(Preset::Smoke));
    assert_eq!(args.call_mode, Some(vec![CallMode::Sync, CallMode::Async]));
    assert_eq!(args.scenario, Some(vec![Scenario::Echo]));
}

#[test]
fn compression_and_payload_kind_flags_override_the_compression_preset() {
    let args = ClientArgs::try_parse_from([
        "b",
        "--preset",
        "compression",
        "--compression",
        "zstd, none",
        "--payload-kind",
        "random",
    ])
    .unwrap();
    let plan = args.layered_settings().unwrap().resolve().unwrap();
    assert_eq!(plan.compressions, [Compression::Zstd, Compression::None]);
    assert_eq!(plan.payload_kinds, [PayloadKind::Random]);
    // From the preset: three sizes, brisk's echo, charts by compression over the payload.
    assert_eq!(plan.payloads, [1024, 10_240, 102_400]);
    assert_eq!(plan.scenes().len(), 3 * 2);
    assert_eq!(plan.chart_compare_by(), "compression");
    assert_eq!(
        args.out_dir(),
        Some(PathBuf::from("bench-results/compression"))
    );
    // Without the preset or the flags: no compression, the `x` fill.
    let plain = ClientArgs::try_parse_from(["b", "--scenario", "echo"]).unwrap();
    let plan = plain.layered_settings().unwrap().resolve().unwrap();
    assert_eq!(plan.compressions, [Compression::None]);
    assert_eq!(plan.payload_kinds, [PayloadKind::Fill]);
}

#[test]
fn server_cpus_are_for_a_server_the_client_starts() {
    let parse = |argv: &[&str]| ClientArgs::try_parse_from(argv).unwrap();
    let started = parse(&["b", "--server-cpus", "1", "--client-cpus", "0"]);
    assert_eq!(started.no_server_started(), None);
    assert_eq!(
        started.server_base().cpus.map(|l| l.to_string()).as_deref(),
        Some("1")
    );
    for (flag, argv) in [
        (
            "--addr",
            vec!["b", "--server-cpus", "1", "--addr", "127.0.0.1:1"],
        ),
        (
            "--registry",
            vec![
                "b",
                "--server-cpus",
                "1",
                "--registry",
                "etcd://127.0.0.1:2379",
            ],
        ),
        (
            "--in-process",
            vec!["b", "--server-cpus", "1", "--in-process"],
        ),
    ] {
        assert_eq!(parse(&argv).no_server_started(), Some(flag));
    }
    assert!(ClientArgs::try_parse_from(["b", "--server-cpus", "2-1"]).is_err());
}
