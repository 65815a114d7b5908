//! End-to-end check of the benchmark runner: the `smoke` preset through the runner API
//! against in-process benchmark servers of every player on SQLite in a temp dir, asserting
//! that every player ran every scenario it implements without a single failed call. Also: an unreachable server is a clear
//! `Connect` error, and the async in-flight bound still completes every request.

use benchmark_service::runner::{
    run, CallMode, ConnectKind, Player, Preset, RunError, RunOptions, Scenario, ServerSource,
    Settings,
};

mod common;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn smoke_preset_runs_every_scenario_without_errors() {
    let tmp = common::TempDir::new("smoke");
    let plan = Preset::Smoke
        .settings()
        .resolve()
        .expect("smoke preset resolves");
    let expected = plan.scenes().len();
    let outcome = run(&RunOptions {
        plan,
        server: tmp.server(),
        verbose: false,
    })
    .await
    .expect("smoke run");

    assert!(
        outcome.failed.is_empty(),
        "scenes not run: {:?}",
        outcome.failed
    );
    assert_eq!(outcome.scenes.len(), expected);
    // No failed call, except volo-thrift's known pool failure (see common::VOLO_POOL_RACE).
    let unexplained = common::unexplained_errors(&outcome);
    assert!(unexplained.is_empty(), "{unexplained:?}");
    for player in Player::ALL {
        for scenario in Scenario::ALL.into_iter().filter(|s| player.supports(*s)) {
            for mode in ["sync", "async"] {
                let scene = outcome
                    .scenes
                    .iter()
                    .find(|s| {
                        s.player == player.name()
                            && s.scenario == scenario.name()
                            && s.call_mode == mode
                    })
                    .unwrap_or_else(|| panic!("{player} {scenario} {mode} missing"));
                assert_eq!(
                    scene.succeeded + scene.errors,
                    scene.requests,
                    "{}",
                    scene.name()
                );
                assert!(scene.tps > 0.0);
                if player == Player::Brisk {
                    assert_eq!(scene.dispatch, "pool");
                    assert_eq!(scene.queue, "transfer");
                } else {
                    assert_eq!(scene.dispatch, "");
                }
            }
        }
    }
    let echo = outcome
        .scenes
        .iter()
        .find(|s| s.scenario == "echo")
        .unwrap();
    assert_eq!(echo.payload, 1024);
    assert!(echo.extra.contains_key("mb_per_s"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_async_per_call_connections_and_direct_dispatch() {
    let tmp = common::TempDir::new("bounded");
    let plan = Settings {
        scenarios: Some(vec![Scenario::Nth, Scenario::Cache]),
        concurrency: Some(vec![3]),
        requests: Some(vec![100]),
        call_modes: Some(vec![CallMode::Async]),
        connect_types: Some(vec![
            ConnectKind::PerCall,
            ConnectKind::Reused,
            ConnectKind::Pooled,
        ]),
        dispatches: Some(vec![brisk::Dispatch::Direct]),
        max_in_flight: Some(2),
        scene_secs: Some(std::time::Duration::ZERO),
        warmup: Some(0),
        rounds: Some(2),
        pause: Some(std::time::Duration::ZERO),
        ..Settings::default()
    }
    .resolve()
    .expect("settings resolve");
    let outcome = run(&RunOptions {
        plan,
        server: tmp.server(),
        verbose: false,
    })
    .await
    .expect("run");
    assert_eq!(outcome.scenes.len(), 6);
    for s in &outcome.scenes {
        assert_eq!((s.succeeded, s.errors), (100, 0), "{}", s.name());
        assert_eq!(s.dispatch, "direct");
        assert_eq!(s.queue, "");
    }
}

#[tokio::test]
async fn unreachable_server_is_a_connect_error() {
    let plan = Settings {
        warmup: Some(0),
        rounds: Some(1),
        ..Settings::default()
    }
    .resolve()
    .expect("settings resolve");
    // Port 1 on loopback: nothing listens there (connection refused).
    let err = run(&RunOptions {
        plan,
        server: ServerSource::Remote("127.0.0.1:1".into()),
        verbose: false,
    })
    .await
    .expect_err("no server");
    assert!(matches!(err, RunError::Connect(_)), "{err}");
}
