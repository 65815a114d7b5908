//! The brisk player: the benchmark service's typed brisk client, built from the scene's brisk
//! options (connect type and connection count, write mode, serializer, body compression); the
//! server side is
//! [`crate::server`], which applies the scene's dispatch and queue.
//!
//! `percall` (seed 001's `ab` without `-k`) is brisk-only: a fresh client and connection per
//! call, closed after it.
//!
//! The streaming scenarios use brisk's stream API as a user would: `stream` the typed client's
//! `stream_items` (a [`Streaming`](::brisk::Streaming) read to its end), `pingpong`
//! [`Client::bidi`](::brisk::Client::bidi) — send one item, read its echo, repeat, then finish
//! the caller's flow and read the end. A stream gets no `request_timeout` by default (a watch
//! is meant to last), so the scene's timeout is passed as the stream's own
//! ([`CallOptions::timeout`]), which bounds the whole stream as the engine expects; the credit
//! window is brisk's default (`stream_window`, 256 items).

use std::sync::Arc;
use std::time::Duration;

use ::brisk::{
    CallOptions, Client as BriskClient, ClientConfig, Compression, CompressionConfig, Connect,
    ConnectType, Payload, SerializerKind, Status, WriteMode,
};
use bytes::Bytes;
use strum::{Display, EnumString, IntoStaticStr, VariantNames};

use super::call::{CallError, ClientSetup, ItemTally, Reply};
use crate::scenario::{Scenario, STREAM_ITEMS};
use crate::service::BenchmarkServiceClient;

/// What the suite sets for brisk.
pub const SETTINGS: &str = "the scene's connect type (fixed × the scene's connections by \
default), async write, msgpack, no body compression unless the scene's compression says (then \
bodies from 1 KiB at level 1, the server answering in kind); server: the scene's dispatch (pool \
with the transfer queue by default, direct where a preset says), I/O threads = CPUs; max_try_count 1; streams: the scene's \
timeout as each stream's deadline, default credit window (256 items each way)";

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
    /// Body compression of the requests, and of the answers the client asks for.
    pub compression: Compression,
    /// `coalesce_calls` of `fixed` connections (`None`: the client's default).
    pub coalesce_calls: Option<usize>,
}

impl Default for BriskOptions {
    fn default() -> Self {
        BriskOptions {
            connect: ConnectKind::Fixed,
            write_mode: WriteMode::Async,
            serializer: SerializerKind::MsgPack,
            compression: Compression::None,
            coalesce_calls: None,
        }
    }
}

/// The brisk client of a scene.
#[derive(Clone)]
pub enum Client {
    /// One client (and its connections) shared by every caller (behind an `Arc`: the typed
    /// client twice and the stream options are large beside a `PerCall`).
    Shared(Arc<Service>),
    /// A new client and connection per call, closed after it.
    PerCall(Arc<ClientConfig>),
}

/// The typed client, and the options its streams are opened with.
#[derive(Clone)]
pub struct Service {
    /// Unary calls (the client's `request_timeout` applies).
    unary: BenchmarkServiceClient,
    /// Streams: the same client, each stream bounded by the scene's timeout.
    streams: BenchmarkServiceClient,
    /// The streams' options (for [`BriskClient::bidi`], which takes them per call).
    stream_options: CallOptions,
}

impl Service {
    fn new(client: BriskClient) -> Service {
        let stream_options = CallOptions {
            timeout: Some(client.config().request_timeout),
            ..CallOptions::default()
        };
        let unary = BenchmarkServiceClient::new(client);
        Service {
            streams: unary.with_options(stream_options.clone()),
            unary,
            stream_options,
        }
    }
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
                Client::Shared(Arc::new(Service::new(client)))
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
            // Boxed: connecting is a large future, which would otherwise size every call's
            // future (and, through `PlayerClient`, every player's).
            Client::PerCall(config) => {
                Box::pin(call_on_new_client(config, scenario, key, payload)).await
            }
        }
    }

    /// Closes the shared client's connections.
    pub fn close(&self) {
        if let Client::Shared(svc) = self {
            svc.unary.client().close();
        }
    }
}

/// One call on a client of its own, closed after it (`percall`).
async fn call_on_new_client(
    config: &ClientConfig,
    scenario: Scenario,
    key: i64,
    payload: &Bytes,
) -> Result<Reply, CallError> {
    let client = BriskClient::builder()
        .config(config.clone())
        .build()
        .await?;
    let svc = Service::new(client.clone());
    let result = call_once(&svc, scenario, key, payload).await;
    client.close();
    result
}

async fn call_once(
    svc: &Service,
    scenario: Scenario,
    key: i64,
    payload: &Bytes,
) -> Result<Reply, CallError> {
    let unary = &svc.unary;
    Ok(match scenario {
        Scenario::Nth => unary.do_nothing().await.map(|()| Reply::Nothing)?,
        Scenario::Cache => Reply::Message(unary.get_message_from_cache(key).await?),
        Scenario::File => Reply::Message(unary.get_message_from_file(key).await?),
        Scenario::Db => Reply::Message(unary.get_message_from_db(key).await?),
        Scenario::Echo => Reply::Echo(unary.echo(Payload(payload.clone())).await?.0),
        // Boxed, as every stream: their state would size every unary call's future.
        Scenario::Stream => Box::pin(stream_items(svc, payload)).await?,
        Scenario::PingPong => Box::pin(ping_pong(svc, payload)).await?,
    })
}

/// A stream's failure as the call's error.
fn stream_error(method: &'static str) -> impl Fn(Status) -> CallError {
    move |status| {
        status
            .into_error(BenchmarkServiceClient::SERVICE, method)
            .into()
    }
}

/// `stream`: opens `stream_items` for [`STREAM_ITEMS`] copies of `payload` and reads them to
/// the end, each checked.
async fn stream_items(svc: &Service, payload: &Bytes) -> Result<Reply, CallError> {
    let failed = stream_error("stream_items");
    let mut items = svc
        .streams
        .stream_items(STREAM_ITEMS, Payload(payload.clone()))
        .await?;
    let mut tally = ItemTally::default();
    while let Some(item) = items.message().await.map_err(&failed)? {
        tally.add(&item.0, payload);
    }
    Ok(Reply::Items(tally))
}

/// `pingpong`: opens `ping_pong`, then [`STREAM_ITEMS`] times sends `payload` and reads its
/// echo before sending the next; then ends the caller's flow and reads the server's end (an
/// item after the last echo is counted, and fails the check).
async fn ping_pong(svc: &Service, payload: &Bytes) -> Result<Reply, CallError> {
    let failed = stream_error("ping_pong");
    let (mut sender, mut answers) = svc
        .unary
        .client()
        .bidi::<_, Payload, Payload>(
            BenchmarkServiceClient::SERVICE,
            "ping_pong",
            &(),
            &svc.stream_options,
        )
        .await?;
    let ping = Payload(payload.clone());
    let mut tally = ItemTally::default();
    for _ in 0..STREAM_ITEMS {
        sender.send(&ping).await.map_err(&failed)?;
        match answers.message().await.map_err(&failed)? {
            Some(pong) => tally.add(&pong.0, payload),
            None => break,
        }
    }
    sender.finish(Ok(()));
    while let Some(extra) = answers.message().await.map_err(&failed)? {
        tally.add(&extra.0, payload);
    }
    Ok(Reply::Items(tally))
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
        compression: CompressionConfig::new(options.compression),
        request_timeout: timeout,
        max_try_count: 1,
        ..ClientConfig::default()
    };
    apply_target(&mut c, addr);
    let n = connections.max(1);
    c.connect = match options.connect {
        ConnectKind::Reused => Connect::Reused,
        ConnectKind::Pooled => Connect::sized(ConnectType::Pooled, n),
        ConnectKind::Fixed => Connect::Fixed {
            connections: n,
            coalesce_calls: options
                .coalesce_calls
                .unwrap_or(Connect::DEFAULT_COALESCE_CALLS),
        },
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

#[cfg(test)]
mod tests {
    use ::brisk::{Code, DispatchConfig, PoolConfig};

    use super::super::test_support::{self, TestServer};
    use super::super::PlayerClient;
    use super::*;
    use crate::service::MAX_STREAM_ITEMS;

    const TIMEOUT: Duration = Duration::from_secs(10);

    async fn setup(tag: &str, dispatch: DispatchConfig) -> (TestServer, PlayerClient) {
        let server = test_support::start_brisk(tag, dispatch).await;
        let setup = ClientSetup {
            addr: &server.addr.to_string(),
            connections: 2,
            calls_in_flight: 2,
            timeout: TIMEOUT,
        };
        let client = Client::connect(&setup, &BriskOptions::default())
            .await
            .unwrap();
        (server, PlayerClient::Brisk(client))
    }

    /// A unary call's future holds neither a connect (`percall`) nor a stream's state: both
    /// are boxed. Every caller keeps one (an async caller eight), and `PlayerClient`'s call
    /// is as large as its largest player's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_unary_calls_future_holds_no_connect_and_no_stream() {
        let (_server, client) = setup("brisk-future-size", DispatchConfig::Direct).await;
        let PlayerClient::Brisk(brisk) = &client else {
            unreachable!("setup makes a brisk client")
        };
        let payload = Bytes::new();
        let call = brisk.call(0, Scenario::Nth, 1, &payload);
        let size = std::mem::size_of_val(&call);
        drop(call);
        // The unary path alone is about 2 KiB (2,064 bytes in a debug build: the call's send
        // is awaited in place, with its own copy of the names); with the connect it was
        // 3.4 KiB.
        assert!(size <= 2304, "brisk's call future is {size} bytes");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_scenario_answers() {
        let (_server, client) = setup("brisk-every", DispatchConfig::Direct).await;
        test_support::check_every_scenario(&client).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn streams_return_every_item_with_either_dispatch() {
        for (tag, dispatch) in [
            ("brisk-streams-direct", DispatchConfig::Direct),
            (
                "brisk-streams-pool",
                DispatchConfig::Pool(PoolConfig::default()),
            ),
        ] {
            let (_server, client) = setup(tag, dispatch).await;
            test_support::check_streams(&client).await;
            test_support::check_concurrent(&client, &Scenario::ALL).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn streams_work_with_a_connection_per_call() {
        let server = test_support::start_brisk("brisk-percall", DispatchConfig::Direct).await;
        let setup = ClientSetup {
            addr: &server.addr.to_string(),
            connections: 1,
            calls_in_flight: 1,
            timeout: TIMEOUT,
        };
        let options = BriskOptions {
            connect: ConnectKind::PerCall,
            ..BriskOptions::default()
        };
        let client = PlayerClient::Brisk(Client::connect(&setup, &options).await.unwrap());
        let payload = test_support::pattern(1024);
        for scenario in [Scenario::Stream, Scenario::PingPong] {
            test_support::call_ok(&client, 0, scenario, 1, &payload).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_over_the_limit_is_invalid_argument() {
        let server = test_support::start_brisk("brisk-limit", DispatchConfig::Direct).await;
        let client = BriskClient::builder()
            .addr(server.addr.to_string())
            .build()
            .await
            .unwrap();
        let svc = BenchmarkServiceClient::new(client);
        let mut items = svc
            .stream_items(MAX_STREAM_ITEMS + 1, Payload(Bytes::new()))
            .await
            .unwrap();
        let status = items.message().await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status}");
    }

    /// A server stream whose credit window holds more than the server's outbox (256 items of
    /// 100 KiB, over 4 × `max_batch_bytes`) is written out whole: this suite's 100 KiB stream
    /// found brisk's server stalling here (frames left in its streams' backlog; fixed on main
    /// in b5a215e).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_of_large_items_is_not_stalled() {
        let (_server, client) = setup("brisk-large-stream", DispatchConfig::Direct).await;
        let payload = test_support::pattern(100 * 1024);
        test_support::call_ok(&client, 0, Scenario::Stream, 1, &payload).await;
    }

    #[test]
    fn a_short_or_wrong_stream_fails_the_check() {
        let payload = Bytes::from_static(b"abc");
        let mut tally = ItemTally::default();
        for _ in 0..STREAM_ITEMS - 1 {
            tally.add(b"abc", &payload);
        }
        let short = Reply::Items(tally).check(Scenario::Stream, 1, &payload);
        assert!(short.unwrap_err().0.contains("99 items, not 100"));
        tally.add(b"ab", &payload);
        let wrong = Reply::Items(tally).check(Scenario::PingPong, 1, &payload);
        let e = wrong.unwrap_err();
        assert!(e.0.contains("1 of 100 items") && e.0.contains("2 B"), "{e}");
        let mut good = ItemTally::default();
        for _ in 0..STREAM_ITEMS {
            good.add(b"abc", &payload);
        }
        Reply::Items(good)
            .check(Scenario::Stream, 1, &payload)
            .unwrap();
        assert!(Reply::Items(good)
            .check(Scenario::Echo, 1, &payload)
            .is_err());
    }
}
