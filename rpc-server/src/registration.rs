//! Announcing a started server in a registry.
//!
//! [`ServerBuilder::start`](crate::ServerBuilder::start) calls [`register`]
//! once the listener is bound (so the port is known, even with port 0): every
//! service of the router is registered at the advertised address with the
//! configured weight. The [`Registration`] lives in the
//! [`ServerHandle`](crate::ServerHandle): a graceful
//! [`shutdown`](crate::ServerHandle::shutdown) deregisters *first*, so clients
//! stop choosing the server before it stops accepting; dropping the handle
//! drops the registration without deregistering, as a crash would, and a
//! registry with leases (etcd) removes the entries when the lease expires.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rpc_core::RpcError;
use rpc_registry::{Registration, Registry, ServiceInstance};
use tracing::{info, warn};

use crate::ServerConfig;

/// Registers `services` in the builder's registry, else in the config's
/// `registry` URL; `Ok(None)` when neither is set.
pub(crate) async fn register(
    config: &ServerConfig,
    registry: Option<Arc<dyn Registry>>,
    services: Vec<&'static str>,
    local_addr: SocketAddr,
) -> Result<Option<Registration>, RpcError> {
    let registry = match (registry, &config.registry) {
        (Some(registry), _) => registry,
        (None, Some(url)) => rpc_registry::connect(url).await?,
        (None, None) => return Ok(None),
    };
    if services.is_empty() {
        warn!(registry = %registry.describe(), "no service to register");
        return Ok(None);
    }
    let addr = advertised_addr(config.advertise_addr.as_deref(), local_addr)?;
    let instances: Vec<ServiceInstance> = services
        .iter()
        .map(|s| ServiceInstance::new(*s, addr.clone()).with_weight(config.weight))
        .collect();
    let registration = registry.register(instances).await?;
    info!(registry = %registry.describe(), %addr, ?services, weight = config.weight, "registered");
    Ok(Some(registration))
}

/// The address to register: `advertise` (`host`, `ip` or `host:port`; without a
/// port the bound one is used), else the bound address unless it is a wildcard.
pub(crate) fn advertised_addr(
    advertise: Option<&str>,
    local: SocketAddr,
) -> Result<String, RpcError> {
    let port = local.port();
    match advertise {
        Some(a) => {
            if a.parse::<SocketAddr>().is_ok() {
                Ok(a.to_owned())
            } else if let Ok(ip) = a.trim_matches(['[', ']']).parse::<IpAddr>() {
                Ok(SocketAddr::new(ip, port).to_string())
            } else if a
                .rsplit_once(':')
                .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
            {
                Ok(a.to_owned())
            } else {
                Ok(format!("{a}:{port}"))
            }
        }
        None if local.ip().is_unspecified() => Err(RpcError::config(
            "advertise_addr",
            format!(
                "the server listens on {local}, which clients cannot connect to; \
                 set the address they should use (host or host:port)"
            ),
        )),
        None => Ok(local.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_advertised_address_defaults_to_the_bound_one() {
        let bound: SocketAddr = "127.0.0.1:9000".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:9000".parse().unwrap();
        assert_eq!(advertised_addr(None, bound).unwrap(), "127.0.0.1:9000");
        assert!(advertised_addr(None, any)
            .unwrap_err()
            .to_string()
            .contains("`advertise_addr`"));
        for (given, expect) in [
            ("10.0.0.5", "10.0.0.5:9000"),
            ("10.0.0.5:7000", "10.0.0.5:7000"),
            ("::1", "[::1]:9000"),
            ("[::1]:7000", "[::1]:7000"),
            ("app-3.internal", "app-3.internal:9000"),
            ("app-3.internal:7000", "app-3.internal:7000"),
        ] {
            assert_eq!(
                advertised_addr(Some(given), any).unwrap(),
                expect,
                "{given}"
            );
        }
    }
}
