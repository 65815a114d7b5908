//! [`ClientConfig`]: every client setting with jkrpc's defaults, loadable from
//! TOML or YAML with the same keys.
//!
//! ```toml
//! addr = "127.0.0.1:9080"
//! connect_type = "fixed"        # reused | pooled | fixed
//! connections = 2               # fixed: connections per address
//! min_connections = 2           # pooled: kept open
//! max_connections = 10          # pooled: upper bound
//! pool_hold = "write"           # pooled: hold a connection for the write | until the response
//! pool_idle_timeout_ms = 60000  # pooled: idle connections above min are closed after this
//! lazy_connect = false
//! write_mode = "async"          # sync | async
//! serializer = "msgpack"        # msgpack | protobuf | json
//! request_timeout_ms = 5000
//! max_try_count = 2
//!
//! [method_timeouts_ms]
//! "BenchmarkService.get_message_from_db" = 10000
//!
//! [transport]
//! connect_timeout_ms = 500
//! ```

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use rpc_core::{ConnectType, RpcError, SerializerKind, WriteMode};
use rpc_transport::TransportConfig;
use serde::{Deserialize, Serialize};

/// How long a pooled connection is held by one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PoolHold {
    /// Only while the request is written (jkrpc): the response comes back on the
    /// connection by request id while others already use it.
    #[default]
    Write,
    /// Until the response arrives (Kitex/volo): one call per connection at a time.
    Response,
}

/// Client settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientConfig {
    /// Server address, `host:port`.
    pub addr: String,
    /// How connections are held.
    pub connect_type: ConnectType,
    /// `fixed`: connections per address (jkrpc default 2).
    pub connections: usize,
    /// `pooled`: connections kept open.
    pub min_connections: usize,
    /// `pooled`: most connections open at once.
    pub max_connections: usize,
    /// `pooled`: how long a call holds its connection.
    pub pool_hold: PoolHold,
    /// `pooled`: idle connections above `min_connections` are closed after this.
    #[serde(
        rename = "pool_idle_timeout_ms",
        with = "rpc_core::config::duration_ms"
    )]
    pub pool_idle_timeout: Duration,
    /// Do not connect until the first call (`fixed`, `pooled`).
    pub lazy_connect: bool,
    /// When a request counts as written.
    pub write_mode: WriteMode,
    /// Default serializer.
    pub serializer: SerializerKind,
    /// Default timeout of a call, retries included.
    #[serde(rename = "request_timeout_ms", with = "rpc_core::config::duration_ms")]
    pub request_timeout: Duration,
    /// Timeouts per method, keyed `Service.method`, in ms.
    #[serde(rename = "method_timeouts_ms")]
    pub method_timeouts: HashMap<String, u64>,
    /// Attempts per call (1 = no retry). Only transport failures are retried.
    pub max_try_count: u32,
    /// Socket-level settings.
    pub transport: TransportConfig,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            addr: "127.0.0.1:9080".into(),
            connect_type: ConnectType::Fixed,
            connections: 2,
            min_connections: 2,
            max_connections: 10,
            pool_hold: PoolHold::Write,
            pool_idle_timeout: Duration::from_secs(60),
            lazy_connect: false,
            write_mode: WriteMode::Async,
            serializer: SerializerKind::MsgPack,
            request_timeout: Duration::from_millis(5000),
            method_timeouts: HashMap::new(),
            max_try_count: 2,
            transport: TransportConfig::default(),
        }
    }
}

impl ClientConfig {
    /// Loads a config from a `.toml`, `.yaml` or `.yml` file and validates it.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, RpcError> {
        let config: ClientConfig = rpc_core::config::load_file(path)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every value; the error names the offending key.
    pub fn validate(&self) -> Result<(), RpcError> {
        if self.addr.is_empty() {
            return Err(RpcError::config("addr", "must be host:port"));
        }
        if self.connections == 0 {
            return Err(RpcError::config("connections", "must be at least 1"));
        }
        if self.max_connections == 0 {
            return Err(RpcError::config("max_connections", "must be at least 1"));
        }
        if self.min_connections > self.max_connections {
            return Err(RpcError::config(
                "min_connections",
                format!(
                    "{} is more than max_connections ({})",
                    self.min_connections, self.max_connections
                ),
            ));
        }
        rpc_core::config::nonzero_ms(
            "request_timeout_ms",
            self.request_timeout.as_millis() as u64,
        )?;
        for (key, ms) in &self.method_timeouts {
            if !key.contains('.') {
                return Err(RpcError::config(
                    format!("method_timeouts_ms.{key}"),
                    "keys are `Service.method`",
                ));
            }
            rpc_core::config::nonzero_ms(&format!("method_timeouts_ms.{key}"), *ms)?;
        }
        if self.max_try_count == 0 {
            return Err(RpcError::config(
                "max_try_count",
                "must be at least 1 (1 = no retry)",
            ));
        }
        self.transport.validate("transport.")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpc_core::config::{parse_str, ConfigFormat};

    #[test]
    fn defaults_are_jkrpcs() {
        let c = ClientConfig::default();
        assert_eq!(c.transport.connect_timeout, Duration::from_millis(500));
        assert_eq!(c.request_timeout, Duration::from_millis(5000));
        assert_eq!(c.max_try_count, 2);
        assert_eq!(c.connect_type, ConnectType::Fixed);
        assert_eq!(c.connections, 2);
        assert!(!c.lazy_connect);
        c.validate().unwrap();
    }

    #[test]
    fn toml_and_yaml_use_the_same_keys() {
        let t: ClientConfig = parse_str(
            "connect_type = \"pooled\"\nmax_connections = 4\nrequest_timeout_ms = 100\n[method_timeouts_ms]\n\"S.m\" = 7\n[transport]\nconnect_timeout_ms = 50\n",
            ConfigFormat::Toml,
        )
        .unwrap();
        let y: ClientConfig = parse_str(
            "connect_type: pooled\nmax_connections: 4\nrequest_timeout_ms: 100\nmethod_timeouts_ms:\n  S.m: 7\ntransport:\n  connect_timeout_ms: 50\n",
            ConfigFormat::Yaml,
        )
        .unwrap();
        assert_eq!(t, y);
        assert_eq!(t.transport.connect_timeout, Duration::from_millis(50));
        assert_eq!(t.method_timeouts["S.m"], 7);
    }

    #[test]
    fn bad_values_name_their_key() {
        let err =
            parse_str::<ClientConfig>("write_mode = \"later\"\n", ConfigFormat::Toml).unwrap_err();
        assert!(err.to_string().contains("`write_mode`"), "{err}");
        let c = ClientConfig {
            max_try_count: 0,
            ..ClientConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max_try_count"));
        let c = ClientConfig {
            min_connections: 20,
            ..ClientConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("min_connections"));
    }
}
