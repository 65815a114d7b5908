//! The tonic player: the benchmark service as gRPC unary methods over HTTP/2 with prost
//! messages, written by hand — a `#[derive(prost::Message)]` message set and a tower `Service`
//! routing the five paths to `tonic::server::Grpc::unary` with `ProstCodec`, which is what
//! `tonic-build` would generate from the `.proto` below, without needing `protoc` to build.
//!
//! ```proto
//! package brisk.bench;
//! message Empty {}
//! message IdRequest { int64 id = 1; }
//! message MessageReply { int64 id = 1; int64 from_uid = 2; int64 to_uid = 3; string content = 4; }
//! message EchoMessage { bytes payload = 1; }
//! service BenchmarkService {
//!   rpc DoNothing(Empty) returns (Empty);
//!   rpc GetMessageFromCache(IdRequest) returns (MessageReply);
//!   rpc GetMessageFromFile(IdRequest) returns (MessageReply);
//!   rpc GetMessageFromDb(IdRequest) returns (MessageReply);
//!   rpc Echo(EchoMessage) returns (EchoMessage);
//! }
//! ```
//!
//! tonic has no connection-count setting: a `Channel` is one HTTP/2 connection that
//! multiplexes its calls. So the client opens one channel per connection the scene asks for
//! and caller `i` uses channel `i % connections`. The per-call timeout is tonic's own
//! (`Endpoint::timeout`); everything else is tonic's defaults. A store error is a gRPC status
//! (`NOT_FOUND` for a missing record, `INTERNAL` otherwise), never a dropped stream.

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use ::tonic::body::Body;
use ::tonic::codec::ProstCodec;
use ::tonic::codegen::http::uri::PathAndQuery;
use ::tonic::codegen::{http, BoxFuture, Service};
use ::tonic::server::{NamedService, UnaryService};
use ::tonic::transport::server::TcpIncoming;
use ::tonic::transport::{Channel, Endpoint};
use ::tonic::{Request, Response, Status};
use bytes::Bytes;

use super::call::{CallError, Reply};
use crate::scenario::Scenario;
use crate::store::{Message, MessageStore, StoreError};

/// What the suite sets for tonic.
pub const SETTINGS: &str = "gRPC unary over HTTP/2 with prost messages (hand-written, what \
tonic-build generates); one Channel per connection (tonic has no connection-count setting, so \
the scene's connections are that many channels, caller i using channel i % connections); \
Endpoint::timeout = the scene's timeout; tonic defaults otherwise (TCP_NODELAY on both sides, \
4 MiB message limit, HTTP/2 windows)";

const SERVICE: &str = "brisk.bench.BenchmarkService";
const DO_NOTHING: &str = "/brisk.bench.BenchmarkService/DoNothing";
const FROM_CACHE: &str = "/brisk.bench.BenchmarkService/GetMessageFromCache";
const FROM_FILE: &str = "/brisk.bench.BenchmarkService/GetMessageFromFile";
const FROM_DB: &str = "/brisk.bench.BenchmarkService/GetMessageFromDb";
const ECHO: &str = "/brisk.bench.BenchmarkService/Echo";

/// `DoNothing`'s request and reply.
#[derive(Clone, PartialEq, prost::Message)]
struct Empty {}

/// The record asked for.
#[derive(Clone, PartialEq, prost::Message)]
struct IdRequest {
    #[prost(int64, tag = "1")]
    id: i64,
}

/// A [`Message`], field for field.
#[derive(Clone, PartialEq, prost::Message)]
struct MessageReply {
    #[prost(int64, tag = "1")]
    id: i64,
    #[prost(int64, tag = "2")]
    from_uid: i64,
    #[prost(int64, tag = "3")]
    to_uid: i64,
    #[prost(string, tag = "4")]
    content: String,
}

impl From<Message> for MessageReply {
    fn from(m: Message) -> Self {
        MessageReply {
            id: m.id,
            from_uid: m.from_uid,
            to_uid: m.to_uid,
            content: m.content,
        }
    }
}

impl From<MessageReply> for Message {
    fn from(m: MessageReply) -> Self {
        Message {
            id: m.id,
            from_uid: m.from_uid,
            to_uid: m.to_uid,
            content: m.content,
        }
    }
}

/// `Echo`'s request and reply.
#[derive(Clone, PartialEq, prost::Message)]
struct EchoMessage {
    #[prost(bytes = "bytes", tag = "1")]
    payload: Bytes,
}

/// A store error as the status a gRPC service answers with.
fn status(e: StoreError) -> Status {
    if e.is_not_found() {
        Status::not_found(e.to_string())
    } else {
        Status::internal(e.to_string())
    }
}

/// A lookup's answer as a unary reply.
// The `Status` is tonic's: `UnaryService` answers `Result<Response<_>, Status>`.
#[allow(clippy::result_large_err)]
fn record(found: Result<Message, StoreError>) -> Result<Response<MessageReply>, Status> {
    found.map(|m| Response::new(m.into())).map_err(status)
}

struct DoNothing;

impl UnaryService<Empty> for DoNothing {
    type Response = Empty;
    type Future = Ready<Result<Response<Empty>, Status>>;

    fn call(&mut self, _: Request<Empty>) -> Self::Future {
        ready(Ok(Response::new(Empty {})))
    }
}

/// `GetMessageFromCache` and `GetMessageFromFile`: a lookup that returns at once (the file
/// read blocks the thread, as it does in every player).
struct Lookup {
    store: Arc<MessageStore>,
    get: fn(&MessageStore, i64) -> Result<Message, StoreError>,
}

impl UnaryService<IdRequest> for Lookup {
    type Response = MessageReply;
    type Future = Ready<Result<Response<MessageReply>, Status>>;

    fn call(&mut self, request: Request<IdRequest>) -> Self::Future {
        ready(record((self.get)(&self.store, request.get_ref().id)))
    }
}

/// `GetMessageFromDb`: the query is awaited.
struct FromDb(Arc<MessageStore>);

impl UnaryService<IdRequest> for FromDb {
    type Response = MessageReply;
    type Future = BoxFuture<Response<MessageReply>, Status>;

    fn call(&mut self, request: Request<IdRequest>) -> Self::Future {
        let store = self.0.clone();
        let id = request.get_ref().id;
        Box::pin(async move { record(store.db.get(id).await) })
    }
}

struct Echo;

impl UnaryService<EchoMessage> for Echo {
    type Response = EchoMessage;
    type Future = Ready<Result<Response<EchoMessage>, Status>>;

    fn call(&mut self, request: Request<EchoMessage>) -> Self::Future {
        ready(Ok(Response::new(request.into_inner())))
    }
}

/// The gRPC service `brisk.bench.BenchmarkService` over a store (what tonic-build's
/// `BenchmarkServiceServer` is).
#[derive(Clone)]
struct BenchmarkGrpc {
    store: Arc<MessageStore>,
}

impl NamedService for BenchmarkGrpc {
    const NAME: &'static str = SERVICE;
}

impl Service<http::Request<Body>> for BenchmarkGrpc {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        match req.uri().path() {
            DO_NOTHING => Box::pin(async move {
                let mut grpc = ::tonic::server::Grpc::new(ProstCodec::<Empty, Empty>::default());
                Ok(grpc.unary(DoNothing, req).await)
            }),
            FROM_CACHE | FROM_FILE => {
                let get: fn(&MessageStore, i64) -> Result<Message, StoreError> =
                    if req.uri().path() == FROM_CACHE {
                        |store, id| store.cache.get(id)
                    } else {
                        |store, id| store.file.get(id)
                    };
                let method = Lookup {
                    store: self.store.clone(),
                    get,
                };
                Box::pin(async move {
                    let mut grpc = ::tonic::server::Grpc::new(
                        ProstCodec::<MessageReply, IdRequest>::default(),
                    );
                    Ok(grpc.unary(method, req).await)
                })
            }
            FROM_DB => {
                let method = FromDb(self.store.clone());
                Box::pin(async move {
                    let mut grpc = ::tonic::server::Grpc::new(
                        ProstCodec::<MessageReply, IdRequest>::default(),
                    );
                    Ok(grpc.unary(method, req).await)
                })
            }
            ECHO => Box::pin(async move {
                let mut grpc =
                    ::tonic::server::Grpc::new(ProstCodec::<EchoMessage, EchoMessage>::default());
                Ok(grpc.unary(Echo, req).await)
            }),
            _ => Box::pin(async { Ok(Status::unimplemented("no such method").into_http()) }),
        }
    }
}

/// A connected tonic client: one gRPC client over one `Channel` (one HTTP/2 connection) per
/// connection; clones share the channels.
#[derive(Clone)]
pub struct Client {
    channels: Arc<[::tonic::client::Grpc<Channel>]>,
}

impl Client {
    /// Opens `connections` (at least 1) channels to `addr`, each with `Endpoint::timeout(timeout)`
    /// (`timeout` also bounds each connect).
    pub async fn connect(
        addr: SocketAddr,
        connections: usize,
        timeout: Duration,
    ) -> Result<Client, CallError> {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| CallError::new(format!("tonic: `http://{addr}`: {e}")))?
            .timeout(timeout);
        let mut channels = Vec::with_capacity(connections.max(1));
        for _ in 0..connections.max(1) {
            let channel = tokio::time::timeout(timeout, endpoint.connect())
                .await
                .map_err(|_| CallError::new(format!("tonic: connecting to {addr} timed out")))?
                .map_err(|e| CallError::new(format!("tonic: cannot connect to {addr}: {e}")))?;
            channels.push(::tonic::client::Grpc::new(channel));
        }
        Ok(Client {
            channels: channels.into(),
        })
    }

    /// One call of `scenario` on channel `caller % connections`.
    pub async fn call(
        &self,
        caller: usize,
        scenario: Scenario,
        key: i64,
        payload: &Bytes,
    ) -> Result<Reply, CallError> {
        // A gRPC client calls through `&mut self`; a clone is how tonic shares a channel.
        let mut grpc = self.channels[caller % self.channels.len()].clone();
        Ok(match scenario {
            Scenario::Nth => {
                unary::<Empty, Empty>(&mut grpc, DO_NOTHING, Empty {}).await?;
                Reply::Nothing
            }
            Scenario::Cache => message(&mut grpc, FROM_CACHE, key).await?,
            Scenario::File => message(&mut grpc, FROM_FILE, key).await?,
            Scenario::Db => message(&mut grpc, FROM_DB, key).await?,
            Scenario::Echo => {
                let request = EchoMessage {
                    payload: payload.clone(),
                };
                let back: EchoMessage = unary(&mut grpc, ECHO, request).await?;
                Reply::Echo(back.payload)
            }
        })
    }
}

async fn message(
    grpc: &mut ::tonic::client::Grpc<Channel>,
    path: &'static str,
    id: i64,
) -> Result<Reply, CallError> {
    let reply: MessageReply = unary(grpc, path, IdRequest { id }).await?;
    Ok(Reply::Message(reply.into()))
}

/// One unary call, as a tonic-build client method makes it.
async fn unary<Req, Resp>(
    grpc: &mut ::tonic::client::Grpc<Channel>,
    path: &'static str,
    request: Req,
) -> Result<Resp, CallError>
where
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    grpc.ready()
        .await
        .map_err(|e| CallError::new(format!("tonic: service was not ready: {e}")))?;
    let response = grpc
        .unary(
            Request::new(request),
            PathAndQuery::from_static(path),
            ProstCodec::<Req, Resp>::default(),
        )
        .await
        .map_err(|s| CallError::new(format!("{:?}: {}", s.code(), s.message())))?;
    Ok(response.into_inner())
}

/// Serves the tonic benchmark service on `listener` with tonic's `Server` (TCP_NODELAY on
/// accepted connections, as `Server::builder()` sets when it binds the address itself). Runs
/// until the process ends; tonic skips failed accepts.
pub async fn serve(listener: tokio::net::TcpListener, store: MessageStore) -> std::io::Result<()> {
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    ::tonic::transport::Server::builder()
        .add_service(BenchmarkGrpc {
            store: Arc::new(store),
        })
        .serve_with_incoming(incoming)
        .await
        .map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{self, TestServer};
    use super::super::PlayerClient;
    use super::*;

    async fn setup(tag: &str) -> (TestServer, PlayerClient) {
        let server = test_support::start(tag, serve).await;
        let client = Client::connect(server.addr, 2, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(client.channels.len(), 2);
        (server, PlayerClient::Tonic(client))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_scenario_answers() {
        let (_server, client) = setup("tonic-every").await;
        test_support::check_every_scenario(&client).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unknown_id_is_an_error_and_the_client_goes_on() {
        let (_server, client) = setup("tonic-unknown").await;
        test_support::check_unknown_id(&client).await;
        let e = client
            .call(0, Scenario::Db, 999, &Bytes::new())
            .await
            .unwrap_err();
        assert!(e.0.starts_with("NotFound: "), "{e}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_all_succeed() {
        let (_server, client) = setup("tonic-concurrent").await;
        test_support::check_concurrent(&client, &Scenario::ALL).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unknown_path_is_unimplemented() {
        let server = test_support::start("tonic-path", serve).await;
        let channel = Endpoint::from_shared(format!("http://{}", server.addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut grpc = ::tonic::client::Grpc::new(channel);
        let e = unary::<Empty, Empty>(&mut grpc, "/brisk.bench.BenchmarkService/Nope", Empty {})
            .await
            .unwrap_err();
        assert!(e.0.starts_with("Unimplemented: "), "{e}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connecting_to_nothing_is_an_error() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        assert!(Client::connect(addr, 1, Duration::from_secs(5))
            .await
            .is_err());
    }
}
