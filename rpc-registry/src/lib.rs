//! # rpc-registry: finding brisk servers
//!
//! When one server is not enough, users run many; clients must then find them,
//! notice new ones and stop calling those that are gone. This crate owns that
//! bookkeeping and nothing else — it does not open RPC connections or pick a
//! server for a call (that is `rpc-client`'s balancer) and it does not serve
//! (that is `rpc-server`, which registers through it).
//!
//! The vocabulary:
//! - a [`ServiceInstance`] is one server of one service: service name, the
//!   `host:port` clients connect to, and a weight (its relative share of load);
//! - a [`Registry`] stores instances. Servers [`register`](Registry::register)
//!   and get a [`Registration`] that keeps the entries alive until it is
//!   [deregistered](Registration::deregister) (graceful shutdown) or dropped
//!   (a crash: the entries disappear when their lease expires);
//! - clients [`discover`](Registry::discover) and get a [`Discovery`]: the current
//!   instances and every later change, as whole snapshots.
//!
//! Two implementations:
//! - [`StaticRegistry`] — a fixed address list (the default when a client has no
//!   `registry` configured). It is also a working in-process registry:
//!   registrations and [`StaticRegistry::set`] reach every discovery at once, which
//!   makes it the tool for tests and single-process setups.
//! - `EtcdRegistry` (cargo feature `etcd`) — etcd v3 through the `etcd-client`
//!   crate. Each instance is a key
//!   `<root>/services/<Service>/<host:port>` whose value is JSON
//!   `{"addr":"host:port","weight":100}`, attached to a lease with a short TTL that
//!   the server keeps alive; discovery reads the prefix and then watches it.
//!   Without the feature nothing etcd-related is compiled and no `protoc` is needed.
//!
//! [`connect`] turns a registry URL (`etcd://127.0.0.1:2379/brisk?ttl_ms=3000`,
//! see [`RegistryUrl`]) into a registry, which is how config files name one.

#![warn(missing_docs)]

mod discovery;
#[cfg(feature = "etcd")]
pub mod etcd;
mod instance;
mod registration;
mod static_list;
mod url;

use std::sync::Arc;

use async_trait::async_trait;
use rpc_core::RpcError;

pub use discovery::{Discovery, Snapshot};
#[cfg(feature = "etcd")]
pub use etcd::EtcdRegistry;
pub use instance::{
    instance_key, instance_value, parse_instance, service_prefix, services_prefix, ServiceInstance,
    ANY_SERVICE, DEFAULT_WEIGHT,
};
pub use registration::{Registration, StopSignal};
pub use static_list::StaticRegistry;
pub use url::{EtcdOptions, RegistryUrl};

/// A place where servers announce themselves and clients look them up.
///
/// Implementations must never block a caller for long: every operation that
/// talks to the network is bounded by a timeout and reports
/// [`RpcError::ConnectTimeout`] / [`RpcError::Connect`] / [`RpcError::Io`]
/// naming the registry.
#[async_trait]
pub trait Registry: Send + Sync + 'static {
    /// Announces `instances` and keeps them announced until the returned
    /// [`Registration`] is deregistered or dropped.
    async fn register(&self, instances: Vec<ServiceInstance>) -> Result<Registration, RpcError>;

    /// The instances of `service` (every service when `None`), now and as they change.
    async fn discover(&self, service: Option<&str>) -> Result<Discovery, RpcError>;

    /// A short human description (`etcd://127.0.0.1:2379/brisk`, `static [a, b]`)
    /// for logs and error messages.
    fn describe(&self) -> String;
}

/// Connects to the registry a URL names (see [`RegistryUrl`] for the syntax).
///
/// With `etcd://…` this needs the `etcd` cargo feature; without it the error
/// says so. An unreachable etcd is an error within the URL's `timeout_ms`.
pub async fn connect(url: &str) -> Result<Arc<dyn Registry>, RpcError> {
    match RegistryUrl::parse(url).map_err(|reason| RpcError::config("registry", reason))? {
        RegistryUrl::Etcd(options) => connect_etcd(options).await,
    }
}

#[cfg(feature = "etcd")]
async fn connect_etcd(options: EtcdOptions) -> Result<Arc<dyn Registry>, RpcError> {
    Ok(Arc::new(EtcdRegistry::connect(options).await?))
}

#[cfg(not(feature = "etcd"))]
async fn connect_etcd(options: EtcdOptions) -> Result<Arc<dyn Registry>, RpcError> {
    Err(RpcError::config(
        "registry",
        format!(
            "{} needs etcd support, which this build does not include \
             (enable the `etcd` cargo feature of brisk)",
            options.url()
        ),
    ))
}

#[cfg(all(test, not(feature = "etcd")))]
mod tests {
    #[tokio::test]
    async fn etcd_without_the_feature_is_a_config_error() {
        let err = super::connect("etcd://127.0.0.1:2379").await.err().unwrap();
        let text = err.to_string();
        assert!(
            text.contains("`registry`") && text.contains("etcd"),
            "{text}"
        );
    }
}
