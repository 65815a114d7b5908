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
//! Both halves use volo's documented defaults: TTHeader + framed + binary protocol, the
//! pingpong (one call in flight per connection) pooled transport on the client. The only
//! setting the suite applies is the per-call timeout (`rpc_timeout`). The scene's connection
//! count does not map: volo's pool opens a connection per call in flight and keeps them idle
//! for reuse (`max_idle_per_key`, default 10240). Capping the idle ones at the scene's count
//! would make every call beyond it dial and close a connection — a penalty no volo user
//! configures — so the pool keeps its default (see [`SETTINGS`]).
//!
//! One thing this module cannot keep from panicking: the generated client methods end in
//! `unreachable!()` for a reply that names another method of the service than the one called
//! (volo decodes a reply by the method name it carries, after checking only its sequence id).
//! Our own server never sends one; the generated client is kept as a volo user gets it.
//!
//! Not done here (for later, not a second player): volo-thrift also has a multiplexed client
//! and server transport (many calls in flight on one connection, brisk's `fixed` shape) behind
//! its `multiplex` cargo feature, switched on with `ClientBuilder::multiplex(true)` and
//! `Server::multiplex(true)` — both hidden from volo's docs, the server's marked "not recommended
//! for most users".

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
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

/// What the suite sets for volo.
pub const SETTINGS: &str = "volo-thrift defaults (TTHeader + framed binary, pingpong pooled \
transport: one call in flight per connection, so as many connections as calls in flight, kept \
idle for reuse) with rpc_timeout = the scene's timeout; volo has no connection-count setting \
(the scene's connections do not apply)";

/// The most connections [`Client::connect`] dials up front.
pub const MAX_PREDIAL: usize = 1024;

/// The service name the client reports to the server (volo's `callee_name`).
const SERVICE_NAME: &str = "benchmark";

/// A volo-thrift client of the benchmark service, shared (cloned) by every caller of a scene:
/// one pooled volo client, whose pool hands each call an idle connection or dials a new one.
#[derive(Clone)]
pub struct Client {
    inner: gen::BenchmarkServiceClient,
}

impl Client {
    /// Builds a volo client for `addr` with volo's default pooled transport and `rpc_timeout` =
    /// `timeout`, then makes one `do_nothing` call, so that an unreachable server fails here
    /// and not on every call (volo connects lazily).
    ///
    /// Then it fills the pool: `calls_in_flight` concurrent `do_nothing` calls (at most
    /// [`MAX_PREDIAL`]) make it dial one connection per call the scene keeps in flight, as the
    /// other players connect theirs before the first call. Without this the scene's first calls
    /// pay for the dials, and volo-thrift 0.12's pool can fail a call while many are being
    /// dialled at once (a waiter token reused after its list was dropped); a failed call of
    /// this fill is only a connection not made yet, so it is not an error of `connect`.
    pub async fn connect(
        addr: SocketAddr,
        calls_in_flight: usize,
        timeout: Duration,
    ) -> Result<Client, CallError> {
        let inner = gen::BenchmarkServiceClientBuilder::new(SERVICE_NAME)
            .address(addr)
            .rpc_timeout(Some(timeout))
            .build();
        let client = Client { inner };
        client
            .inner
            .do_nothing()
            .await
            .map_err(|e| CallError::new(format!("volo: cannot reach the server at {addr}: {e}")))?;
        let fill = calls_in_flight.clamp(1, MAX_PREDIAL);
        futures::future::join_all((0..fill).map(|_| client.inner.do_nothing())).await;
        Ok(client)
    }

    /// Makes one call of `scenario` (`caller` is not used: volo's pool picks the connection)
    /// and returns what came back; a store failure on the server is an `Err`.
    pub async fn call(
        &self,
        _caller: usize,
        scenario: Scenario,
        key: i64,
        payload: &Bytes,
    ) -> Result<Reply, CallError> {
        let c = &self.inner;
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
/// server. Runs until the process ends — or, since volo's server installs handlers for
/// SIGINT, SIGTERM and SIGHUP, until one of those arrives, when it drains its connections
/// (volo's graceful shutdown, up to 30 s) and returns `Ok`. An accept error ends it with `Err`.
pub async fn serve(listener: tokio::net::TcpListener, store: MessageStore) -> std::io::Result<()> {
    let incoming = volo::net::incoming::DefaultIncoming::from(listener);
    gen::BenchmarkServiceServer::new(Handler { store })
        .run(incoming)
        .await
        .map_err(|e| std::io::Error::other(format!("volo server: {e}")))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{self, TestServer};
    use super::super::PlayerClient;
    use super::*;
    use crate::store::{MAX_ID, MIN_ID};

    const TIMEOUT: Duration = Duration::from_secs(10);

    async fn setup(tag: &str, calls_in_flight: usize) -> (TestServer, Client) {
        let server = test_support::start(tag, serve).await;
        let client = Client::connect(server.addr, calls_in_flight, TIMEOUT)
            .await
            .unwrap();
        (server, client)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_scenario_answers_correctly() {
        let (_server, client) = setup("volo-every", 2).await;
        test_support::check_every_scenario(&PlayerClient::Volo(client)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unknown_id_is_an_error_and_the_client_still_works() {
        let (_server, client) = setup("volo-unknown", 1).await;
        test_support::check_unknown_id(&PlayerClient::Volo(client)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn streaming_scenarios_are_refused() {
        let (_server, client) = setup("volo-streams", 1).await;
        test_support::check_no_streams(&PlayerClient::Volo(client)).await;
    }

    /// volo-thrift 0.12's own pool failure while it dials several connections at once (see
    /// [`Client::connect`]): the one error these tests accept, from volo, now and then.
    const POOL_RACE: &str = "wait a idle connection error";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_share_one_client() {
        let (_server, client) = setup("volo-concurrent", 50).await;
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connect_fails_without_a_server() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let err = Client::connect(addr, 1, Duration::from_secs(2))
            .await
            .err()
            .unwrap();
        assert!(err.0.contains("cannot reach"), "{err}");
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
