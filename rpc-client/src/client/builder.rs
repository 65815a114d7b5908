//! [`ClientBuilder`]: a client's settings gathered on top of a base config,
//! then [`build`](ClientBuilder::build): validated, TLS loaded, the servers
//! found (a static list, or a registry's first read) and their connections
//! set up.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rpc_codec::compression::BodyCompressor;
use rpc_core::{CompressionConfig, ConnectType, Interceptor, RpcError, SerializerKind, WriteMode};
use rpc_registry::{Discovery, Registry, ServiceInstance, StaticRegistry};

use super::{Client, Inner};
use crate::balance::Balancer;
use crate::cluster::Cluster;
use crate::config::StaticAddr;
use crate::connect::Connect;
use crate::ClientConfig;

/// One setting changed on top of the base config.
type Setting = Box<dyn FnOnce(&mut ClientConfig) + Send>;

/// Collects settings and interceptors, then [`build`](ClientBuilder::build)s
/// a [`Client`]. [`config`](ClientBuilder::config) is the base; every other
/// setting method changes one setting on top of it, called before or after.
/// Every setting defaults to jkrpc's.
pub struct ClientBuilder {
    /// The base ([`config`](Self::config)); `settings` apply on top of it.
    config: ClientConfig,
    settings: Vec<Setting>,
    interceptors: Vec<Arc<dyn Interceptor>>,
    registry: Option<Arc<dyn Registry>>,
    #[cfg(feature = "tls")]
    tls: Option<(rustls::ClientConfig, String)>,
}

impl ClientBuilder {
    /// Nothing set: the default [`ClientConfig`] ([`Client::builder`]).
    pub(super) fn new() -> Self {
        ClientBuilder {
            config: ClientConfig::default(),
            settings: Vec::new(),
            interceptors: Vec::new(),
            registry: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// Connects with TLS using a ready rustls config; `server_name` is the name
    /// the server certificate must be valid for (beats the config's `tls`
    /// section). Feature `tls`.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, config: rustls::ClientConfig, server_name: impl Into<String>) -> Self {
        self.tls = Some((config, server_name.into()));
        self
    }

    /// The base configuration (a file's, say); the other setting methods
    /// change settings on top of it, whether called before or after.
    pub fn config(mut self, config: ClientConfig) -> Self {
        self.config = config;
        self
    }

    fn set(mut self, setting: impl FnOnce(&mut ClientConfig) + Send + 'static) -> Self {
        self.settings.push(Box::new(setting));
        self
    }

    /// Server address: `"host:port"`, a `SocketAddr`, anything that prints
    /// as one.
    pub fn addr(self, addr: impl std::fmt::Display) -> Self {
        let value = addr.to_string();
        self.set(move |c| c.addr = value)
    }

    /// Several servers (`"host:port"` or [`StaticAddr::weighted`]); replaces `addr`.
    pub fn addrs<I, A>(self, addrs: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: Into<StaticAddr>,
    {
        let addrs: Vec<StaticAddr> = addrs.into_iter().map(Into::into).collect();
        self.set(move |c| c.addrs = addrs)
    }

    /// How calls are spread over several servers.
    pub fn balancer(self, balancer: Balancer) -> Self {
        let value = balancer;
        self.set(move |c| c.balancer = value)
    }

    /// Discovers servers in the registry a URL names (`etcd://host:port/root`).
    pub fn registry_url(self, url: impl Into<String>) -> Self {
        let value = Some(url.into());
        self.set(move |c| c.registry = value)
    }

    /// Discovers servers in an already connected registry (beats `registry_url`).
    pub fn registry(mut self, registry: Arc<dyn Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// With a registry: follow only this service's servers.
    pub fn service(self, service: impl Into<String>) -> Self {
        let value = Some(service.into());
        self.set(move |c| c.service = value)
    }

    /// How long a failing server is avoided before it is probed again.
    pub fn down_backoff(self, backoff: Duration) -> Self {
        let value = backoff;
        self.set(move |c| c.down_backoff = value)
    }

    /// How connections are held: the connect type with its own settings
    /// (`Connect::fixed(4)`, `Connect::pooled(1, 8)`, `Connect::Reused`).
    pub fn connect(self, connect: Connect) -> Self {
        let value = connect;
        self.set(move |c| c.connect = value)
    }

    /// A connect type with its settings at their defaults (see
    /// [`connect`](Self::connect) to choose them).
    pub fn connect_type(self, connect_type: ConnectType) -> Self {
        let value = Connect::defaults_for(connect_type);
        self.set(move |c| c.connect = value)
    }

    /// When a request counts as written.
    pub fn write_mode(self, mode: WriteMode) -> Self {
        let value = mode;
        self.set(move |c| c.write_mode = value)
    }

    /// Default serializer.
    pub fn serializer(self, serializer: SerializerKind) -> Self {
        let value = serializer;
        self.set(move |c| c.serializer = value)
    }

    /// Compress request bodies (and ask for compressed answers): `algorithm`
    /// from `min_size` bytes at the config's level. See [`CompressionConfig`].
    pub fn compression(self, compression: CompressionConfig) -> Self {
        self.set(move |c| c.compression = compression)
    }

    /// Default request timeout.
    pub fn request_timeout(self, timeout: Duration) -> Self {
        let value = timeout;
        self.set(move |c| c.request_timeout = value)
    }

    /// Timeout of one method (`Service`, `method`).
    pub fn method_timeout(self, service: &str, method: &str, timeout: Duration) -> Self {
        let key = format!("{service}.{method}");
        let ms = timeout.as_millis() as u64;
        self.set(move |c| {
            c.method_timeouts.insert(key, ms);
        })
    }

    /// Attempts per call (1 = no retry); see `ClientConfig::max_try_count`
    /// for which failures are retried.
    pub fn max_try_count(self, n: u32) -> Self {
        let value = n;
        self.set(move |c| c.max_try_count = value)
    }

    /// Marks `service.method` (`method` may be `*`) as safe to run twice: it
    /// is also retried after failures that may have come after the server ran it.
    pub fn idempotent(self, service: &str, method: &str) -> Self {
        let key = format!("{service}.{method}");
        self.set(move |c| c.idempotent_methods.push(key))
    }

    /// Connect on first use instead of at build.
    pub fn lazy_connect(self, lazy: bool) -> Self {
        let value = lazy;
        self.set(move |c| c.lazy_connect = value)
    }

    /// Adds a client interceptor; the first added is the outermost.
    pub fn interceptor(mut self, interceptor: impl Interceptor) -> Self {
        self.interceptors.push(Arc::new(interceptor));
        self
    }

    /// Validates the config, finds the servers (the static list, or a first read
    /// of the registry — an unreachable registry is an error here, within its
    /// timeout) and sets up their connections (connecting now unless
    /// `lazy_connect`: when no server can be reached that is an error here, not
    /// at the first call; unreachable ones among reachable ones are marked down).
    pub async fn build(mut self) -> Result<Client, RpcError> {
        for setting in std::mem::take(&mut self.settings) {
            setting(&mut self.config);
        }
        self.config.validate()?;
        #[allow(unused_mut)]
        let mut transport = self.config.client_transport();
        #[cfg(feature = "tls")]
        {
            use rpc_transport::tls::TlsConnector;
            if let Some((config, server_name)) = self.tls.take() {
                transport.tls = Some(TlsConnector::from_config(config, &server_name)?);
            } else if let Some(files) = &self.config.tls {
                transport.tls = Some(TlsConnector::load(files)?);
            }
        }
        let mut method_timeouts: HashMap<String, HashMap<String, Duration>> = HashMap::new();
        for (key, ms) in &self.config.method_timeouts {
            if let Some((service, method)) = key.split_once('.') {
                method_timeouts
                    .entry(service.to_owned())
                    .or_default()
                    .insert(method.to_owned(), Duration::from_millis(*ms));
            }
        }
        // The client's own addresses are a list that never changes; a
        // registry is followed.
        let (registry, fixed): (Arc<dyn Registry>, Option<Discovery>) =
            match (self.registry, &self.config.registry) {
                (Some(registry), _) => (registry, None),
                (None, Some(url)) => (rpc_registry::connect(url).await?, None),
                (None, None) => {
                    let instances: Vec<ServiceInstance> = self
                        .config
                        .static_addrs()
                        .into_iter()
                        .map(|a| ServiceInstance::any(a.addr).with_weight(a.weight))
                        .collect();
                    let fixed = Discovery::fixed(instances.clone());
                    (Arc::new(StaticRegistry::new(instances)), Some(fixed))
                }
            };
        let discovery = match fixed {
            Some(fixed) => fixed,
            None => registry.discover(self.config.service.as_deref()).await?,
        };
        let cluster = Cluster::start(&self.config, transport, registry, discovery).await?;
        let idempotent = self.config.idempotent_methods.iter().cloned().collect();
        let compressor = BodyCompressor::from_config(&self.config.compression, "compression")?;
        Ok(Client {
            inner: Arc::new(Inner {
                config: self.config,
                method_timeouts,
                idempotent,
                cluster,
                interceptors: self.interceptors,
                compressor,
            }),
        })
    }
}
