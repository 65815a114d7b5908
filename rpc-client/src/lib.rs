//! # rpc-client: calling brisk services
//!
//! This crate owns the caller's side: the [`Client`] (config, per-call options,
//! timeouts with precedence config < per-method < per-call, retries of transport
//! failures under `max_try_count`, client interceptors) and the three ways of
//! holding connections to a server address ([`connections`], chosen and sized
//! by [`Connect`]): `reused`, `pooled` and `fixed`. With several servers — a static `addrs` list or a
//! registry (`rpc-registry`) — the [`cluster`] keeps one endpoint per address,
//! follows the registry live, marks failing servers down and hands each attempt
//! to a [`balance`]r; a failed attempt is retried on another server. Each
//! call runs in an `rpc.client` tracing span (`call_span`) that carries its
//! trace context to the server. Request bodies are compressed when the config
//! asks (`compression`), answers opened as they arrive.
//!
//! It does not own sockets or framing (`rpc-transport`, `rpc-codec`) nor typed
//! service definitions (`#[brisk::service]` generates typed clients on top of
//! [`Client::call`]).
//!
//! ```no_run
//! # async fn run() -> Result<(), rpc_core::RpcError> {
//! use rpc_client::{CallOptions, Client, Connect};
//!
//! let client = Client::builder()
//!     .addr("127.0.0.1:9000")
//!     .connect(Connect::fixed(4))
//!     .build()
//!     .await?;
//! let greeting: String = client
//!     .call("Hello", "greet", &("brisk".to_string(),), &CallOptions::default())
//!     .await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod balance;
mod call_span;
pub mod client;
pub mod cluster;
pub mod config;
pub mod connect;
pub mod connections;
pub mod options;
mod streams;
#[cfg(feature = "tower")]
pub mod tower;

pub use balance::Balancer;
pub use client::{Client, ClientBuilder};
pub use cluster::EndpointStats;
pub use config::{ClientConfig, PoolHold, StaticAddr};
pub use connect::Connect;
pub use options::CallOptions;
