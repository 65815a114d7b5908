//! # brisk
//!
//! An RPC framework for tokio, with the connection modes, write modes and
//! worker pool of the Java framework jkrpc made into settings, and a built-in
//! benchmark suite that reproduces the classic Java NIO/RPC comparisons.
//!
//! This facade is the one dependency a user adds.
//!
//! # Structure
//!
//! The crates sit beside this one at the top of the repository; data flows
//! down the table (a crate depends only on the ones above it):
//!
//! | crate | owns |
//! |-------|------|
//! | [`rpc_core`] | the status table (`Code`, `Status`), `RpcError`, the call's `Context`, a stream's ends and credit, metadata, modes, interceptors, config loading |
//! | `rpc-macros` | `#[service]`: a trait of `async fn`s → the server dispatch and the typed client |
//! | [`codec`] | the frame format (stream frames too), error bodies, the msgpack / protobuf / json serializers, typed `Streaming<T>` |
//! | [`transport`] | framed TCP: adaptive reads, the client's coalescing writer, multiplexed connections, heartbeats |
//! | [`registry`] | service registries: a static address list and etcd (feature `etcd`) |
//! | [`server`] | accept loop, admission, routing, direct / worker-pool dispatch, the reply path, graceful shutdown |
//! | [`client`] | `Connect` (reused / pooled / fixed), timeouts, retries, interceptors, load balancing and failover |
//!
//! This crate re-exports [`#[service]`](service) (crate `rpc-macros`), which
//! turns one trait into a typed client and a one-line server registration. The benchmark suite
//! (`benchmark-service`, unpublished) is built on it.
//!
//! # Features
//!
//! | feature | default | what it adds | what it pulls in |
//! |---------|---------|--------------|------------------|
//! | `http` | on | the HTTP/JSON listener (`http_addr`: `POST /Service/method`, `/health`, `/metrics`); without it a set `http_addr` fails `start()` naming the feature | hyper, hyper-util, http-body-util |
//! | `tower` | on | `Client` as a `tower::Service<RpcRequest>` (`rpc_client::tower`); `ServerBuilder::layer` (`rpc_server::layers`) | tower |
//! | `toml` | on | config files in TOML (`ServerConfig::load`, `ClientConfig::load`) | toml |
//! | `yaml` | on | config files in YAML | serde_yaml |
//! | `tls` | off | TLS for the binary protocol (`tls` in both configs, `brisk::tls`) | rustls, tokio-rustls |
//! | `gzip` | on | gzip bodies: `compression` in both configs, HTTP `Content-Encoding` / `Accept-Encoding` | flate2 (pure Rust) |
//! | `zstd` | on | Zstandard bodies, likewise | zstd (builds libzstd's C code) |
//! | `etcd` | off | the etcd registry (`registry = "etcd://…"`) | etcd-client (its build needs `protoc`) |
//! | `otel` | off | OpenTelemetry: call spans continue and pass on W3C trace context; `brisk::otel` builds the exporting layer | opentelemetry, opentelemetry_sdk, opentelemetry-stdout, tracing-opentelemetry |
//!
//! rpc-codec's `protobuf` feature (on by default) builds the protobuf
//! serializer; without it a protobuf body is an error naming the feature.
//!
//! # Where a call goes
//!
//! A unary call, file by file, in the order it passes through them:
//!
//! **Client**
//! 1. the typed client [`#[service]`](service) generated (`rpc-macros/src/expand.rs`):
//!    one method per call, arguments as a tuple.
//! 2. `rpc-client/src/client/mod.rs` — `Client::call`: serializes the arguments
//!    (`rpc-codec/src/serializer`), resolves the call's settings once (timeout,
//!    write mode, hash key, idempotency), runs the client interceptors if any,
//!    then the attempt loop (`invoke` → `attempt`).
//! 3. `rpc-client/src/cluster.rs` + `rpc-client/src/balance/` — chooses a
//!    server (skipping those marked down).
//! 4. `rpc-client/src/connections/{fixed,pooled,reused}.rs` — a connection to
//!    it, per `Connect`.
//! 5. `rpc-transport/src/connection/` — `Connection::call` (a shared
//!    connection) or `Connection::start` then `PendingCall::response`
//!    (`call.rs`; a pooled one) with a `SendSpec`: registers the call (`pending.rs`) and
//!    offers the frame to the writer.
//! 6. `rpc-transport/src/writer/` — encodes the frame (`rpc-codec/src/frame.rs`)
//!    into the current batch; the writer task writes each batch with one `write`.
//!
//! **Server**
//! 7. `rpc-server/src/server.rs` → `admission.rs` — the accept loop admits the
//!    connection (or refuses it, `refusal.rs`).
//! 8. `rpc-server/src/connection/mod.rs` — the connection task reads frames
//!    (`rpc-transport/src/reader/`, `rpc-codec/src/codec.rs`), routes each
//!    (`router.rs`, to a method index) and builds its `Context`
//!    (`rpc-core/src/context.rs`: metadata, peer, deadline, cancellation);
//!    calls that may still end early — by their deadline or a `Cancel`
//!    frame — wait in `connection/live.rs`, under one timer.
//! 9. `rpc-server/src/dispatch/` — runs the call: interceptors and handler
//!    (the `ServiceHandler` `#[service]` generated, dispatching on the
//!    method index) on the connection task (direct), or as a job on the
//!    worker pool (`pool/`, entered through `pool/submit.rs`; a handler that awaits waits off the workers,
//!    `dispatch/on_pool.rs`); panics are contained, the outcome recorded
//!    (`method_metrics.rs`).
//! 10. `rpc-server/src/reply/` — the answer frame (`frame.rs`; an error as a
//!     `Status`, `rpc-codec/src/status_body.rs`); pooled answers come back
//!     through `pool_answers/` (and are written by the workers themselves
//!     while a waiting connection lends them its plain socket,
//!     `rpc-transport/src/write_now.rs`); `outbox.rs` writes a batch's
//!     answers with one `write`.
//!
//! **Client, again**
//! 11. `rpc-transport/src/connection/read_loop.rs` — the connection's reader task
//!     completes the pending call by its request id (`pending.rs`); a call
//!     dropped or timed out before that sends the server a `Cancel` frame.
//! 12. `rpc-client/src/client/mod.rs` — an error status becomes the caller's
//!     `RpcError` (`Status::into_error`); an answer is decoded into the result.
//!
//! **A stream** takes the same way to its server (`Client::open_stream` in
//! `rpc-client/src/streams.rs`, `Connection::open_stream` and the
//! connection's stream table in `rpc-transport/src/streams.rs`), where the
//! connection task routes its frames by id (`rpc-server/src/stream/`) and
//! runs its handler on that same task (`stream/run.rs`). Both ends are
//! the pieces of `rpc-core/src/stream/`: an `Inbox` per flow of items, read
//! as a `RawStreaming` (typed: `Streaming<T>`, `rpc-codec/src/streaming.rs`),
//! and a `StreamSink` that sends within the receiver's `Credit`.
//!
//! ```no_run
//! use brisk::{Client, Context, RpcError, Server, Status};
//!
//! /// Greets people.
//! #[brisk::service]
//! pub trait Hello {
//!     /// Returns a greeting for `name`.
//!     async fn greet(&self, cx: &Context, name: String) -> Result<String, Status>;
//! }
//!
//! struct MyHello;
//!
//! impl Hello for MyHello {
//!     async fn greet(&self, cx: &Context, name: String) -> Result<String, Status> {
//!         let from = cx.peer().map(|p| p.to_string()).unwrap_or_default();
//!         Ok(format!("hello, {name} (from {from})"))
//!     }
//! }
//!
//! # async fn run() -> Result<(), RpcError> {
//! let server = Server::builder().addr("127.0.0.1:0").service(HelloServer::new(MyHello)).start().await?;
//! let client = HelloClient::new(Client::builder().addr(server.local_addr().to_string()).build().await?);
//! assert!(client.greet("brisk".into()).await?.starts_with("hello, brisk"));
//! # Ok(()) }
//! ```

// `#[brisk::service]` names the facade `::brisk`, inside this crate too.
extern crate self as brisk;

pub use async_trait::async_trait;
pub use rpc_client as client;
pub use rpc_codec as codec;
pub use rpc_core;
pub use rpc_registry as registry;
pub use rpc_server as server;
pub use rpc_transport as transport;

#[cfg(feature = "otel")]
pub mod otel;

pub use futures_core::Stream;
pub use rpc_client::{CallOptions, Client, ClientBuilder, ClientConfig, Connect, PoolHold};
pub use rpc_codec::{Payload, StreamSender, Streaming};
pub use rpc_core::{
    BearerToken, Cause, Code, Compression, CompressionConfig, ConnectType, Context, Detail,
    Dispatch, Endpoint, HandlerFuture, Interceptor, Metadata, MethodKind, Next, RpcError,
    RpcRequest, RpcResponse, SerializerKind, ServiceHandler, Status, StreamFuture, StreamIo,
    TokenAuth, WriteMode,
};
/// TLS config types (`brisk::tls::TlsServerConfig`, `TlsClientConfig`) and the
/// rustls crate they build on (`brisk::tls::rustls`). Feature `tls`.
#[cfg(feature = "tls")]
pub mod tls {
    pub use rpc_transport::tls::{TlsAcceptor, TlsClientConfig, TlsConnector, TlsServerConfig};
    pub use rustls;
}
pub use rpc_server::{
    config::AnswerCompression, DispatchConfig, MemoryConfig, PoolConfig, QueueKind, Server,
    ServerBuilder, ServerConfig, ServerHandle, WorkerPool,
};

/// Defines a service from a trait of `async fn`s: the trait servers
/// implement, `{Name}Server` (register it with
/// `Server::builder().service(..)`) and the typed `{Name}Client`.
///
/// Each method takes `&self`, the call's [`Context`] and its arguments, and
/// returns `Result<T, E>` with `E: Into<Status>` (a [`Status`], or an
/// [`RpcError`] from a nested call, both convert). Implementations write
/// plain `async fn` — no `async_trait` — and their futures must be `Send`.
/// The service is called by the trait's name and each method by its own;
/// arguments travel as a tuple in declaration order, so every argument and
/// result type needs serde's `Serialize` and `DeserializeOwned`.
///
/// A method streams when it returns `Result<impl Stream<Item = Result<T,
/// Status>> + Send, Status>` (a server stream) and/or takes a
/// [`Streaming<T>`] as its last parameter (a client stream); its client
/// method returns a `Streaming` and/or takes any [`Stream`] of items. See
/// the README's "Streaming calls" and `examples/stream_watch.rs`.
///
/// The client has one method per call with the same arguments (minus the
/// context), `with_options` for per-call [`CallOptions`] and `with_context`
/// for a call made on behalf of another (its deadline, trace metadata and
/// cancellation carry over). See the crate docs for a complete example.
pub use rpc_macros::service;

/// What the `#[service]` expansion needs; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use bytes::Bytes;
    use futures_core::Stream;
    pub use rpc_codec::BodyCodec;
    use rpc_codec::Streaming;
    use rpc_core::{
        Context, HandlerFuture, RawStreaming, RpcError, RpcResponse, SerializerKind, Status,
        StreamFuture, StreamSink,
    };

    /// A method's outcome as the server's answer: the encoded result and the
    /// metadata the handler set, or its error as a status.
    #[inline]
    pub fn answer<T: serde::Serialize, E: Into<Status>>(
        serializer: SerializerKind,
        cx: Context,
        out: Result<T, E>,
    ) -> Result<RpcResponse, RpcError> {
        match out {
            Ok(value) => Ok(RpcResponse {
                body: serializer.encode_body(&value)?,
                metadata: cx.into_reply_metadata(),
            }),
            Err(e) => Err(RpcError::from(e.into())),
        }
    }

    /// The answer to a method index the service does not have.
    pub fn unknown_method(service: &'static str, index: usize) -> HandlerFuture<'static> {
        Box::pin(std::future::ready(Err(RpcError::UnknownMethod {
            service: service.into(),
            method: format!("#{index}"),
        })))
    }

    /// A stream's end for a method index the service does not stream.
    pub fn unknown_stream(service: &'static str, index: usize) -> StreamFuture<'static> {
        Box::pin(std::future::ready(Err(Status::from(
            &RpcError::UnknownMethod {
                service: service.into(),
                method: format!("#{index}"),
            },
        ))))
    }

    /// A stream's arguments beside its flows, decoded.
    #[inline]
    pub fn arguments<A: serde::de::DeserializeOwned>(
        serializer: SerializerKind,
        body: &Bytes,
    ) -> Result<A, Status> {
        serializer.decode_bytes(body).map_err(|e| Status::from(&e))
    }

    /// The caller's items of a client or bidirectional stream, typed.
    pub fn incoming<T: serde::de::DeserializeOwned>(
        raw: Option<RawStreaming>,
        serializer: SerializerKind,
    ) -> Result<Streaming<T>, Status> {
        match raw {
            Some(raw) => Ok(Streaming::new(raw, serializer)),
            None => Err(Status::new(
                rpc_core::Code::Internal,
                "a client stream without its caller's items",
            )),
        }
    }

    /// Sends a server stream's items, each as soon as there is credit for
    /// it; the first error ends the stream with its status.
    pub async fn send_stream<S, T, E, F>(
        serializer: SerializerKind,
        mut out: StreamSink,
        result: Result<S, F>,
    ) -> Result<(), Status>
    where
        S: Stream<Item = Result<T, E>>,
        T: serde::Serialize,
        E: Into<Status>,
        F: Into<Status>,
    {
        let items = result.map_err(Into::into)?;
        let mut items = std::pin::pin!(items);
        while let Some(item) = std::future::poll_fn(|cx| items.as_mut().poll_next(cx)).await {
            let item = item.map_err(Into::into)?;
            let body = serializer
                .encode_body(&item)
                .map_err(|e| Status::from(&e))?;
            out.send(body).await?;
        }
        Ok(())
    }

    /// Sends a client stream's one answer.
    pub async fn send_one<T: serde::Serialize, E: Into<Status>>(
        serializer: SerializerKind,
        mut out: StreamSink,
        result: Result<T, E>,
    ) -> Result<(), Status> {
        let value = result.map_err(Into::into)?;
        let body = serializer
            .encode_body(&value)
            .map_err(|e| Status::from(&e))?;
        out.send(body).await
    }
}
