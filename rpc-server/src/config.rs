//! [`ServerConfig`]: every server setting, with jkrpc's defaults, loadable from
//! TOML or YAML with the same keys.
//!
//! ```toml
//! addr = "0.0.0.0:9080"
//! http_addr = "0.0.0.0:9081"       # optional: HTTP/JSON, /health, /metrics
//! registry = "etcd://127.0.0.1:2379/brisk?ttl_ms=10000"  # optional: register every service
//! advertise_addr = "10.0.0.5"       # what clients connect to (host or host:port; needed with 0.0.0.0)
//! weight = 100                      # this server's share of the load
//! # Where handlers run: on the connection's task (direct), or on the worker
//! # pool with its own settings (defaults: CPUs core threads, core × 8 max,
//! # queue_size 100000, keep_alive_ms 60000, queue "transfer").
//! dispatch = { type = "pool", core_threads = 2, max_threads = 16, queue = "transfer" }
//! # dispatch = { type = "direct" }
//! max_connections = 10000         # at the limit the connection longest without a call
//!                                   # (1 s at least) makes room, else the newcomer is refused
//! max_connections_per_ip = 100      # optional; default: no per-address cap
//! max_in_flight_per_connection = 4096
//! shutdown_grace_ms = 10000
//!
//! [compression]                     # answers, in what each caller asks for
//! answers = true
//! min_size = 1024
//!
//! [memory]
//! frame_budget = 268435456          # bytes large request frames may hold, all connections together
//! return_to_os = true               # glibc: map blocks ≥ 1 MiB on their own (process-wide)
//!
//! [transport]
//! max_frame_size = 16777216
//! idle_timeout_ms = 60000
//! ```

use std::path::Path;
use std::time::Duration;

use rpc_codec::compression::BodyCompressor;
use rpc_core::stream::StreamConfig;
use rpc_core::{Compression, CompressionConfig, Dispatch, RpcError};
use rpc_transport::TransportConfig;
use serde::{Deserialize, Serialize};

use crate::pool::PoolConfig;

/// Server settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on: `host:port` (port 0 picks a free one), or
    /// `unix:/path/to.sock` for a Unix domain socket (the path must not exist;
    /// the server removes the file when it stops).
    pub addr: String,
    /// Also serve the HTTP/JSON protocol, `/health` and `/metrics` on this address.
    pub http_addr: Option<String>,
    /// Register every service in this registry at start and deregister at
    /// graceful shutdown (`etcd://host:port/root`; see `rpc_registry::RegistryUrl`).
    pub registry: Option<String>,
    /// The address clients should connect to, `host` or `host:port` (default:
    /// the bound address; required when listening on `0.0.0.0` / `[::]`).
    pub advertise_addr: Option<String>,
    /// This server's relative share of the load, as registered.
    pub weight: u32,
    /// Where handlers run, with the worker pool's settings when it is the pool.
    pub dispatch: DispatchConfig,
    /// Connections served at once. A connection arriving at the limit takes
    /// the place of the open connection that has gone longest without a call
    /// (pings are not calls), if that is at least 1 s (or `idle_timeout`, when
    /// shorter) and it has no call in progress; that connection is told
    /// `TooManyConnections` and closed. When none qualifies, the newcomer is
    /// refused with `TooManyConnections` naming this limit.
    pub max_connections: usize,
    /// Connections served at once from one peer IP address; beyond it a new
    /// connection from that address is refused with `TooManyConnections`
    /// naming this limit (nobody is evicted for it). Default: no cap (`None`,
    /// the key left out), because many legitimate clients often share one
    /// address — behind a NAT, a load balancer or a sidecar proxy, or every
    /// local client on loopback — and a default cap would refuse them;
    /// `max_connections` with eviction already keeps one address from locking
    /// everyone out. Set it when clients reach the server directly.
    pub max_connections_per_ip: Option<usize>,
    /// Requests one connection may have in progress; beyond it the server stops
    /// reading that connection until one completes (TCP pushes back on the client).
    pub max_in_flight_per_connection: usize,
    /// How long a connection whose client came back within this time twice
    /// in a row polls for the client's next frame before its task parks
    /// (`0`: never): a lone caller's round trip without the wake-ups. For a
    /// connection whose calls do not go to the worker pool and with none
    /// pending on it; a TLS connection only on a runtime with one worker
    /// thread; none while more connections than one per two runtime threads
    /// are in rhythm ([`rpc_transport::PollGroup`]); at most
    /// [`ServerConfig::MAX_BUSY_POLL`].
    #[serde(rename = "busy_poll_us", with = "rpc_core::config::duration_us")]
    pub busy_poll: Duration,
    /// What large frames may hold, and whether freed memory goes back to the system.
    pub memory: MemoryConfig,
    /// Streaming calls: the flow window and how many one connection may open.
    pub streams: StreamConfig,
    /// Compressed answers: whether the server answers in the compression a
    /// caller asks for, and from what size.
    pub compression: AnswerCompression,
    /// How long graceful shutdown waits for in-flight calls before closing anyway.
    #[serde(rename = "shutdown_grace_ms", with = "rpc_core::config::duration_ms")]
    pub shutdown_grace: Duration,
    /// Socket-level settings.
    pub transport: TransportConfig,
    /// Serve the binary protocol over TLS with this certificate and key
    /// (feature `tls`; `ServerBuilder::tls` takes a ready rustls config instead).
    #[cfg(feature = "tls")]
    pub tls: Option<rpc_transport::tls::TlsServerConfig>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            addr: "127.0.0.1:9080".into(),
            http_addr: None,
            registry: None,
            advertise_addr: None,
            weight: rpc_registry::DEFAULT_WEIGHT,
            dispatch: DispatchConfig::default(),
            max_connections: 10_000,
            max_connections_per_ip: None,
            max_in_flight_per_connection: 4096,
            busy_poll: Duration::from_micros(200),
            memory: MemoryConfig::default(),
            streams: StreamConfig::default(),
            compression: AnswerCompression::default(),
            shutdown_grace: Duration::from_secs(10),
            transport: TransportConfig::default(),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

/// How much memory large frames may hold, and whether it goes back to the
/// operating system once freed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// Bytes that large request frames (over `transport.read_buffer_max`) may
    /// hold at once, across every connection (256 MiB). A request holds its
    /// share from the moment its body is read until its answer is written, so
    /// an answer about as large as its request is covered too. A connection
    /// whose next large frame does not fit is not read until calls finish and
    /// give their share back; TCP pushes back on its client meanwhile. Size it
    /// as the large calls you want in progress at once × their size; a frame
    /// larger than the whole budget waits until it has all of it.
    pub frame_budget: usize,
    /// With glibc, map every block of 1 MiB or more on its own, so freed frames
    /// leave the process at once instead of staying in the allocator's heaps,
    /// and let each heap keep up to 2 MiB free at its top, so busy
    /// connections do not fault the same pages back in turn after turn, and
    /// trim freed memory when connections go quiet (at most once a second)
    /// (true). These are process-wide allocator settings, made at `start()`;
    /// turn it off if the process tunes `malloc` itself. Other allocators
    /// (jemalloc, mimalloc) and platforms ignore it.
    pub return_to_os: bool,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            frame_budget: 256 << 20,
            return_to_os: true,
        }
    }
}

impl ServerConfig {
    /// The largest `busy_poll` accepted ([`rpc_transport::BusyPoll::MAX_LIMIT`]).
    pub const MAX_BUSY_POLL: Duration = rpc_transport::BusyPoll::MAX_LIMIT;

    /// Loads a config from a `.toml`, `.yaml` or `.yml` file and validates it.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, RpcError> {
        let config: ServerConfig = rpc_core::config::load_file(path)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every value; the error names the offending key.
    pub fn validate(&self) -> Result<(), RpcError> {
        if self.addr.is_empty() {
            return Err(RpcError::config(
                "addr",
                "must be host:port or unix:/path/to.sock",
            ));
        }
        if let DispatchConfig::Pool(pool) = &self.dispatch {
            pool.validate()
                .map_err(|reason| RpcError::config("dispatch", reason))?;
        }
        if let Some(url) = &self.registry {
            rpc_registry::RegistryUrl::parse(url)
                .map_err(|reason| RpcError::config("registry", reason))?;
        }
        if self.advertise_addr.as_deref() == Some("") {
            return Err(RpcError::config(
                "advertise_addr",
                "must be host or host:port (or left out)",
            ));
        }
        if self.weight == 0 {
            return Err(RpcError::config("weight", "must be at least 1"));
        }
        if self.max_connections == 0 {
            return Err(RpcError::config("max_connections", "must be at least 1"));
        }
        if self.max_connections_per_ip == Some(0) {
            return Err(RpcError::config(
                "max_connections_per_ip",
                "must be at least 1 (leave it out for no per-address cap)",
            ));
        }
        rpc_transport::BusyPoll::validate_limit(self.busy_poll)?;
        if self.max_in_flight_per_connection == 0 {
            return Err(RpcError::config(
                "max_in_flight_per_connection",
                "must be at least 1",
            ));
        }
        if self.memory.frame_budget == 0 {
            return Err(RpcError::config(
                "memory.frame_budget",
                "must be at least 1 byte (it bounds the bytes held by large request frames)",
            ));
        }
        self.compression.validate()?;
        self.transport.validate("transport.")
    }

    /// Sets the listen address.
    pub fn with_addr(mut self, addr: impl Into<String>) -> Self {
        self.addr = addr.into();
        self
    }

    /// Also serves HTTP/JSON on `addr`.
    pub fn with_http_addr(mut self, addr: impl Into<String>) -> Self {
        self.http_addr = Some(addr.into());
        self
    }

    /// Sets the dispatch mode; see [`DispatchConfig::set_mode`].
    pub fn with_dispatch(mut self, dispatch: Dispatch) -> Self {
        self.dispatch.set_mode(dispatch);
        self
    }

    /// Runs handlers on a worker pool with these settings.
    pub fn with_pool(mut self, pool: PoolConfig) -> Self {
        self.dispatch = DispatchConfig::Pool(pool);
        self
    }
}

/// How a server compresses its answers. It always reads compressed requests
/// (in the algorithms the build has); an answer is compressed only in the
/// algorithm its request asked for (a client's `compression`), and only when
/// `answers` is on and the body is at least `min_size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnswerCompression {
    /// Answer in the compression the caller asks for (true); off, every
    /// answer goes plain (a server short of CPU, say).
    pub answers: bool,
    /// Answers smaller than this many bytes go plain (1024).
    pub min_size: usize,
    /// The level: zstd's (1..=22, or negative for faster still); gzip takes
    /// the nearest of 0..=9. Default 1, the fast end of both.
    pub level: i32,
}

impl Default for AnswerCompression {
    fn default() -> Self {
        AnswerCompression {
            answers: true,
            min_size: CompressionConfig::DEFAULT_MIN_SIZE,
            level: CompressionConfig::DEFAULT_LEVEL,
        }
    }
}

impl AnswerCompression {
    /// Checks the level; the error names the key.
    pub fn validate(&self) -> Result<(), RpcError> {
        // zstd's range (gzip takes the nearest of its own).
        let levels = rpc_codec::compression::ZSTD_LEVELS;
        if !levels.contains(&self.level) {
            return Err(RpcError::config(
                "compression.level",
                format!(
                    "must be within {levels:?} (zstd's levels), not {}",
                    self.level
                ),
            ));
        }
        Ok(())
    }

    /// The algorithm to answer a request with these flags in: the one it
    /// asks for, when this server answers compressed and has it
    /// ([`Compression::None`] otherwise). One mask test in the usual case.
    #[inline]
    pub(crate) fn answer_in(&self, flags: u8) -> Compression {
        // The flags first (inline, one mask test): a request that asks for
        // nothing, the usual case, does not touch the settings.
        match rpc_codec::compression::accepted(flags) {
            Compression::None => Compression::None,
            _ if !self.answers => Compression::None,
            algorithm => algorithm,
        }
    }

    /// The compressor of an answer in `algorithm`, with these settings.
    pub(crate) fn compressor(&self, algorithm: Compression) -> BodyCompressor {
        BodyCompressor::new(algorithm, self.min_size, self.level)
    }
}

/// Where handlers run, with the worker pool's own settings inside pool
/// dispatch (a setting for a pool that does not run cannot be written).
///
/// In a file: `dispatch = { type = "direct" }` or
/// `dispatch = { type = "pool", core_threads = 4, queue = "blocking" }`
/// (every pool key has its default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "DispatchRepr", into = "DispatchRepr")]
pub enum DispatchConfig {
    /// On the connection's own task (jkrpc's "handle in the I/O thread").
    Direct,
    /// On the Tomcat-style worker pool.
    Pool(PoolConfig),
}

/// How [`DispatchConfig`] is written: tagged by `type`, and (unlike a unit
/// variant) refusing keys of the other mode.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
enum DispatchRepr {
    Direct {},
    Pool(PoolConfig),
}

impl From<DispatchRepr> for DispatchConfig {
    fn from(repr: DispatchRepr) -> Self {
        match repr {
            DispatchRepr::Direct {} => DispatchConfig::Direct,
            DispatchRepr::Pool(pool) => DispatchConfig::Pool(pool),
        }
    }
}

impl From<DispatchConfig> for DispatchRepr {
    fn from(config: DispatchConfig) -> Self {
        match config {
            DispatchConfig::Direct => DispatchRepr::Direct {},
            DispatchConfig::Pool(pool) => DispatchRepr::Pool(pool),
        }
    }
}

impl Default for DispatchConfig {
    fn default() -> Self {
        DispatchConfig::Pool(PoolConfig::default())
    }
}

impl DispatchConfig {
    /// `mode`, with `pool` as the pool's settings when it is pool dispatch.
    pub fn new(mode: Dispatch, pool: PoolConfig) -> Self {
        match mode {
            Dispatch::Direct => DispatchConfig::Direct,
            Dispatch::Pool => DispatchConfig::Pool(pool),
        }
    }

    /// The mode, without its settings.
    pub fn mode(&self) -> Dispatch {
        match self {
            DispatchConfig::Direct => Dispatch::Direct,
            DispatchConfig::Pool(_) => Dispatch::Pool,
        }
    }

    /// The pool's settings, in pool dispatch.
    pub fn pool(&self) -> Option<&PoolConfig> {
        match self {
            DispatchConfig::Pool(pool) => Some(pool),
            DispatchConfig::Direct => None,
        }
    }

    /// The pool's settings to change, in pool dispatch.
    pub fn pool_mut(&mut self) -> Option<&mut PoolConfig> {
        match self {
            DispatchConfig::Pool(pool) => Some(pool),
            DispatchConfig::Direct => None,
        }
    }

    /// Switches to `mode`; a pool already configured keeps its settings,
    /// a new one starts from the defaults.
    pub fn set_mode(&mut self, mode: Dispatch) {
        match (mode, &*self) {
            (Dispatch::Direct, _) => *self = DispatchConfig::Direct,
            (Dispatch::Pool, DispatchConfig::Pool(_)) => {}
            (Dispatch::Pool, DispatchConfig::Direct) => {
                *self = DispatchConfig::Pool(PoolConfig::default())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::QueueKind;
    use rpc_core::config::{parse_str, ConfigFormat};

    #[test]
    fn toml_and_yaml_share_keys_and_defaults_are_jkrpcs() {
        let toml = "shutdown_grace_ms = 250\n[dispatch]\ntype = \"pool\"\ncore_threads = 3\nmax_threads = 9\nqueue = \"blocking\"\nkeep_alive_ms = 1000\n[transport]\nidle_timeout_ms = 5000\n";
        let yaml = "shutdown_grace_ms: 250\ndispatch:\n  type: pool\n  core_threads: 3\n  max_threads: 9\n  queue: blocking\n  keep_alive_ms: 1000\ntransport:\n  idle_timeout_ms: 5000\n";
        let t: ServerConfig = parse_str(toml, ConfigFormat::Toml).unwrap();
        let y: ServerConfig = parse_str(yaml, ConfigFormat::Yaml).unwrap();
        assert_eq!(t, y);
        assert_eq!(t.dispatch.mode(), Dispatch::Pool);
        let pool = t.dispatch.pool().expect("pool dispatch");
        assert_eq!(pool.queue, QueueKind::Blocking);
        assert_eq!(pool.keep_alive, Duration::from_secs(1));
        assert_eq!(t.transport.idle_timeout, Duration::from_secs(5));
        t.validate().unwrap();

        let d = ServerConfig::default();
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let pool = d.dispatch.pool().expect("pool dispatch by default");
        assert_eq!(pool.core_threads, cpus);
        assert_eq!(pool.max_threads, cpus * 8);
        assert_eq!(pool.keep_alive, Duration::from_secs(60));
    }

    #[test]
    fn bad_values_name_their_key() {
        let err = parse_str::<ServerConfig>(
            "[dispatch]\ntype = \"pool\"\nqueue = \"lifo\"\n",
            ConfigFormat::Toml,
        )
        .unwrap_err();
        assert!(err.to_string().contains("`dispatch"), "{err}");
        assert!(err.to_string().contains("lifo"), "{err}");
        // A pool setting under direct dispatch is refused.
        let err = parse_str::<ServerConfig>(
            "dispatch = { type = \"direct\", core_threads = 3 }\n",
            ConfigFormat::Toml,
        )
        .unwrap_err();
        assert!(err.to_string().contains("core_threads"), "{err}");
        let err = parse_str::<ServerConfig>("dispatch:\n  type: sideways\n", ConfigFormat::Yaml)
            .unwrap_err();
        assert!(err.to_string().contains("`dispatch"), "{err}");
        let c = ServerConfig {
            max_in_flight_per_connection: 0,
            ..ServerConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max_in_flight_per_connection"));
        let c: ServerConfig = parse_str("busy_poll_us = 20", ConfigFormat::Toml).unwrap();
        assert_eq!(c.busy_poll, Duration::from_micros(20));
        assert!(c.validate().is_ok());
        let c: ServerConfig = parse_str("busy_poll_us = 5000", ConfigFormat::Toml).unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.contains("busy_poll_us") && err.contains("at most 1000"),
            "{err}"
        );
        let mut c = ServerConfig::default();
        if let Some(pool) = c.dispatch.pool_mut() {
            pool.core_threads = pool.max_threads + 1;
        }
        assert!(c.validate().unwrap_err().to_string().contains("`dispatch`"));
        let c = ServerConfig {
            max_connections_per_ip: Some(0),
            ..ServerConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("`max_connections_per_ip`"));
        let c: ServerConfig =
            parse_str("max_connections_per_ip = 8\n", ConfigFormat::Toml).unwrap();
        assert_eq!(c.max_connections_per_ip, Some(8));
        assert_eq!(ServerConfig::default().max_connections_per_ip, None);
        let c = ServerConfig {
            weight: 0,
            ..ServerConfig::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("`weight`"));
        let c = ServerConfig {
            registry: Some("consul://x".into()),
            ..ServerConfig::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("`registry`"));
        let c: ServerConfig = parse_str(
            "registry = \"etcd://127.0.0.1:2379/brisk?ttl_ms=3000\"\nadvertise_addr = \"10.0.0.5\"\nweight = 250\n",
            ConfigFormat::Toml,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.weight, 250);
    }

    #[test]
    fn from_file_reads_toml_and_reports_missing_files() {
        let dir = std::env::temp_dir().join(format!("brisk-server-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("server.toml");
        std::fs::write(&path, "addr = \"127.0.0.1:0\"\nmax_connections = 7\n").unwrap();
        assert_eq!(ServerConfig::from_file(&path).unwrap().max_connections, 7);
        let err = ServerConfig::from_file(dir.join("missing.toml")).unwrap_err();
        assert!(err.to_string().contains("missing.toml"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
