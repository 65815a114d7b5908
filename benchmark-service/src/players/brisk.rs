//! The brisk player: the benchmark service's typed brisk client, built from the scene's brisk
//! options (connect type and connection count, write mode, serializer); the server side is
//! [`crate::server`], which applies the scene's dispatch and queue.
//!
//! `percall` (seed 001's `ab` without `-k`) is brisk-only: a fresh client and connection per
//! call, closed after it.

use std::sync::Arc;
use std::time::Duration;

use ::brisk::{
    Client as BriskClient, ClientConfig, Connect, ConnectType, SerializerKind, WriteMode,
};
use bytes::Bytes;
use strum::{Display, EnumString, IntoStaticStr, VariantNames};

use super::call::{CallError, ClientSetup, Reply};
use crate::scenario::Scenario;
use crate::service::BenchmarkServiceClient;

/// What the suite sets for brisk.
pub const SETTINGS: &str = "the scene's connect type (fixed × the scene's connections by \
default), async write, msgpack; server: the scene's dispatch (pool with the transfer queue by \
default, direct where a preset says), I/O threads = CPUs; max_try_count 1";

/// How the client holds its connections: brisk's three connect types plus
/// `percall`, a new connection for every call (the `ab` without `-k` case of seed 001).
///
/// Names: `reused` (or `single`), `pooled` (or `pool`), `fixed`, `percall` (or `per-call`,
/// `short`), in any ASCII case.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Display, EnumString, IntoStaticStr, VariantNames,
)]
#[strum(
    serialize_all = "lowercase",
    ascii_case_insensitive,
    parse_err_ty = String,
    parse_err_fn = unknown_connect_kind
)]
pub enum ConnectKind {
    /// One shared connection per address.
    #[strum(to_string = "reused", serialize = "single")]
    Reused,
    /// An elastic pool of up to `connections`.
    #[strum(to_string = "pooled", serialize = "pool")]
    Pooled,
    /// `connections` multiplexed connections, round-robin (calls made together share a write).
    Fixed,
    /// A fresh client and connection for each call, closed after it.
    #[strum(to_string = "percall", serialize = "per-call", serialize = "short")]
    PerCall,
}

fn unknown_connect_kind(s: &str) -> String {
    crate::names::unknown::<ConnectKind>("connect type", s)
}

impl ConnectKind {
    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether the `connections` dimension means anything for this kind.
    pub fn uses_connection_count(self) -> bool {
        matches!(self, ConnectKind::Pooled | ConnectKind::Fixed)
    }
}

/// brisk's client options of a scene.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BriskOptions {
    /// Connect type.
    pub connect: ConnectKind,
    /// Write mode.
    pub write_mode: WriteMode,
    /// Serializer.
    pub serializer: SerializerKind,
}

impl Default for BriskOptions {
    fn default() -> Self {
        BriskOptions {
            connect: ConnectKind::Fixed,
            write_mode: WriteMode::Async,
            serializer: SerializerKind::MsgPack,
        }
    }
}

/// The brisk client of a scene.
#[derive(Clone)]
pub enum Client {
    /// One client (and its connections) shared by every caller.
    Shared(BenchmarkServiceClient),
    /// A new client and connection per call, closed after it.
    PerCall(Arc<ClientConfig>),
}

impl Client {
    /// Builds the client the scene asks for (a `percall` scene connects per call instead).
    pub async fn connect(
        setup: &ClientSetup<'_>,
        options: &BriskOptions,
    ) -> Result<Client, CallError> {
        let config = client_config(options, setup.connections(), setup.addr, setup.timeout);
        Ok(match options.connect {
            ConnectKind::PerCall => Client::PerCall(Arc::new(config)),
            _ => {
                let client = BriskClient::builder().config(config).build().await?;
                Client::Shared(BenchmarkServiceClient::new(client))
            }
        })
    }

    /// One call.
    pub async fn call(
        &self,
        _caller: usize,
        scenario: Scenario,
        key: i64,
        payload: &Bytes,
    ) -> Result<Reply, CallError> {
        match self {
            Client::Shared(svc) => call_once(svc, scenario, key, payload).await,
            Client::PerCall(config) => {
                let client = BriskClient::builder()
                    .config((**config).clone())
                    .build()
                    .await?;
                let svc = BenchmarkServiceClient::new(client.clone());
                let result = call_once(&svc, scenario, key, payload).await;
                client.close();
                result
            }
        }
    }

    /// Closes the shared client's connections.
    pub fn close(&self) {
        if let Client::Shared(svc) = self {
            svc.client().close();
        }
    }
}

async fn call_once(
    svc: &BenchmarkServiceClient,
    scenario: Scenario,
    key: i64,
    payload: &Bytes,
) -> Result<Reply, CallError> {
    Ok(match scenario {
        Scenario::Nth => svc.do_nothing().await.map(|()| Reply::Nothing)?,
        Scenario::Cache => Reply::Message(svc.get_message_from_cache(key).await?),
        Scenario::File => Reply::Message(svc.get_message_from_file(key).await?),
        Scenario::Db => Reply::Message(svc.get_message_from_db(key).await?),
        Scenario::Echo => Reply::Echo(svc.echo(::brisk::Payload(payload.clone())).await?.0),
    })
}

/// The target string of servers found in a registry: the registry URL with the balancer
/// as its fragment, `etcd://127.0.0.1:2379#round_robin` (what `--registry` and `--balancer`
/// make; [`client_config`] and [`probe`] understand it wherever a `host:port` goes).
pub fn registry_target(url: &str, balancer: ::brisk::client::Balancer) -> String {
    format!("{url}#{balancer}")
}

/// Points `config` at `target`: a `host:port`, or a [`registry_target`] — then the client
/// discovers every `BenchmarkService` server in the registry and spreads calls over them.
pub fn apply_target(config: &mut ClientConfig, target: &str) {
    if !target.contains("://") {
        config.addr = target.to_owned();
        return;
    }
    let (url, balancer) = match target.rsplit_once('#') {
        Some((url, balancer)) => (url, balancer.parse().ok()),
        None => (target, None),
    };
    config.registry = Some(url.to_owned());
    config.service = Some(BenchmarkServiceClient::SERVICE.to_owned());
    if let Some(balancer) = balancer {
        config.balancer = balancer;
    }
}

/// The client configuration of a scene (jkrpc's benchmark used `maxTryCount` 1).
pub fn client_config(
    options: &BriskOptions,
    connections: usize,
    addr: &str,
    timeout: Duration,
) -> ClientConfig {
    let mut c = ClientConfig {
        write_mode: options.write_mode,
        serializer: options.serializer,
        request_timeout: timeout,
        max_try_count: 1,
        ..ClientConfig::default()
    };
    apply_target(&mut c, addr);
    let n = connections.max(1);
    c.connect = match options.connect {
        ConnectKind::Reused => Connect::Reused,
        ConnectKind::Pooled => Connect::sized(ConnectType::Pooled, n),
        ConnectKind::Fixed => Connect::fixed(n),
        ConnectKind::PerCall => Connect::fixed(1),
    };
    c
}

/// Builds a client and makes one `do_nothing` call: the check that a brisk server is reachable
/// before a run starts.
pub async fn probe(addr: &str, timeout: Duration) -> Result<(), ::brisk::RpcError> {
    let mut config = ClientConfig {
        connect: Connect::fixed(1),
        request_timeout: timeout,
        max_try_count: 1,
        ..ClientConfig::default()
    };
    apply_target(&mut config, addr);
    let client = BriskClient::builder().config(config).build().await?;
    let result = BenchmarkServiceClient::new(client.clone())
        .do_nothing()
        .await;
    client.close();
    result
}
