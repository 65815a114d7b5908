//! The volo player: the benchmark service over volo-thrift (CloudWeGo's Thrift RPC), both
//! halves — [`serve`], the server run in the runner's child process, and [`Client`], the
//! client the load engine drives.
//!
//! The service is written the way a volo user writes one: an IDL,
//! `thrift/benchmark.thrift`, compiled at build time by `build.rs` through volo-build (pilota,
//! a pure-Rust Thrift compiler, so no external tool), and included here as the private module
//! `gen`. The IDL mirrors [`crate::service::BenchmarkService`] method for method and
//! [`Message`] field for field; the handlers call the very store code brisk's service calls
//! (`store.cache.get`, `store.file.get`, `store.db.get`), so a scene compares the frameworks and
//! nothing else. A store error reaches the client as the IDL's `StoreFailure` exception — a
//! declared Thrift exception rather than an application error, as a Thrift user would model a
//! lookup that can fail — and the client turns it into a [`CallError`].
//!
//! Both halves use volo's documented defaults — TTHeader + framed + binary protocol — on one of
//! volo-thrift's two transports, the scene's [`Transport`] (`--volo-transport pool,mux`, preset
//! key `volo_transports`; one volo server per value, as brisk gets one per dispatch), so that
//! volo appears in the reports as `volo (pool)` and `volo (mux)`. The only other setting the
//! suite applies is the per-call timeout (`rpc_timeout`).
//!
//! - **`pool`** (the default, what a volo user gets): the ping-pong transport, one call in
//!   flight per connection, from volo's connection pool. The scene's connection count does not
//!   map: the pool opens a connection per call in flight and keeps them idle for reuse
//!   (`max_idle_per_key`, default 10240). Capping the idle ones at the scene's count would make
//!   every call beyond it dial and close a connection — a penalty no volo user configures — so
//!   the pool keeps its default.
//! - **`mux`**: the multiplexed transport (many calls in flight on one connection, matched to
//!   their replies by sequence id, brisk's `fixed` shape), behind volo-thrift's `multiplex`
//!   cargo feature and switched on with `ClientBuilder::multiplex(true)` and
//!   `Server::multiplex(true)` — both `#[doc(hidden)]` in volo-thrift 0.12, the server's marked
//!   "not recommended for most users". The suite switches both ends: a `mux` scene's server is
//!   a multiplexed volo server (each request it reads spawned as its own task, the replies sent
//!   by one writer task per connection as they complete), where the ping-pong server reads,
//!   handles and answers one request at a time per connection. What volo-thrift 0.12.7's
//!   source shows about the client's connections: the multiplexed client goes through the same
//!   pool as the ping-pong one (`TransportAcquirer` → `Pool::get` with `Ver::Multiplex`), but a
//!   multiplexed connection is *shared*: the pool keeps one per address, hands every call a
//!   clone of it, lets only one dial per address run at a time (`Pool::connecting`; the other
//!   calls wait for it), and dials a new one only when that one is broken or has not been used
//!   for longer than the pool's idle timeout (15 s). There is no connection-count setting: one
//!   client, one connection per server address. The pool belongs to the client built by `ClientBuilder::build`, so the
//!   scene's connection count maps the way tarpc's and tonic's does: [`Client::connect`]
//!   builds that many multiplexed clients (each with its own pool, hence its own connection),
//!   dials each up front, and caller *i* uses client *i* mod the count.
//!
//! The `multiplex` feature also turns the client's inner transport into an enum of the two
//! (`motore::utils::Either`), one match per call on the ping-pong path too; nothing else of
//! `pool` changes.
//!
//! One thing this module cannot keep from panicking: the generated client methods end in
//! `unreachable!()` for a reply that names another method of the service than the one called
//! (volo decodes a reply by the method name it carries, after checking only its sequence id).
//! Our own server never sends one; the generated client is kept as a volo user gets it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strum::{Display, EnumString, IntoStaticStr, VariantNames};
use volo_thrift::MaybeException;

use super::call::{CallError, Reply};
use crate::scenario::Scenario;
use crate::store::{Message, MessageStore, StoreError};

/// The code volo-build generated from `thrift/benchmark.thrift` (see `build.rs`). Generated
/// code is not ours to lint or document, hence the blanket allows.
#[allow(
    warnings,
    clippy::all,
    clippy::pedantic,
    missing_docs,
    rustdoc::all,
    unreachable_pub
)]
mod gen {
    include!(concat!(env!("OUT_DIR"), "/volo_gen.rs"));
    pub use self::volo_gen::benchmark::*;
}

/// What the suite sets for volo, on either transport (see [`Transport::settings`]).
pub const SETTINGS: &str = "volo-thrift defaults (TTHeader + framed binary) with rpc_timeout = \
the scene's timeout, on the scene's transport: pool = the default pingpong pooled transport (one \
call in flight per connection, so as many connections as calls in flight, kept idle for reuse; \
the scene's connections do not apply), mux = the multiplexed transport on client and server \
(feature `multiplex`; one shared connection per client, the scene's connections as that many \
clients)";

/// What the suite sets for volo's `pool` transport.
pub const POOL_SETTINGS: &str = "volo-thrift defaults (TTHeader + framed binary, pingpong pooled \
transport: one call in flight per connection, so as many connections as calls in flight, kept \
idle for reuse) with rpc_timeout = the scene's timeout; volo has no connection-count setting \
(the scene's connections do not apply)";

/// What the suite sets for volo's `mux` transport.
pub const MUX_SETTINGS: &str = "volo-thrift multiplexed transport on client and server \
(ClientBuilder::multiplex(true), Server::multiplex(true); TTHeader + framed binary) with \
rpc_timeout = the scene's timeout; a client keeps one shared connection per server, so the \
scene's connections are that many clients, caller i on client i mod connections";

/// The most connections [`Client::connect`] dials up front.
pub const MAX_PREDIAL: usize = 1024;

/// The service name the client reports to the server (volo's `callee_name`).
const SERVICE_NAME: &str = "benchmark";

/// volo-thrift's transport, on both the client and the server of a scene.
///
/// Names: `pool` (or `pooled`, `pingpong`), `mux` (or `multiplex`), in any ASCII case.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Display,
    EnumString,
    IntoStaticStr,
    VariantNames,
)]
#[strum(
    serialize_all = "lowercase",
    ascii_case_insensitive,
    parse_err_ty = String,
    parse_err_fn = unknown_transport
)]
pub enum Transport {
    /// volo's default: the pingpong transport (one call in flight per connection) from its
    /// connection pool.
    #[default]
    #[strum(to_string = "pool", serialize = "pooled", serialize = "pingpong")]
    Pool,
    /// The multiplexed transport: many calls in flight on one shared connection.
    #[strum(to_string = "mux", serialize = "multiplex")]
    Mux,
}

fn unknown_transport(s: &str) -> String {
    crate::names::unknown::<Transport>("volo transport", s)
}

impl Transport {
    /// Both transports, the default first.
    pub const ALL: [Transport; 2] = [Transport::Pool, Transport::Mux];

    /// The name on the command line, in the results (`volo_transport`) and in the labels
    /// (`volo (mux)`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// What the suite sets for volo on this transport.
    pub fn settings(self) -> &'static str {
        match self {
            Transport::Pool => POOL_SETTINGS,
            Transport::Mux => MUX_SETTINGS,
        }
    }
}

/// A volo-thrift client of the benchmark service, shared (cloned) by every caller of a scene.
#[derive(Clone)]
pub struct Client {
    inner: Inner,
}

/// The volo clients of a [`Client`], by transport.
#[derive(Clone)]
enum Inner {
    /// One pooled volo client, whose pool hands each call an idle connection or dials a new
    /// one.
    Pool(gen::BenchmarkServiceClient),
    /// The scene's connection count of multiplexed volo clients (at least one), one shared
    /// connection each; caller *i* uses client *i* mod their count.
    Mux(Arc<[gen::BenchmarkServiceClient]>),
}

impl Client {
    /// Builds the volo client of `transport` for `addr`, with `rpc_timeout` = `timeout`, and
    /// connects it before the scene's first call, as the other players connect theirs.
    ///
    /// - `pool`: one client with volo's default pooled transport. One `do_nothing` call first,
    ///   so that an unreachable server fails here and not on every call (volo connects
    ///   lazily); then `calls_in_flight` concurrent `do_nothing` calls (at most
    ///   [`MAX_PREDIAL`]) make the pool dial one connection per call the scene keeps in flight.
    ///   Without this the scene's first calls pay for the dials, and volo-thrift 0.12's pool
    ///   can fail a call while many are being dialled at once (a waiter token reused after its
    ///   list was dropped); a failed call of this fill is only a connection not made yet, so it
    ///   is not an error of `connect`.
    /// - `mux`: `connections` (at least 1, at most [`MAX_PREDIAL`]) multiplexed clients, each
    ///   dialling its one connection with a `do_nothing` call, all at once; any failure is an
    ///   error of `connect`.
    pub async fn connect(
        addr: SocketAddr,
        transport: Transport,
        connections: usize,
        calls_in_flight: usize,
        timeout: Duration,
    ) -> Result<Client, CallError> {
        let unreachable = |e: volo_thrift::ClientError| {
            CallError::new(format!("volo: cannot reach the server at {addr}: {e}"))
        };
        match transport {
            Transport::Pool => {
                let client = build(addr, timeout, false);
                client.do_nothing().await.map_err(unreachable)?;
                let fill = calls_in_flight.clamp(1, MAX_PREDIAL);
                futures::future::join_all((0..fill).map(|_| client.do_nothing())).await;
                Ok(Client {
                    inner: Inner::Pool(client),
                })
            }
            Transport::Mux => {
                let clients: Vec<gen::BenchmarkServiceClient> = (0..connections
                    .clamp(1, MAX_PREDIAL))
                    .map(|_| build(addr, timeout, true))
                    .collect();
                let dialled =
                    futures::future::join_all(clients.iter().map(|c| c.do_nothing())).await;
                dialled
                    .into_iter()
                    .collect::<Result<Vec<()>, _>>()
                    .map_err(unreachable)?;
                Ok(Client {
                    inner: Inner::Mux(clients.into()),
                })
            }
        }
    }

    /// The transport this client uses.
    pub fn transport(&self) -> Transport {
        match self.inner {
            Inner::Pool(_) => Transport::Pool,
            Inner::Mux(_) => Transport::Mux,
        }
    }

    /// The volo client `caller` uses: the pooled one, or multiplexed client `caller` mod their
    /// count.
    fn pick(&self, caller: usize) -> Result<&gen::BenchmarkServiceClient, CallError> {
        match &self.inner {
            Inner::Pool(c) => Ok(c),
            // `connect` builds at least one, so this never fails.
            Inner::Mux(clients) => clients
                .get(caller % clients.len().max(1))
                .ok_or_else(|| CallError::new("volo: no multiplexed client")),
        }
    }

    /// Makes one call of `scenario` as `caller` (with `mux`, the caller's client; with `pool`,
    /// volo's pool picks the connection) and returns what came back; a store failure on the
    /// server is an `Err`.
    pub async fn call(
        &self,
        caller: usize,
        scenario: Scenario,
        key: i64,
        payload: &Bytes,
    ) -> Result<Reply, CallError> {
        let c = self.pick(caller)?;
        Ok(match scenario {
            Scenario::Nth => {
                c.do_nothing().await.map_err(client_error)?;
                Reply::Nothing
            }
            Scenario::Cache => {
                let got = c.get_message_from_cache(key).await.map_err(client_error)?;
                Reply::Message(match got {
                    MaybeException::Ok(m) => from_wire(m),
                    MaybeException::Exception(
                        gen::BenchmarkServiceGetMessageFromCacheException::Failure(f),
                    ) => return Err(store_failure(&f)),
                })
            }
            Scenario::File => {
                let got = c.get_message_from_file(key).await.map_err(client_error)?;
                Reply::Message(match got {
                    MaybeException::Ok(m) => from_wire(m),
                    MaybeException::Exception(
                        gen::BenchmarkServiceGetMessageFromFileException::Failure(f),
                    ) => return Err(store_failure(&f)),
                })
            }
            Scenario::Db => {
                let got = c.get_message_from_db(key).await.map_err(client_error)?;
                Reply::Message(match got {
                    MaybeException::Ok(m) => from_wire(m),
                    MaybeException::Exception(
                        gen::BenchmarkServiceGetMessageFromDbException::Failure(f),
                    ) => return Err(store_failure(&f)),
                })
            }
            Scenario::Echo => Reply::Echo(c.echo(payload.clone()).await.map_err(client_error)?),
            Scenario::Stream | Scenario::PingPong => {
                return Err(CallError::new(format!(
                    "volo-thrift has no streaming calls: {scenario} is brisk's and tonic's"
                )))
            }
        })
    }
}

/// One volo client of `addr` with `rpc_timeout` = `timeout`, multiplexed or pooled (volo
/// connects lazily: nothing is dialled here).
fn build(addr: SocketAddr, timeout: Duration, multiplex: bool) -> gen::BenchmarkServiceClient {
    gen::BenchmarkServiceClientBuilder::new(SERVICE_NAME)
        .address(addr)
        .rpc_timeout(Some(timeout))
        .multiplex(multiplex)
        .build()
}

fn client_error(e: volo_thrift::ClientError) -> CallError {
    CallError::new(format!("volo: {e}"))
}

fn store_failure(f: &gen::StoreFailure) -> CallError {
    CallError::new(format!("volo: the server's store failed: {}", f.message))
}

/// The generated record back into the store's.
fn from_wire(m: gen::Message) -> Message {
    Message {
        id: m.id,
        from_uid: m.from_uid,
        to_uid: m.to_uid,
        content: String::from(m.content),
    }
}

/// The store's record as the generated one.
fn to_wire(m: Message) -> gen::Message {
    gen::Message {
        id: m.id,
        from_uid: m.from_uid,
        to_uid: m.to_uid,
        content: m.content.into(),
    }
}

fn to_failure(e: &StoreError) -> gen::StoreFailure {
    gen::StoreFailure {
        message: e.to_string().into(),
        not_found: e.is_not_found(),
    }
}

/// The handlers: the same store calls as [`crate::service::BenchmarkServiceImpl`].
struct Handler {
    store: MessageStore,
}

impl gen::BenchmarkService for Handler {
    async fn do_nothing(&self) -> Result<(), volo_thrift::ServerError> {
        Ok(())
    }

    async fn get_message_from_cache(
        &self,
        id: i64,
    ) -> Result<
        MaybeException<gen::Message, gen::BenchmarkServiceGetMessageFromCacheException>,
        volo_thrift::ServerError,
    > {
        Ok(match self.store.cache.get(id) {
            Ok(m) => MaybeException::Ok(to_wire(m)),
            Err(e) => MaybeException::Exception(
                gen::BenchmarkServiceGetMessageFromCacheException::Failure(to_failure(&e)),
            ),
        })
    }

    async fn get_message_from_file(
        &self,
        id: i64,
    ) -> Result<
        MaybeException<gen::Message, gen::BenchmarkServiceGetMessageFromFileException>,
        volo_thrift::ServerError,
    > {
        Ok(match self.store.file.get(id) {
            Ok(m) => MaybeException::Ok(to_wire(m)),
            Err(e) => MaybeException::Exception(
                gen::BenchmarkServiceGetMessageFromFileException::Failure(to_failure(&e)),
            ),
        })
    }

    async fn get_message_from_db(
        &self,
        id: i64,
    ) -> Result<
        MaybeException<gen::Message, gen::BenchmarkServiceGetMessageFromDbException>,
        volo_thrift::ServerError,
    > {
        Ok(match self.store.db.get(id).await {
            Ok(m) => MaybeException::Ok(to_wire(m)),
            Err(e) => MaybeException::Exception(
                gen::BenchmarkServiceGetMessageFromDbException::Failure(to_failure(&e)),
            ),
        })
    }

    async fn echo(&self, data: Bytes) -> Result<Bytes, volo_thrift::ServerError> {
        Ok(data)
    }
}

/// Serves volo's benchmark service on `listener`, the very socket the caller bound (it becomes
/// volo's `DefaultIncoming`, so the printed address is the one served), with volo's default
/// server on `transport` (`mux`: `Server::multiplex(true)`, every request read spawned as its
/// own task and answered as it completes; `pool`: volo's default ping-pong server, one request
/// at a time per connection). Runs until the process ends — or, since volo's server installs
/// handlers for SIGINT, SIGTERM and SIGHUP, until one of those arrives, when it drains its
/// connections (volo's graceful shutdown, up to 30 s) and returns `Ok`. An accept error ends it
/// with `Err`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: MessageStore,
    transport: Transport,
) -> std::io::Result<()> {
    let incoming = volo::net::incoming::DefaultIncoming::from(listener);
    gen::BenchmarkServiceServer::new(Handler { store })
        .multiplex(transport == Transport::Mux)
        .run(incoming)
        .await
        .map_err(|e| std::io::Error::other(format!("volo server ({transport}): {e}")))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{self, TestServer};
    use super::super::PlayerClient;
    use super::*;
    use crate::store::{MAX_ID, MIN_ID};

    const TIMEOUT: Duration = Duration::from_secs(10);

    /// A volo server on `transport` and a client of the same transport with `connections`
    /// (used by `mux`) and `calls_in_flight` (used by `pool`).
    async fn setup(
        tag: &str,
        transport: Transport,
        connections: usize,
        calls_in_flight: usize,
    ) -> (TestServer, Client) {
        let server = test_support::start(tag, move |listener, store| {
            serve(listener, store, transport)
        })
        .await;
        let client = Client::connect(
            server.addr,
            transport,
            connections,
            calls_in_flight,
            TIMEOUT,
        )
        .await
        .unwrap();
        assert_eq!(client.transport(), transport);
        (server, client)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_scenario_answers_correctly() {
        let (_server, client) = setup("volo-every", Transport::Pool, 1, 2).await;
        test_support::check_every_scenario(&PlayerClient::Volo(client)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_scenario_answers_correctly_multiplexed() {
        let (_server, client) = setup("volo-mux-every", Transport::Mux, 2, 2).await;
        test_support::check_every_scenario(&PlayerClient::Volo(client)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unknown_id_is_an_error_and_the_client_still_works() {
        for (tag, transport) in [
            ("volo-unknown", Transport::Pool),
            ("volo-mux-unknown", Transport::Mux),
        ] {
            let (_server, client) = setup(tag, transport, 2, 1).await;
            test_support::check_unknown_id(&PlayerClient::Volo(client)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn streaming_scenarios_are_refused() {
        for (tag, transport) in [
            ("volo-streams", Transport::Pool),
            ("volo-mux-streams", Transport::Mux),
        ] {
            let (_server, client) = setup(tag, transport, 1, 1).await;
            test_support::check_no_streams(&PlayerClient::Volo(client)).await;
        }
    }

    /// volo-thrift 0.12's own pool failure while it dials several connections at once (see
    /// [`Client::connect`]): the one error these tests accept, from volo, now and then.
    const POOL_RACE: &str = "wait a idle connection error";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_share_one_client() {
        let (_server, client) = setup("volo-concurrent", Transport::Pool, 1, 50).await;
        let tasks: Vec<_> = (0..50usize)
            .map(|caller| {
                let client = client.clone();
                tokio::spawn(async move {
                    let payload = Bytes::from(vec![caller as u8; 64 + caller]);
                    let mut pool_races = 0;
                    for i in 0..20usize {
                        let scenario = Scenario::UNARY[(caller + i) % Scenario::UNARY.len()];
                        let key = ((caller + i) % 10 + 1) as i64;
                        let reply = match client.call(caller, scenario, key, &payload).await {
                            Ok(reply) => reply,
                            Err(e) if e.0.contains(POOL_RACE) => {
                                pool_races += 1;
                                continue;
                            }
                            Err(e) => panic!("{scenario}: {e}"),
                        };
                        reply.check(scenario, key, &payload).unwrap();
                        match reply {
                            Reply::Message(m) => assert_eq!(m, Message::seed(key)),
                            Reply::Echo(back) => assert_eq!(back, payload),
                            Reply::Nothing => {}
                            other => panic!("{scenario} answered {other:?}"),
                        }
                    }
                    pool_races
                })
            })
            .collect();
        let mut pool_races = 0;
        for t in tasks {
            pool_races += t.await.unwrap();
        }
        // Every other call answered correctly; the pool's failures stay rare.
        assert!(
            pool_races <= 10,
            "{pool_races} of 1000 calls hit volo's pool race"
        );
    }

    /// Established TCP sockets of this process connected to `server` (IPv4): the
    /// connections the clients of this process hold to it. From `/proc/net/tcp` (the
    /// remote address is the third field, `st` 01 is ESTABLISHED, the inode the tenth),
    /// kept to the sockets among this process's open files: the table is the whole
    /// network namespace's, where other processes (a parallel build's tests) may hold
    /// connections to a listener on the same port at another address.
    #[cfg(target_os = "linux")]
    fn connections_to(server: std::net::SocketAddr) -> usize {
        let std::net::SocketAddr::V4(server) = server else {
            panic!("an IPv4 test server: {server}");
        };
        let remote = format!(
            "{:08X}:{:04X}",
            u32::from_le_bytes(server.ip().octets()),
            server.port()
        );
        let ours: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
            .filter_map(|target| {
                let target = target.to_string_lossy();
                Some(
                    target
                        .strip_prefix("socket:[")?
                        .strip_suffix(']')?
                        .to_owned(),
                )
            })
            .collect();
        let text = std::fs::read_to_string("/proc/net/tcp").unwrap();
        text.lines()
            .skip(1)
            .filter(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                fields.get(2) == Some(&remote.as_str())
                    && fields.get(3) == Some(&"01")
                    && fields.get(9).is_some_and(|inode| ours.contains(*inode))
            })
            .count()
    }

    /// `mux` over real loopback connections: 50 concurrent callers, every scenario, every call
    /// answered correctly (no pool failure is tolerated here: the multiplexed client dials one
    /// connection per client, up front) — and the calls share exactly the scene's 3
    /// connections, caller *i* on client *i* mod 3.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn multiplexed_callers_share_the_scenes_connections() {
        let (server, client) = setup("volo-mux-concurrent", Transport::Mux, 3, 50).await;
        let client = PlayerClient::Volo(client);
        #[cfg(target_os = "linux")]
        assert_eq!(connections_to(server.addr), 3, "dialled up front");
        test_support::check_concurrent(&client, &Scenario::UNARY).await;
        #[cfg(target_os = "linux")]
        assert_eq!(
            connections_to(server.addr),
            3,
            "50 callers multiplexed on 3 connections"
        );
        drop(server);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connect_fails_without_a_server() {
        for transport in Transport::ALL {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            drop(listener);
            let err = Client::connect(addr, transport, 2, 1, Duration::from_secs(2))
                .await
                .err()
                .unwrap();
            assert!(err.0.contains("cannot reach"), "{transport}: {err}");
        }
    }

    #[test]
    fn transports_parse_by_name_and_alias() {
        for (text, transport) in [
            ("pool", Transport::Pool),
            ("Pooled", Transport::Pool),
            ("pingpong", Transport::Pool),
            ("mux", Transport::Mux),
            ("MULTIPLEX", Transport::Mux),
        ] {
            assert_eq!(text.parse::<Transport>(), Ok(transport), "{text}");
        }
        assert_eq!(Transport::default(), Transport::Pool);
        assert_eq!(Transport::Mux.name(), "mux");
        let err = "grpc".parse::<Transport>().unwrap_err();
        assert!(err.contains("pool") && err.contains("mux"), "{err}");
    }

    #[test]
    fn records_survive_the_wire_types() {
        for id in MIN_ID..=MAX_ID {
            assert_eq!(from_wire(to_wire(Message::seed(id))), Message::seed(id));
        }
        let f = to_failure(&StoreError::NotFound(11));
        assert!(f.not_found && f.message.contains("11"));
    }
}
