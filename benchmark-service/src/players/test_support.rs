//! What the players' tests share: a real [`MessageStore`] in a temporary directory, a server
//! started on `127.0.0.1:0`, and the scenario checks, made through [`PlayerClient::call`] (the
//! enum dispatch the engine uses, which calls each player's `Client::call`) and checked with
//! [`Reply::check`] plus the exact record or bytes expected.

use std::future::Future;
use std::net::SocketAddr;

use bytes::Bytes;

use super::{PlayerClient, Reply};
use crate::scenario::Scenario;
use crate::store::test_util::TempDir;
use crate::store::{Message, MessageStore, StoreConfig, DEFAULT_POOL_SIZE, MAX_ID, MIN_ID};

/// A running server: its address, and the directory of its data (removed on drop).
pub(crate) struct TestServer {
    pub(crate) addr: SocketAddr,
    _dir: TempDir,
}

/// Opens a store (messages.json in a temporary directory, a SQLite file next to it) and runs
/// `serve` on a listener bound to `127.0.0.1:0`.
pub(crate) async fn start<F, Fut>(tag: &str, serve: F) -> TestServer
where
    F: FnOnce(tokio::net::TcpListener, MessageStore) -> Fut,
    Fut: Future<Output = std::io::Result<()>> + Send + 'static,
{
    let dir = TempDir::new(tag);
    let config = StoreConfig {
        data_dir: dir.path().join("data"),
        db_url: Some(format!("sqlite:{}", dir.path().join("bench.db").display())),
        db_pool_size: DEFAULT_POOL_SIZE,
    };
    let store = MessageStore::open(config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = serve(listener, store);
    tokio::spawn(async move {
        if let Err(e) = served.await {
            panic!("the test server stopped: {e}");
        }
    });
    TestServer { addr, _dir: dir }
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
        (scenario, reply) => panic!("{scenario} answered {reply:?}"),
    }
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
    let scenarios: std::sync::Arc<[Scenario]> = scenarios.into();
    let tasks: Vec<_> = (0..50usize)
        .map(|t| {
            let client = client.clone();
            let scenarios = scenarios.clone();
            tokio::spawn(async move {
                let payload = pattern(t * 37);
                for i in 0..20usize {
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
