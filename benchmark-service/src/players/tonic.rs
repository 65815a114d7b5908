//! The tonic player: the benchmark service as gRPC methods over HTTP/2 with prost messages,
//! written by hand — a `#[derive(prost::Message)]` message set and a tower `Service` routing
//! the five unary paths to `tonic::server::Grpc::unary`, `StreamItems` to
//! `Grpc::server_streaming` and `PingPong` to `Grpc::streaming`, all with `ProstCodec`, which
//! is what `tonic-build` would generate from the `.proto` below, without needing `protoc` to
//! build.
//!
//! ```proto
//! package brisk.bench;
//! message Empty {}
//! message IdRequest { int64 id = 1; }
//! message MessageReply { int64 id = 1; int64 from_uid = 2; int64 to_uid = 3; string content = 4; }
//! message EchoMessage { bytes payload = 1; }
//! message StreamRequest { uint32 count = 1; bytes payload = 2; }
//! service BenchmarkService {
//!   rpc DoNothing(Empty) returns (Empty);
//!   rpc GetMessageFromCache(IdRequest) returns (MessageReply);
//!   rpc GetMessageFromFile(IdRequest) returns (MessageReply);
//!   rpc GetMessageFromDb(IdRequest) returns (MessageReply);
//!   rpc Echo(EchoMessage) returns (EchoMessage);
//!   // `stream`: `count` messages, each the request's payload.
//!   rpc StreamItems(StreamRequest) returns (stream EchoMessage);
//!   // `pingpong`: each message back as it comes.
//!   rpc PingPong(stream EchoMessage) returns (stream EchoMessage);
//! }
//! ```
//!
//! tonic has no connection-count setting: a `Channel` is one HTTP/2 connection that
//! multiplexes its calls. So the client opens one channel per connection the scene asks for
//! and caller `i` uses channel `i % connections`. The per-call timeout is tonic's own
//! (`Endpoint::timeout`); everything else is tonic's defaults. A store error is a gRPC status
//! (`NOT_FOUND` for a missing record, `INTERNAL` otherwise), never a dropped stream.
//!
//! The streams, as a tonic user writes them: `StreamItems` answers with a stream of the
//! request's bytes repeated (no task, no channel: the handler's stream is polled by tonic's
//! encoder), `PingPong` answers with the request's own `Streaming` (each message decoded and
//! re-encoded as it arrives). The client reads a server stream with `Streaming::message`; for
//! ping-pong it feeds the request stream from a channel, putting the first ping in before the
//! call opens so that it leaves with the request headers (tonic's `streaming` waits for the
//! response headers), then sends each next ping after reading the previous pong, and ends by
//! closing the channel and reading the response stream's end. `Endpoint::timeout` bounds only
//! the wait for the response headers, so each whole stream is also bounded by the scene's
//! timeout (a `tokio::time::timeout` around it), as the engine expects of every call. HTTP/2
//! flow control is tonic's default (hyper's 2 MiB stream / 5 MiB connection windows).

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use ::tonic::body::Body;
use ::tonic::codec::ProstCodec;
use ::tonic::codegen::http::uri::PathAndQuery;
use ::tonic::codegen::{http, BoxFuture, Service};
use ::tonic::server::{NamedService, ServerStreamingService, StreamingService, UnaryService};
use ::tonic::transport::server::TcpIncoming;
use ::tonic::transport::{Channel, Endpoint};
use ::tonic::{Request, Response, Status};
use bytes::Bytes;
use futures::SinkExt;

use super::call::{CallError, ItemTally, Reply};
use crate::scenario::{Scenario, STREAM_ITEMS};
use crate::service::MAX_STREAM_ITEMS;
use crate::store::{Message, MessageStore, StoreError};

/// What the suite sets for tonic.
pub const SETTINGS: &str = "gRPC unary over HTTP/2 with prost messages (hand-written, what \
tonic-build generates); one Channel per connection (tonic has no connection-count setting, so \
the scene's connections are that many channels, caller i using channel i % connections); \
Endpoint::timeout = the scene's timeout; tonic defaults otherwise (TCP_NODELAY on both sides, \
4 MiB message limit, HTTP/2 windows); streams: server-streaming StreamItems and bidirectional \
PingPong (hand-written like the unary methods, Grpc::server_streaming / Grpc::streaming), the \
first ping sent with the request headers, each stream bounded by the scene's timeout";

const SERVICE: &str = "brisk.bench.BenchmarkService";
const DO_NOTHING: &str = "/brisk.bench.BenchmarkService/DoNothing";
const FROM_CACHE: &str = "/brisk.bench.BenchmarkService/GetMessageFromCache";
const FROM_FILE: &str = "/brisk.bench.BenchmarkService/GetMessageFromFile";
const FROM_DB: &str = "/brisk.bench.BenchmarkService/GetMessageFromDb";
const ECHO: &str = "/brisk.bench.BenchmarkService/Echo";
const STREAM_ITEMS_PATH: &str = "/brisk.bench.BenchmarkService/StreamItems";
const PING_PONG: &str = "/brisk.bench.BenchmarkService/PingPong";

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

/// `StreamItems`'s request: how many messages, and the bytes of each.
#[derive(Clone, PartialEq, prost::Message)]
struct StreamRequest {
    #[prost(uint32, tag = "1")]
    count: u32,
    #[prost(bytes = "bytes", tag = "2")]
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

/// `StreamItems`'s answer: the request's payload `count` times.
type RepeatedItems = futures::stream::Iter<
    std::iter::Map<std::iter::RepeatN<Bytes>, fn(Bytes) -> Result<EchoMessage, Status>>,
>;

/// One message of `StreamItems`.
// The `Status` is tonic's: a response stream yields `Result<_, Status>`.
#[allow(clippy::result_large_err)]
fn item(payload: Bytes) -> Result<EchoMessage, Status> {
    Ok(EchoMessage { payload })
}

struct StreamItems;

impl ServerStreamingService<StreamRequest> for StreamItems {
    type Response = EchoMessage;
    type ResponseStream = RepeatedItems;
    type Future = Ready<Result<Response<RepeatedItems>, Status>>;

    fn call(&mut self, request: Request<StreamRequest>) -> Self::Future {
        let StreamRequest { count, payload } = request.into_inner();
        if count > MAX_STREAM_ITEMS {
            return ready(Err(Status::invalid_argument(format!(
                "StreamItems: {count} messages asked for, at most {MAX_STREAM_ITEMS}"
            ))));
        }
        let items = std::iter::repeat_n(payload, count as usize).map(item as fn(_) -> _);
        ready(Ok(Response::new(futures::stream::iter(items))))
    }
}

struct PingPong;

impl StreamingService<EchoMessage> for PingPong {
    type Response = EchoMessage;
    type ResponseStream = ::tonic::Streaming<EchoMessage>;
    type Future = Ready<Result<Response<Self::ResponseStream>, Status>>;

    fn call(&mut self, request: Request<::tonic::Streaming<EchoMessage>>) -> Self::Future {
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
            STREAM_ITEMS_PATH => Box::pin(async move {
                let mut grpc =
                    ::tonic::server::Grpc::new(ProstCodec::<EchoMessage, StreamRequest>::default());
                Ok(grpc.server_streaming(StreamItems, req).await)
            }),
            PING_PONG => Box::pin(async move {
                let mut grpc =
                    ::tonic::server::Grpc::new(ProstCodec::<EchoMessage, EchoMessage>::default());
                Ok(grpc.streaming(PingPong, req).await)
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
    /// Bounds each whole stream (`Endpoint::timeout` bounds only its response headers).
    timeout: Duration,
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
            timeout,
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
            Scenario::Stream => within(self.timeout, stream_items(&mut grpc, payload)).await?,
            Scenario::PingPong => within(self.timeout, ping_pong(&mut grpc, payload)).await?,
        })
    }
}

/// A gRPC status as a failed call.
fn status_error(s: Status) -> CallError {
    CallError::new(format!("{:?}: {}", s.code(), s.message()))
}

/// Waits for the channel to take a call, as a tonic-build client method does first.
async fn ready_to_call(grpc: &mut ::tonic::client::Grpc<Channel>) -> Result<(), CallError> {
    grpc.ready()
        .await
        .map_err(|e| CallError::new(format!("tonic: service was not ready: {e}")))
}

/// `call`, failed if it outlasts `timeout`.
async fn within(
    timeout: Duration,
    call: impl Future<Output = Result<Reply, CallError>>,
) -> Result<Reply, CallError> {
    tokio::time::timeout(timeout, call).await.map_err(|_| {
        CallError::new(format!(
            "tonic: the stream outlasted its {timeout:?} timeout"
        ))
    })?
}

/// `stream`: [`STREAM_ITEMS`] copies of `payload` from `StreamItems`, read to the end, each
/// checked.
async fn stream_items(
    grpc: &mut ::tonic::client::Grpc<Channel>,
    payload: &Bytes,
) -> Result<Reply, CallError> {
    ready_to_call(grpc).await?;
    let request = StreamRequest {
        count: STREAM_ITEMS,
        payload: payload.clone(),
    };
    let mut items = grpc
        .server_streaming(
            Request::new(request),
            PathAndQuery::from_static(STREAM_ITEMS_PATH),
            ProstCodec::<StreamRequest, EchoMessage>::default(),
        )
        .await
        .map_err(status_error)?
        .into_inner();
    let mut tally = ItemTally::default();
    while let Some(item) = items.message().await.map_err(status_error)? {
        tally.add(&item.payload, payload);
    }
    Ok(Reply::Items(tally))
}

/// `pingpong`: [`STREAM_ITEMS`] round trips on one `PingPong` stream — a ping of `payload`,
/// then its pong read before the next ping — then the request stream closed and the response
/// stream read to its end (a message after the last pong is counted, and fails the check).
async fn ping_pong(
    grpc: &mut ::tonic::client::Grpc<Channel>,
    payload: &Bytes,
) -> Result<Reply, CallError> {
    ready_to_call(grpc).await?;
    let ping = || EchoMessage {
        payload: payload.clone(),
    };
    // A channel of one, plus the sender's own slot: the first ping waits in it and leaves with
    // the request headers.
    let (mut pings, requests) = futures::channel::mpsc::channel::<EchoMessage>(1);
    pings
        .try_send(ping())
        .map_err(|e| CallError::new(format!("tonic: cannot queue the first ping: {e}")))?;
    let mut pongs = grpc
        .streaming(
            Request::new(requests),
            PathAndQuery::from_static(PING_PONG),
            ProstCodec::<EchoMessage, EchoMessage>::default(),
        )
        .await
        .map_err(status_error)?
        .into_inner();
    let mut tally = ItemTally::default();
    for round in 0..STREAM_ITEMS {
        if round > 0 {
            pings
                .send(ping())
                .await
                .map_err(|_| CallError::new("tonic: the request stream closed early"))?;
        }
        match pongs.message().await.map_err(status_error)? {
            Some(pong) => tally.add(&pong.payload, payload),
            None => break,
        }
    }
    drop(pings);
    while let Some(extra) = pongs.message().await.map_err(status_error)? {
        tally.add(&extra.payload, payload);
    }
    Ok(Reply::Items(tally))
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
    ready_to_call(grpc).await?;
    let response = grpc
        .unary(
            Request::new(request),
            PathAndQuery::from_static(path),
            ProstCodec::<Req, Resp>::default(),
        )
        .await
        .map_err(status_error)?;
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
    async fn streams_return_every_item() {
        let (_server, client) = setup("tonic-streams").await;
        test_support::check_streams(&client).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_over_the_limit_is_invalid_argument() {
        let server = test_support::start("tonic-limit", serve).await;
        let channel = Endpoint::from_shared(format!("http://{}", server.addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut grpc = ::tonic::client::Grpc::new(channel);
        grpc.ready().await.unwrap();
        let request = StreamRequest {
            count: MAX_STREAM_ITEMS + 1,
            payload: Bytes::new(),
        };
        let status = grpc
            .server_streaming(
                Request::new(request),
                PathAndQuery::from_static(STREAM_ITEMS_PATH),
                ProstCodec::<StreamRequest, EchoMessage>::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(status.code(), ::tonic::Code::InvalidArgument, "{status:?}");
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
