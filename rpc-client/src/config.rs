//! [`ClientConfig`]: every client setting with jkrpc's defaults, loadable from
//! TOML or YAML with the same keys.
//!
//! ```toml
//! addr = "127.0.0.1:9080"       # one server…
//! # addrs = ["10.0.0.1:9080", { addr = "10.0.0.2:9080", weight = 200 }]  # …or several
//! # registry = "etcd://127.0.0.1:2379/brisk"                              # …or discovered
//! # service = "BenchmarkService" # with a registry: watch only this service
//! balancer = "random"           # random | round_robin | consistent_hash | least_active
//! down_backoff_ms = 1000        # a failing server is avoided this long (doubling, up to 16×)
//! # How connections are held: the connect type and its own settings (see `Connect`).
//! connect = { type = "fixed", connections = 2, coalesce_calls = 16 }
//! # connect = { type = "pooled", min_connections = 2, max_connections = 10, hold = "write", idle_timeout_ms = 60000 }
//! # connect = { type = "reused" }
//! lazy_connect = false          # fixed, pooled: connect on the first call
//! write_mode = "async"          # sync | async
//! serializer = "msgpack"        # msgpack | protobuf | json
//! request_timeout_ms = 5000
//! max_try_count = 2
//! idempotent_methods = ["BenchmarkService.get_message_from_cache", "Search.*"]  # may run twice
//!
//! [method_timeouts_ms]
//! "BenchmarkService.get_message_from_db" = 10000
//!
//! connect_timeout_ms = 500         # TCP connect (and TLS handshake) timeout
//! write_queue_capacity = 4096       # frames queued per connection before callers wait
//! busy_poll_us = 200                # a lone caller's answer is polled for (0: never)
//!
//! [compression]                     # requests of 1 KiB or more, and their answers
//! algorithm = "zstd"                # none (default) | gzip | zstd
//! min_size = 1024
//!
//! [transport]                       # the settings a server has too
//! max_frame_size = 16777216
//! ```

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use rpc_core::{CompressionConfig, RpcError, SerializerKind, WriteMode};
use rpc_registry::{RegistryUrl, DEFAULT_WEIGHT};
use rpc_transport::{ClientTransport, TransportConfig};
use serde::{Deserialize, Serialize};

use crate::balance::Balancer;
use crate::connect::Connect;
pub use crate::connect::PoolHold;

/// One entry of a static server list: `"host:port"`, or
/// `{ addr = "host:port", weight = 200 }` in a config file.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "StaticAddrRepr", into = "StaticAddrRepr")]
pub struct StaticAddr {
    /// `host:port`, or `unix:/path/to.sock`.
    pub addr: String,
    /// Relative share of the load (default 100).
    pub weight: u32,
}

impl StaticAddr {
    /// An address with the default weight.
    pub fn new(addr: impl Into<String>) -> Self {
        StaticAddr {
            addr: addr.into(),
            weight: DEFAULT_WEIGHT,
        }
    }

    /// An address with a weight.
    pub fn weighted(addr: impl Into<String>, weight: u32) -> Self {
        StaticAddr {
            addr: addr.into(),
            weight,
        }
    }
}

impl From<&str> for StaticAddr {
    fn from(addr: &str) -> Self {
        StaticAddr::new(addr)
    }
}

impl From<String> for StaticAddr {
    fn from(addr: String) -> Self {
        StaticAddr::new(addr)
    }
}

/// How a [`StaticAddr`] is written: a plain string when the weight is the default.
#[derive(Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "\"host:port\" or { addr = \"host:port\", weight = N }"
)]
enum StaticAddrRepr {
    Plain(String),
    Weighted(WeightedRepr),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WeightedRepr {
    addr: String,
    #[serde(default = "default_weight")]
    weight: u32,
}

fn default_weight() -> u32 {
    DEFAULT_WEIGHT
}

impl From<StaticAddrRepr> for StaticAddr {
    fn from(r: StaticAddrRepr) -> Self {
        match r {
            StaticAddrRepr::Plain(addr) => StaticAddr::new(addr),
            StaticAddrRepr::Weighted(w) => StaticAddr::weighted(w.addr, w.weight),
        }
    }
}

impl From<StaticAddr> for StaticAddrRepr {
    fn from(a: StaticAddr) -> Self {
        if a.weight == DEFAULT_WEIGHT {
            StaticAddrRepr::Plain(a.addr)
        } else {
            StaticAddrRepr::Weighted(WeightedRepr {
                addr: a.addr,
                weight: a.weight,
            })
        }
    }
}

/// Client settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientConfig {
    /// Server address, `host:port` or `unix:/path/to.sock` (the whole list
    /// when `addrs` is empty).
    pub addr: String,
    /// Several servers (then `addr` is ignored).
    pub addrs: Vec<StaticAddr>,
    /// How calls are spread over several servers.
    pub balancer: Balancer,
    /// Discover the servers in this registry (`etcd://host:port/root`) instead
    /// of listing them; see `rpc_registry::RegistryUrl`.
    pub registry: Option<String>,
    /// With a registry: follow only this service's servers (default: every service's).
    pub service: Option<String>,
    /// A server that failed is avoided this long, doubling while it keeps
    /// failing (up to 16×); then one call probes it.
    #[serde(rename = "down_backoff_ms", with = "rpc_core::config::duration_ms")]
    pub down_backoff: Duration,
    /// How connections are held: the connect type with its own settings.
    pub connect: Connect,
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
    /// Attempts per call (1 = no retry), on another server when there is one.
    /// A call is tried again only when the server cannot have run it (the
    /// connect failed, the request never left, or the answer was
    /// `ShuttingDown`), or — for an [idempotent](Self::idempotent_methods)
    /// method — after any transport failure, such as a connection that closed
    /// with the call in flight.
    pub max_try_count: u32,
    /// Methods that may safely run twice, keyed `Service.method` (or
    /// `Service.*` for all of a service's methods): they are retried after
    /// transport failures that may have happened after the server ran them.
    /// `CallOptions::idempotent` says the same for one call.
    pub idempotent_methods: Vec<String>,
    /// TCP connect timeout, TLS handshake included (jkrpc: 500 ms).
    #[serde(rename = "connect_timeout_ms", with = "rpc_core::config::duration_ms")]
    pub connect_timeout: Duration,
    /// Frames that may wait in a connection's write buffer; callers wait for
    /// room when it is full.
    pub write_queue_capacity: usize,
    /// How long a connection whose last two answers each came within this
    /// time of the one before (the caller's own time between calls
    /// included) polls for the next answer (reading its socket itself)
    /// before its reader parks, while at most one call is in flight on the
    /// client: a lone caller's round trip without the client's wake-up, for
    /// up to this much of a thread's CPU per answer (`0`: never; at most
    /// [`BusyPoll::MAX_LIMIT`](rpc_transport::BusyPoll::MAX_LIMIT); TLS only on a one-worker runtime).
    #[serde(rename = "busy_poll_us", with = "rpc_core::config::duration_us")]
    pub busy_poll: Duration,
    /// Items of a server stream this client takes before it reads any: what
    /// one stream may have in flight towards it (256).
    pub stream_window: u32,
    /// Compress request bodies of at least `min_size` bytes and ask for the
    /// answers compressed the same way (default: off). The server answers in
    /// kind or, when it has compression off, plainly.
    pub compression: CompressionConfig,
    /// Socket-level settings a server has too.
    pub transport: TransportConfig,
    /// Connect with TLS, trusting the CAs in `ca_path` and expecting
    /// `server_name` in the server certificate (feature `tls`;
    /// `ClientBuilder::tls` takes a ready rustls config instead).
    #[cfg(feature = "tls")]
    pub tls: Option<rpc_transport::tls::TlsClientConfig>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            addr: "127.0.0.1:9080".into(),
            addrs: Vec::new(),
            balancer: Balancer::Random,
            registry: None,
            service: None,
            down_backoff: Duration::from_millis(1000),
            connect: Connect::default(),
            lazy_connect: false,
            write_mode: WriteMode::Async,
            serializer: SerializerKind::MsgPack,
            request_timeout: Duration::from_millis(5000),
            method_timeouts: HashMap::new(),
            max_try_count: 2,
            idempotent_methods: Vec::new(),
            connect_timeout: ClientTransport::DEFAULT_CONNECT_TIMEOUT,
            write_queue_capacity: ClientTransport::DEFAULT_WRITE_QUEUE_CAPACITY,
            busy_poll: ClientTransport::DEFAULT_BUSY_POLL,
            stream_window: rpc_core::stream::DEFAULT_WINDOW,
            compression: CompressionConfig::default(),
            transport: TransportConfig::default(),
            #[cfg(feature = "tls")]
            tls: None,
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

    /// The static server list: `addrs`, or `addr` alone when `addrs` is empty.
    pub fn static_addrs(&self) -> Vec<StaticAddr> {
        if self.addrs.is_empty() {
            vec![StaticAddr::new(self.addr.clone())]
        } else {
            self.addrs.clone()
        }
    }

    /// Checks every value; the error names the offending key.
    pub fn validate(&self) -> Result<(), RpcError> {
        if self.addr.is_empty() {
            return Err(RpcError::config(
                "addr",
                "must be host:port or unix:/path/to.sock",
            ));
        }
        for (i, a) in self.addrs.iter().enumerate() {
            if a.addr.is_empty() {
                return Err(RpcError::config(
                    format!("addrs[{i}]"),
                    "must be host:port or unix:/path/to.sock",
                ));
            }
            if a.weight == 0 {
                return Err(RpcError::config(
                    format!("addrs[{i}].weight"),
                    "must be at least 1",
                ));
            }
            if self.addrs[..i].iter().any(|b| b.addr == a.addr) {
                return Err(RpcError::config(
                    format!("addrs[{i}]"),
                    format!("{} is listed twice", a.addr),
                ));
            }
        }
        if let Some(url) = &self.registry {
            RegistryUrl::parse(url).map_err(|reason| RpcError::config("registry", reason))?;
            if !self.addrs.is_empty() {
                return Err(RpcError::config(
                    "addrs",
                    "give either a static `addrs` list or a `registry`, not both",
                ));
            }
        }
        if self.service.as_deref() == Some("") {
            return Err(RpcError::config(
                "service",
                "must be a service name (or left out for every service)",
            ));
        }
        rpc_core::config::nonzero_ms("down_backoff_ms", self.down_backoff.as_millis() as u64)?;
        self.connect.validate()?;
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
        for (i, key) in self.idempotent_methods.iter().enumerate() {
            let valid = key
                .split_once('.')
                .is_some_and(|(service, method)| !service.is_empty() && !method.is_empty());
            if !valid {
                return Err(RpcError::config(
                    format!("idempotent_methods[{i}]"),
                    format!("`{key}` is not `Service.method` or `Service.*`"),
                ));
            }
        }
        if self.max_try_count == 0 {
            return Err(RpcError::config(
                "max_try_count",
                "must be at least 1 (1 = no retry)",
            ));
        }
        rpc_core::config::nonzero_ms(
            "connect_timeout_ms",
            self.connect_timeout.as_millis() as u64,
        )?;
        if self.write_queue_capacity == 0 {
            return Err(RpcError::config(
                "write_queue_capacity",
                "must be at least 1",
            ));
        }
        rpc_transport::BusyPoll::validate_limit(self.busy_poll)?;
        rpc_codec::compression::BodyCompressor::from_config(&self.compression, "compression")?;
        self.transport.validate("transport.")
    }

    /// What this client's connections are opened with (no TLS: the builder
    /// adds its connector).
    pub fn client_transport(&self) -> ClientTransport {
        let mut transport = ClientTransport::default();
        transport.shared = self.transport.clone();
        transport.connect_timeout = self.connect_timeout;
        transport.write_queue_capacity = self.write_queue_capacity;
        transport.busy_poll = self.busy_poll;
        transport
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpc_core::config::{parse_str, ConfigFormat};
    use rpc_core::ConnectType;

    #[test]
    fn defaults_are_jkrpcs() {
        let c = ClientConfig::default();
        assert_eq!(c.connect_timeout, Duration::from_millis(500));
        assert_eq!(c.request_timeout, Duration::from_millis(5000));
        assert_eq!(c.max_try_count, 2);
        assert_eq!(c.connect, Connect::fixed(2));
        assert_eq!(c.connect.connect_type(), ConnectType::Fixed);
        assert!(!c.lazy_connect);
        c.validate().unwrap();
    }

    #[test]
    fn toml_and_yaml_use_the_same_keys() {
        let t: ClientConfig = parse_str(
            "connect = { type = \"pooled\", max_connections = 4 }\nrequest_timeout_ms = 100\nconnect_timeout_ms = 50\n[method_timeouts_ms]\n\"S.m\" = 7\n",
            ConfigFormat::Toml,
        )
        .unwrap();
        let y: ClientConfig = parse_str(
            "connect:\n  type: pooled\n  max_connections: 4\nrequest_timeout_ms: 100\nconnect_timeout_ms: 50\nmethod_timeouts_ms:\n  S.m: 7\n",
            ConfigFormat::Yaml,
        )
        .unwrap();
        assert_eq!(t, y);
        assert_eq!(t.connect_timeout, Duration::from_millis(50));
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
            connect: Connect::pooled(20, 10),
            ..ClientConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("min_connections"));
        let c: ClientConfig = parse_str("busy_poll_us = 5000\n", ConfigFormat::Toml).unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.contains("busy_poll_us") && err.contains("at most 1000"),
            "{err}"
        );
    }

    #[test]
    fn busy_poll_is_in_microseconds_and_reaches_the_transport() {
        assert_eq!(
            ClientConfig::default().busy_poll,
            Duration::from_micros(200)
        );
        let c: ClientConfig = parse_str("busy_poll_us = 0\n", ConfigFormat::Toml).unwrap();
        assert!(c.validate().is_ok());
        assert_eq!(c.client_transport().busy_poll, Duration::ZERO);
        let c: ClientConfig = parse_str("busy_poll_us = 20\n", ConfigFormat::Toml).unwrap();
        assert_eq!(c.client_transport().busy_poll, Duration::from_micros(20));
    }

    #[test]
    fn server_lists_registries_and_balancers() {
        let t: ClientConfig = parse_str(
            "addrs = [\"a:1\", { addr = \"b:2\", weight = 300 }]\nbalancer = \"consistent_hash\"\ndown_backoff_ms = 250\n",
            ConfigFormat::Toml,
        )
        .unwrap();
        let y: ClientConfig = parse_str(
            "addrs:\n  - a:1\n  - addr: b:2\n    weight: 300\nbalancer: consistent_hash\ndown_backoff_ms: 250\n",
            ConfigFormat::Yaml,
        )
        .unwrap();
        assert_eq!(t, y);
        assert_eq!(
            t.static_addrs(),
            [StaticAddr::new("a:1"), StaticAddr::weighted("b:2", 300)]
        );
        assert_eq!(t.balancer, Balancer::ConsistentHash);
        t.validate().unwrap();
        // Round trip: plain strings stay plain.
        let text = toml::to_string(&t).unwrap();
        assert!(text.contains("\"a:1\""), "{text}");
        assert_eq!(
            parse_str::<ClientConfig>(&text, ConfigFormat::Toml).unwrap(),
            t
        );

        // `addr` alone is a one-element list.
        let d = ClientConfig::default();
        assert_eq!(d.static_addrs(), [StaticAddr::new("127.0.0.1:9080")]);
        assert_eq!(d.balancer, Balancer::Random);
        assert_eq!(d.registry, None);

        let r: ClientConfig = parse_str(
            "registry = \"etcd://127.0.0.1:2379/brisk\"\nservice = \"Hello\"\n",
            ConfigFormat::Toml,
        )
        .unwrap();
        r.validate().unwrap();
    }

    #[test]
    fn cluster_values_name_their_key() {
        let err =
            parse_str::<ClientConfig>("balancer = \"fastest\"\n", ConfigFormat::Toml).unwrap_err();
        assert!(err.to_string().contains("`balancer`"), "{err}");
        let err = parse_str::<ClientConfig>("addrs = [{ host = \"a\" }]\n", ConfigFormat::Toml)
            .unwrap_err();
        assert!(err.to_string().contains("`addrs[0]`"), "{err}");
        for (config, key) in [
            (
                ClientConfig {
                    registry: Some("zookeeper://x:1".into()),
                    ..ClientConfig::default()
                },
                "`registry`",
            ),
            (
                ClientConfig {
                    registry: Some("etcd://x:1".into()),
                    addrs: vec!["a:1".into()],
                    ..ClientConfig::default()
                },
                "`addrs`",
            ),
            (
                ClientConfig {
                    addrs: vec!["a:1".into(), "a:1".into()],
                    ..ClientConfig::default()
                },
                "`addrs[1]`",
            ),
            (
                ClientConfig {
                    addrs: vec![StaticAddr::weighted("a:1", 0)],
                    ..ClientConfig::default()
                },
                "`addrs[0].weight`",
            ),
            (
                ClientConfig {
                    service: Some(String::new()),
                    ..ClientConfig::default()
                },
                "`service`",
            ),
            (
                ClientConfig {
                    down_backoff: Duration::ZERO,
                    ..ClientConfig::default()
                },
                "`down_backoff_ms`",
            ),
            (
                ClientConfig {
                    connect: Connect::Fixed {
                        connections: 2,
                        coalesce_calls: 0,
                    },
                    ..ClientConfig::default()
                },
                "`connect.coalesce_calls`",
            ),
        ] {
            let err = config.validate().unwrap_err().to_string();
            assert!(err.contains(key), "{key}: {err}");
        }
    }
}
