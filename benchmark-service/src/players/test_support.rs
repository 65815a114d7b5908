//! What the players' tests share: a real [`MessageStore`] in a temporary directory, a server
//! started on `127.0.0.1:0` (a peer's [`start`], brisk's [`start_brisk`]), and the scenario
//! checks, made through [`PlayerClient::call`] (the enum dispatch the engine uses, which calls
//! each player's `Client::call`) and checked with [`Reply::check`] plus the exact record, bytes
//! or items expected.

use std::future::Future;
use std::net::SocketAddr;

use ::brisk::{DispatchConfig, Server, ServerConfig, ServerHandle};
use bytes::Bytes;

use super::{PlayerClient, Reply};
use crate::scenario::{Scenario, STREAM_ITEMS};
use crate::service::{BenchmarkServiceImpl, BenchmarkServiceServer};
use crate::store::test_util::TempDir;
use crate::store::{Message, MessageStore, StoreConfig, DEFAULT_POOL_SIZE, MAX_ID, MIN_ID};

/// A running server: its address, and the directory of its data (removed on drop).
pub(crate) struct TestServer {
    pub(crate) addr: SocketAddr,
    /// brisk's server (dropping it closes everything); `None` for a peer's accept task.
    _brisk: Option<ServerHandle>,
    _dir: TempDir,
}

/// A store over messages.json in a temporary directory and a SQLite file next to it.
async fn open_store(tag: &str) -> (TempDir, MessageStore) {
    let dir = TempDir::new(tag);
    let config = StoreConfig {
        data_dir: dir.path().join("data"),
        db_url: Some(format!("sqlite:{}", dir.path().join("bench.db").display())),
        db_pool_size: DEFAULT_POOL_SIZE,
    };
    let store = MessageStore::open(config).await.unwrap();
    (dir, store)
}

/// brisk's benchmark server with `dispatch` on `127.0.0.1:0`, over a fresh store.
pub(crate) async fn start_brisk(tag: &str, dispatch: DispatchConfig) -> TestServer {
    let (dir, store) = open_store(tag).await;
    let handle = Server::builder()
        .config(ServerConfig {
            addr: "127.0.0.1:0".into(),
            dispatch,
            ..ServerConfig::default()
        })
        .service(BenchmarkServiceServer::new(BenchmarkServiceImpl::new(
            store,
        )))
        .start()
        .await
        .unwrap();
    TestServer {
        addr: handle.local_addr(),
        _brisk: Some(handle),
        _dir: dir,
    }
}

/// Opens a store (messages.json in a temporary directory, a SQLite file next to it) and runs
/// `serve` on a listener bound to `127.0.0.1:0`.
pub(crate) async fn start<F, Fut>(tag: &str, serve: F) -> TestServer
where
    F: FnOnce(tokio::net::TcpListener, MessageStore) -> Fut,
    Fut: Future<Output = std::io::Result<()>> + Send + 'static,
{
    let (dir, store) = open_store(tag).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = serve(listener, store);
    tokio::spawn(async move {
        if let Err(e) = served.await {
            panic!("the test server stopped: {e}");
        }
    });
    TestServer {
        addr,
        _brisk: None,
        _dir: dir,
    }
}

/// `len` bytes of a pattern that a shifted or truncated echo would not reproduce.
pub(crate) fn pattern(len: usize) -> Bytes {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// One call that must succeed: the reply passes [`Reply::check`] and is exactly the expected
/// record or bytes.
pub(crate) async fn call_ok(
    client: &PlayerClient,
    caller: usize,
    scenario: Scenario,
    key: i64,
    payload: &Bytes,
) {
    let reply = client
        .call(caller, scenario, key, payload)
        .await
        .unwrap_or_else(|e| panic!("{scenario} key {key}: {e}"));
    reply.check(scenario, key, payload).unwrap();
    match (scenario, reply) {
        (Scenario::Nth, Reply::Nothing) => {}
        (Scenario::Cache | Scenario::File | Scenario::Db, Reply::Message(m)) => {
            assert_eq!(m, Message::seed(key), "{scenario} key {key}")
        }
        (Scenario::Echo, Reply::Echo(back)) => assert_eq!(&back, payload, "echo"),
        (Scenario::Stream | Scenario::PingPong, Reply::Items(tally)) => {
            assert_eq!(tally.count, u64::from(STREAM_ITEMS), "{scenario}");
            assert_eq!(tally.wrong, 0, "{scenario}: every item is the payload");
        }
        (scenario, reply) => panic!("{scenario} answered {reply:?}"),
    }
}

/// `stream` and `pingpong` with items of 0 B, 1 KiB and 100 KiB (brisk's credit window of 256
/// such items is 25 MiB, more than brisk's outbox or tonic's HTTP/2 stream window), on both
/// connections; then both again at once from 20 callers.
pub(crate) async fn check_streams(client: &PlayerClient) {
    for (caller, len) in [0, 1024, 100 * 1024].into_iter().enumerate() {
        for scenario in [Scenario::Stream, Scenario::PingPong] {
            call_ok(client, caller, scenario, MIN_ID, &pattern(len)).await;
            call_ok(client, caller + 1, scenario, MIN_ID, &pattern(len)).await;
        }
    }
    check_concurrent_n(client, &[Scenario::Stream, Scenario::PingPong], 20, 5).await;
}

/// The streaming scenarios are an error of a player without streams (and it goes on).
pub(crate) async fn check_no_streams(client: &PlayerClient) {
    for scenario in [Scenario::Stream, Scenario::PingPong] {
        let e = client
            .call(0, scenario, MIN_ID, &pattern(10))
            .await
            .expect_err("no streaming calls");
        assert!(e.0.contains("no streaming calls"), "{scenario}: {e}");
    }
    call_ok(client, 0, Scenario::Echo, MIN_ID, &pattern(10)).await;
}

/// nth; cache, file and db for every seeded id; echo of 0 B, 1 KiB and 100 KiB.
pub(crate) async fn check_every_scenario(client: &PlayerClient) {
    let none = Bytes::new();
    call_ok(client, 0, Scenario::Nth, MIN_ID, &none).await;
    for scenario in [Scenario::Cache, Scenario::File, Scenario::Db] {
        for id in MIN_ID..=MAX_ID {
            call_ok(client, id as usize, scenario, id, &none).await;
        }
    }
    check_echo(client).await;
}

/// Echo of 0 B, 1 KiB and 100 KiB, on both connections.
pub(crate) async fn check_echo(client: &PlayerClient) {
    for (caller, len) in [0, 1024, 100 * 1024].into_iter().enumerate() {
        call_ok(client, caller, Scenario::Echo, MIN_ID, &pattern(len)).await;
        call_ok(client, caller + 1, Scenario::Echo, MIN_ID, &pattern(len)).await;
    }
}

/// id 999 is an error of the framework for cache, file and db (naming the id), and the client
/// still answers afterwards, on both connections.
pub(crate) async fn check_unknown_id(client: &PlayerClient) {
    let none = Bytes::new();
    for scenario in [Scenario::Cache, Scenario::File, Scenario::Db] {
        for caller in 0..2 {
            let e = client
                .call(caller, scenario, 999, &none)
                .await
                .expect_err("id 999 is not seeded");
            assert!(e.0.contains("999"), "{scenario}: {e}");
            call_ok(client, caller, scenario, 3, &none).await;
        }
    }
    call_ok(client, 0, Scenario::Nth, MIN_ID, &none).await;
    call_ok(client, 1, Scenario::Echo, MIN_ID, &pattern(100)).await;
}

/// 50 concurrent tasks × 20 calls, task `t` as caller `t`, cycling through `scenarios`; every
/// call succeeds.
pub(crate) async fn check_concurrent(client: &PlayerClient, scenarios: &[Scenario]) {
    check_concurrent_n(client, scenarios, 50, 20).await;
}

/// `tasks` concurrent tasks × `calls` calls, task `t` as caller `t` with a payload of `t × 37`
/// bytes, cycling through `scenarios`; every call succeeds.
async fn check_concurrent_n(
    client: &PlayerClient,
    scenarios: &[Scenario],
    tasks: usize,
    calls: usize,
) {
    let scenarios: std::sync::Arc<[Scenario]> = scenarios.into();
    let tasks: Vec<_> = (0..tasks)
        .map(|t| {
            let client = client.clone();
            let scenarios = scenarios.clone();
            tokio::spawn(async move {
                let payload = pattern(t * 37);
                for i in 0..calls {
                    let scenario = scenarios[(t + i) % scenarios.len()];
                    let key = ((t + i) % 10 + 1) as i64;
                    call_ok(&client, t, scenario, key, &payload).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}
