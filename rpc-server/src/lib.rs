//! # rpc-server: accepting connections and running handlers
//!
//! This crate owns the server side of brisk: the accept loop and its connection
//! limits (`max_connections` with eviction of the connection longest without a
//! call, `max_connections_per_ip`; a refused client is told `TooManyConnections`),
//! one task per connection that reads request frames, the [`Router`] from
//! service name to [`ServiceHandler`](rpc_core::ServiceHandler), the two dispatch
//! modes — `direct` (the handler runs on the connection's I/O task) and `pool`
//! (the Tomcat-style [`WorkerPool`] of OS threads, with a `blocking` or
//! `transfer` queue) — server interceptors, graceful shutdown, and announcing
//! itself in a registry (`rpc-registry`) while it runs.
//!
//! It does not own the wire format (`rpc-codec`), sockets and batching
//! (`rpc-transport`) or the typed service definitions (the `brisk::service!`
//! macro).
//!
//! ```no_run
//! # async fn run(handler: impl rpc_core::ServiceHandler) -> Result<(), rpc_core::RpcError> {
//! use rpc_server::{Server, ServerConfig};
//!
//! let server = Server::builder()
//!     .config(ServerConfig::default().with_addr("127.0.0.1:9000"))
//!     .service(handler)
//!     .start()
//!     .await?;
//! println!("listening on {}", server.local_addr());
//! // Until SIGINT or SIGTERM, then a graceful shutdown.
//! server.shutdown_on_signals().await;
//! # Ok(()) }
//! ```

mod admission;
pub mod config;
mod connection;
mod ctx;
mod dispatch;
pub mod http;
pub mod method_metrics;
pub mod metrics;
mod panic;
pub mod pool;
mod refusal;
mod registration;
mod reply;
pub mod router;
pub mod server;
pub mod signals;
pub mod stats;
mod stop;

pub use config::{MemoryConfig, ServerConfig};
pub use metrics::Metrics;
pub use pool::{PoolConfig, QueueKind, WorkerPool};
pub use router::Router;
pub use server::{Server, ServerBuilder, ServerHandle, ShutdownReport};
pub use signals::{StopSignal, StopSignals};
pub use stats::ServerStats;
