//! A service that says which server answered, and helpers to start a few
//! servers, shared by the multi-server tests (`cluster.rs`, `cluster_etcd.rs`).
#![allow(dead_code)]

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brisk::{Context, Dispatch, Server, ServerBuilder, ServerHandle, Status};

/// Answers with the name of the server that ran the call.
#[brisk::service]
pub trait Where {
    /// The server's name.
    async fn whoami(&self, cx: &Context) -> Result<String, Status>;
    /// Sleeps, then the server's name.
    async fn slow(&self, cx: &Context, ms: u64) -> Result<String, Status>;
}

/// One test server's identity and counters.
#[derive(Default)]
pub struct WhereImpl {
    pub name: String,
    /// Calls inside `slow` right now.
    pub active: AtomicUsize,
    /// Added to every `slow` call: a slow server.
    pub extra_delay_ms: u64,
}

impl Where for Arc<WhereImpl> {
    async fn whoami(&self, _cx: &Context) -> Result<String, Status> {
        Ok(self.name.clone())
    }
    async fn slow(&self, _cx: &Context, ms: u64) -> Result<String, Status> {
        self.active.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(ms + self.extra_delay_ms)).await;
        self.active.fetch_sub(1, Ordering::SeqCst);
        Ok(self.name.clone())
    }
}

/// A running test server.
pub struct TestServer {
    pub name: String,
    pub addr: String,
    pub imp: Arc<WhereImpl>,
    pub handle: Option<ServerHandle>,
}

/// A builder for a `Where` server named `name` on `addr` (`127.0.0.1:0` for any port).
pub fn where_server(name: &str, addr: &str) -> (ServerBuilder, Arc<WhereImpl>) {
    where_server_with(
        WhereImpl {
            name: name.to_owned(),
            ..WhereImpl::default()
        },
        addr,
    )
}

/// A builder for a `Where` server with the given implementation.
pub fn where_server_with(imp: WhereImpl, addr: &str) -> (ServerBuilder, Arc<WhereImpl>) {
    let imp = Arc::new(imp);
    let builder = Server::builder()
        .addr(addr)
        .dispatch(Dispatch::Direct)
        .service(WhereServer::new(imp.clone()));
    (builder, imp)
}

/// Starts `builder` (retrying a busy port for a while: a restarted server
/// reuses the address of one that has just been dropped).
pub async fn start_on(
    name: &str,
    addr: &str,
    configure: impl Fn(ServerBuilder) -> ServerBuilder,
) -> TestServer {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (builder, imp) = where_server(name, addr);
        match configure(builder).start().await {
            Ok(handle) => {
                return TestServer {
                    name: name.to_owned(),
                    addr: handle.local_addr().to_string(),
                    imp,
                    handle: Some(handle),
                }
            }
            Err(e) if Instant::now() < deadline && e.to_string().contains("binding") => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("server {name} does not start: {e}"),
        }
    }
}

/// Counts answers per server name.
pub fn tally(names: impl IntoIterator<Item = String>) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for n in names {
        *counts.entry(n).or_insert(0) += 1;
    }
    counts
}

/// Polls `check` every 50 ms until it holds or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A key that `client` (consistent hash) sends to the server named `owner`.
pub async fn key_owned_by(client: &WhereClient, owner: &str) -> String {
    for k in 0..10_000 {
        let key = format!("key-{k}");
        let c = client.with_options(brisk::CallOptions::default().with_hash_key(key.clone()));
        if c.whoami().await.expect("whoami") == owner {
            return key;
        }
    }
    panic!("no key maps to {owner}");
}

/// Runs a test body with a hard upper bound so nothing can hang CI.
pub async fn bounded<F: Future<Output = ()>>(secs: u64, f: F) {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .expect("test exceeded its time bound");
}
