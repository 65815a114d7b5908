//! # brisk
//!
//! An RPC framework for tokio, with the connection modes, write modes and
//! worker pool of the Java framework jkrpc made into settings, and a built-in
//! benchmark suite that reproduces the classic Java NIO/RPC comparisons.
//!
//! This facade is the one dependency a user adds. It re-exports the crates:
//!
//! | crate | owns |
//! |-------|------|
//! | [`rpc_core`] | `RpcError`, metadata, modes, interceptors, config loading |
//! | [`codec`] | the frame format and the msgpack / protobuf / json serializers |
//! | [`transport`] | framed TCP: adaptive reads, coalesced writes, multiplexed connections, heartbeats |
//! | [`server`] | accept loop, routing, direct / worker-pool dispatch, graceful shutdown |
//! | [`client`] | reused / pooled / fixed connections, timeouts, retries, interceptors, load balancing and failover |
//! | [`registry`] | service registries: a static address list and etcd (feature `etcd`) |
//!
//! and defines [`service!`], which turns one trait into a typed client and a
//! one-line server registration.
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
    MemoryConfig, PoolConfig, QueueKind, Server, ServerBuilder, ServerConfig, ServerHandle,
    WorkerPool,
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
