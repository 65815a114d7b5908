//! # rpc-server: accepting connections and running handlers
//!
//! This crate owns the server side of brisk: the accept loop and its connection
//! limits (`max_connections` with eviction of the connection longest without a
//! call, `max_connections_per_ip`; a refused client is told `TooManyConnections`),
//! one task per connection that reads request frames and writes their answers,
//! the [`Router`] from service name to
//! [`ServiceHandler`](rpc_core::ServiceHandler), the two dispatch modes —
//! `direct` (the handler runs on the connection's I/O task) and `pool` (the
//! Tomcat-style [`WorkerPool`] of OS threads, with a `blocking` or `transfer`
//! queue) — server interceptors, graceful shutdown, and announcing itself in a
//! registry (`rpc-registry`) while it runs.
//!
//! Batching answers is the connection task's own job: it handles every frame
//! already buffered, encodes the answers into its `Outbox` and writes them with
//! one `write` — a coalescing writer of its own, because a server connection
//! has one producer of answers. rpc-transport's writer task, built for many
//! callers sharing one connection, serves the client side.
//!
//! It does not own the wire format (`rpc-codec`), the frame reader, heartbeats,
//! TLS and the frame budget (`rpc-transport`), or the typed service
//! definitions (the `#[brisk::service]` macro).
//!
//! # Structure
//!
//! In the order a call passes through:
//!
//! 1. [`builder`] — settings, services, interceptors and tower layers, then
//!    `start`; `listener` — what it accepts on (TCP, or a Unix socket);
//!    [`server`] — the accept loop, the handle and shutdown;
//!    `admission` (connection limits, eviction) and `refusal` (telling a
//!    refused connection why) sit at its door.
//! 2. `connection` — one task per connection: reads a batch of frames, hands
//!    each call on, writes the batch's answers, busy-polls a lone caller,
//!    winds down on stop or eviction. The HTTP gateway
//!    (`http`, feature `http`) is the other door to the same calls.
//! 3. [`router`] — service and method name to handler.
//! 4. `dispatch` — runs one call: interceptors, tower layers (`layers`,
//!    feature `tower`) and handler inside its `rpc.server` span
//!    (`call_span`), panic containment, the outcome recorded; on the
//!    connection's task or, in pool mode, on the [`pool`], where a handler
//!    that awaits holds no worker while it waits (`dispatch::on_pool`).
//! 5. `reply` — the answer: its frame, the pool's hand-over buffer back to the
//!    connection (whose workers write it themselves on the plain socket a
//!    waiting connection lends them), the connection's coalescing `Outbox`.
//! 6. `stream` — streaming calls: a connection's open streams (routed by
//!    id), each run by its connection's task (interceptors, handler,
//!    deadline, one end), and the queue their frames go back through; the HTTP
//!    gateway reads server streams in process (`stream::LocalFlow`).
//!
//! Shared by all of them: `ctx` (the `ServerCtx` every task holds, with the
//! `Dispatcher` that says where calls run), `stop` (the server's stop level
//! and the means to wait for it), [`config`], [`stats`], [`metrics`] and
//! [`method_metrics`]; beside them [`signals`] (SIGINT/SIGTERM),
//! `registration` (the registry entries) and `panic` (a caught panic's
//! message).
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

#![warn(missing_docs)]

mod admission;
pub mod builder;
mod call_span;
pub mod config;
mod connection;
mod ctx;
mod dispatch;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "tower")]
pub mod layers;
mod listener;
pub mod method_metrics;
pub mod metrics;
mod panic;
pub mod pool;
mod refusal;
mod registration;
mod reply;
pub mod router;
pub mod server;
mod shard;
pub mod signals;
pub mod stats;
mod stop;
mod stream;
#[cfg(test)]
mod test_support;

pub use builder::{Server, ServerBuilder};
pub use config::{DispatchConfig, MemoryConfig, ServerConfig};
pub use metrics::Metrics;
pub use pool::{PoolConfig, QueueKind, WorkerPool};
/// The metrics crate `ServerBuilder::metrics_registry` takes a registry of:
/// use this one, so the versions match.
pub use prometheus_client;
pub use router::Router;
pub use server::{ServerHandle, ShutdownReport};
pub use signals::{StopSignal, StopSignals};
pub use stats::ServerStats;
