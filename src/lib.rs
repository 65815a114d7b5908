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
//! | [`rpc_core`] | the status table (`Code`, `Status`), `RpcError`, metadata, modes, interceptors, config loading |
//! | [`codec`] | the frame format, error bodies and the msgpack / protobuf / json serializers |
//! | [`transport`] | framed TCP: adaptive reads, the client's coalescing writer, multiplexed connections, heartbeats |
//! | [`registry`] | service registries: a static address list and etcd (feature `etcd`) |
//! | [`server`] | accept loop, admission, routing, direct / worker-pool dispatch, the reply path, graceful shutdown |
//! | [`client`] | `Connect` (reused / pooled / fixed), timeouts, retries, interceptors, load balancing and failover |
//!
//! This crate defines [`service!`], which turns one trait into a typed client
//! and a one-line server registration. The benchmark suite
//! (`benchmark-service`, unpublished) is built on it.
//!
//! # Features
//!
//! | feature | default | what it adds | what it pulls in |
//! |---------|---------|--------------|------------------|
//! | `tls` | off | TLS for the binary protocol (`tls` in both configs, [`tls`]) | rustls, tokio-rustls |
//! | `etcd` | off | the etcd registry (`registry = "etcd://…"`) | etcd-client (its build needs `protoc`) |
//!
//! rpc-codec's `protobuf` feature (on by default) builds the protobuf
//! serializer; without it a protobuf body is an error naming the feature.
//!
//! # Where a call goes
//!
//! A unary call, file by file, in the order it passes through them:
//!
//! **Client**
//! 1. `src/lib.rs` — the typed client [`service!`] generated: one method per
//!    call, arguments as a tuple.
//! 2. `rpc-client/src/client.rs` — `Client::call`: serializes the arguments
//!    (`rpc-codec/src/serializer`), resolves the call's settings once (timeout,
//!    write mode, hash key, idempotency), runs the client interceptors if any,
//!    then the attempt loop (`invoke` → `attempt`).
//! 3. `rpc-client/src/cluster.rs` + `rpc-client/src/balance/` — chooses a
//!    server (skipping those marked down).
//! 4. `rpc-client/src/connections/{fixed,pooled,reused}.rs` — a connection to
//!    it, per `Connect`.
//! 5. `rpc-transport/src/connection.rs` — `Connection::start` with a
//!    `SendSpec`: registers the call (`pending.rs`) and offers the frame to
//!    the writer.
//! 6. `rpc-transport/src/writer.rs` — encodes the frame (`rpc-codec/src/frame.rs`)
//!    into the current batch; the writer task writes each batch with one `write`.
//!
//! **Server**
//! 7. `rpc-server/src/server.rs` → `admission.rs` — the accept loop admits the
//!    connection (or refuses it, `refusal.rs`).
//! 8. `rpc-server/src/connection/mod.rs` — the connection task reads frames
//!    (`rpc-transport/src/reader.rs`, `rpc-codec/src/codec.rs`) and routes each
//!    (`router.rs`).
//! 9. `rpc-server/src/dispatch.rs` — runs the call: interceptors and handler
//!    on the connection task (direct), or as a job on the worker pool
//!    (`pool/`); panics are contained, the outcome recorded (`method_metrics.rs`).
//! 10. `rpc-server/src/reply/` — the answer frame (`frame.rs`; an error as a
//!     `Status`, `rpc-codec/src/status_body.rs`); pooled answers come back
//!     through `pool_answers.rs`; `outbox.rs` writes a batch's answers with one
//!     `write`.
//!
//! **Client, again**
//! 11. `rpc-transport/src/connection.rs` — the connection's reader task
//!     completes the pending call by its request id (`pending.rs`).
//! 12. `rpc-client/src/client.rs` — an error status becomes the caller's
//!     `RpcError` (`Status::into_error`); an answer is decoded into the result.
//!
//! ```no_run
//! use brisk::{async_trait, Client, RpcError, Server};
//!
//! brisk::service! {
//!     /// Greets people.
//!     pub trait Hello {
//!         /// Returns a greeting for `name`.
//!         async fn greet(name: String) -> String;
//!     }
//! }
//!
//! struct MyHello;
//!
//! #[async_trait]
//! impl Hello for MyHello {
//!     async fn greet(&self, name: String) -> Result<String, RpcError> {
//!         Ok(format!("hello, {name}"))
//!     }
//! }
//!
//! # async fn run() -> Result<(), RpcError> {
//! let server = Server::builder().addr("127.0.0.1:0").service(HelloServer::new(MyHello)).start().await?;
//! let client = HelloClient::new(Client::builder().addr(server.local_addr().to_string()).build().await?);
//! assert_eq!(client.greet("brisk".into()).await?, "hello, brisk");
//! # Ok(()) }
//! ```

pub use async_trait::async_trait;
pub use rpc_client as client;
pub use rpc_codec as codec;
pub use rpc_core;
pub use rpc_registry as registry;
pub use rpc_server as server;
pub use rpc_transport as transport;

pub use rpc_client::{CallOptions, Client, ClientBuilder, ClientConfig, Connect, PoolHold};
pub use rpc_codec::Payload;
pub use rpc_core::{
    BearerToken, Cause, Code, ConnectType, Detail, Dispatch, Endpoint, Interceptor, Metadata, Next,
    RpcError, RpcRequest, RpcResponse, SerializerKind, ServiceHandler, Status, TokenAuth,
    WriteMode,
};
/// TLS config types (`brisk::tls::TlsServerConfig`, `TlsClientConfig`) and the
/// rustls crate they build on (`brisk::tls::rustls`). Feature `tls`.
#[cfg(feature = "tls")]
pub mod tls {
    pub use rpc_transport::tls::{TlsAcceptor, TlsClientConfig, TlsConnector, TlsServerConfig};
    pub use rustls;
}
pub use rpc_server::{
    DispatchConfig, MemoryConfig, PoolConfig, QueueKind, Server, ServerBuilder, ServerConfig,
    ServerHandle, WorkerPool,
};

/// Re-exports the macro expansion needs; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use async_trait::async_trait;
    pub use bytes::{Bytes, BytesMut};
    pub use paste::paste;
    pub use rpc_codec::BodyCodec;
}

/// Expands to the return type of a `service!` method (`()` when none is written).
#[doc(hidden)]
#[macro_export]
macro_rules! __service_ret {
    () => {
        ()
    };
    ($t:ty) => {
        $t
    };
}

/// Defines a service once: the trait servers implement, a typed client and a
/// server adapter.
///
/// For `trait Hello` it generates:
/// - `trait Hello` (async methods taking `&self`, each returning
///   `Result<T, RpcError>`; implement it with `#[brisk::async_trait]`);
/// - `HelloServer<T: Hello>` — a [`ServiceHandler`]: `Server::builder().service(HelloServer::new(imp))`;
/// - `HelloClient` — typed calls over a [`Client`]; `with_options` sets per-call
///   [`CallOptions`] (timeout, metadata, serializer).
///
/// The service is called by the trait's name and each method by its own name.
/// Arguments travel as a tuple in declaration order, so every argument and
/// result type needs serde's `Serialize` and `DeserializeOwned`.
///
/// See the crate docs for a complete example.
#[macro_export]
macro_rules! service {
    (
        $(#[$attr:meta])*
        $vis:vis trait $name:ident {
            $(
                $(#[$mattr:meta])*
                async fn $method:ident ( $( $arg:ident : $argty:ty ),* $(,)? ) $( -> $ret:ty )? ;
            )*
        }
    ) => { $crate::__private::paste! {
        $(#[$attr])*
        #[$crate::__private::async_trait]
        $vis trait $name: ::core::marker::Send + ::core::marker::Sync + 'static {
            $(
                $(#[$mattr])*
                async fn $method(&self $(, $arg: $argty)*)
                    -> ::core::result::Result<$crate::__service_ret!($($ret)?), $crate::RpcError>;
            )*
        }

        #[doc = "Serves a [`" $name "`] implementation: `Server::builder().service(" $name "Server::new(imp))`."]
        $vis struct [<$name Server>]<T>(::std::sync::Arc<T>);

        impl<T: $name> [<$name Server>]<T> {
            /// Wraps an implementation.
            pub fn new(service: T) -> Self {
                Self(::std::sync::Arc::new(service))
            }

            /// Wraps an implementation that is shared elsewhere too.
            pub fn from_arc(service: ::std::sync::Arc<T>) -> Self {
                Self(service)
            }
        }

        #[$crate::__private::async_trait]
        impl<T: $name> $crate::ServiceHandler for [<$name Server>]<T> {
            fn service_name(&self) -> &'static str {
                ::core::stringify!($name)
            }

            fn method_names(&self) -> &'static [&'static str] {
                &[$(::core::stringify!($method)),*]
            }

            #[allow(unused_parens, unused_variables, clippy::unused_unit)]
            async fn call(&self, req: $crate::RpcRequest)
                -> ::core::result::Result<$crate::__private::Bytes, $crate::RpcError>
            {
                use $crate::__private::BodyCodec as _;
                let serializer = req.serializer;
                match &*req.method {
                    $(
                        ::core::stringify!($method) => {
                            let ($($arg,)*): ($($argty,)*) = serializer.decode_bytes(&req.body)?;
                            let out = self.0.$method($($arg),*).await?;
                            serializer.encode_body(&out)
                        }
                    )*
                    other => ::core::result::Result::Err($crate::RpcError::UnknownMethod {
                        service: ::core::stringify!($name).into(),
                        method: other.into(),
                    }),
                }
            }
        }

        #[doc = "Typed client of [`" $name "`]."]
        #[derive(Clone)]
        $vis struct [<$name Client>] {
            client: $crate::Client,
            options: $crate::CallOptions,
        }

        impl [<$name Client>] {
            /// The service name on the wire.
            pub const SERVICE: &'static str = ::core::stringify!($name);

            /// Calls the service through `client`.
            pub fn new(client: $crate::Client) -> Self {
                Self { client, options: $crate::CallOptions::default() }
            }

            /// A copy whose calls use `options` (timeout, metadata, serializer).
            pub fn with_options(&self, options: $crate::CallOptions) -> Self {
                Self { client: self.client.clone(), options }
            }

            /// The untyped client underneath.
            pub fn client(&self) -> &$crate::Client {
                &self.client
            }

            $(
                $(#[$mattr])*
                pub async fn $method(&self $(, $arg: $argty)*)
                    -> ::core::result::Result<$crate::__service_ret!($($ret)?), $crate::RpcError>
                {
                    self.client
                        .call(Self::SERVICE, ::core::stringify!($method), &($($arg,)*), &self.options)
                        .await
                }
            )*
        }
    } };
}
