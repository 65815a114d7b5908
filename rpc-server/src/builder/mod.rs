//! [`Server::builder`]: a server's settings, services and interceptors, then
//! [`ServerBuilder::start`].
//!
//! # Order does not matter
//!
//! [`config`](ServerBuilder::config) gives the base — a whole
//! [`ServerConfig`], from a file say — and every other setting method
//! changes one setting on top of it, whether it was called before or after.
//! So `Server::builder().pool_queue_size(10).config(from_file)` keeps the
//! queue size of 10. Among the setting methods the later call of the same
//! setting wins, and the dispatch mode is applied last: pool settings given
//! with [`dispatch(Dispatch::Direct)`](ServerBuilder::dispatch) are kept
//! aside, unused, instead of switching the mode back.
//!
//! ```
//! # async fn run() -> Result<(), rpc_core::RpcError> {
//! use rpc_server::{QueueKind, Server};
//!
//! let server = Server::builder()
//!     .addr("127.0.0.1:0")
//!     .pool_threads(4, 64)
//!     .pool_queue(QueueKind::Transfer)
//!     .pool_queue_size(10_000)
//!     .max_connections(1_000)
//!     .start()
//!     .await?;
//! assert_eq!(server.config().dispatch.pool().map(|p| p.queue_size), Some(10_000));
//! # Ok(()) }
//! ```

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use rpc_core::stream::StreamConfig;
use rpc_core::{Dispatch, Interceptor, RpcError, ServiceHandler};
use rpc_registry::Registry;
use rpc_transport::addr::Address;
use rpc_transport::TransportConfig;
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;
use tracing::info;

use crate::config::DispatchConfig;
use crate::ctx::ServerCtx;
use crate::listener::Listener;
use crate::router::Router;
use crate::server::{accept_loop, ServerHandle};
use crate::{MemoryConfig, PoolConfig, QueueKind, ServerConfig};

/// Entry point: `Server::builder()`.
pub struct Server;

impl Server {
    /// A builder with the default [`ServerConfig`].
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            base: ServerConfig::default(),
            settings: Vec::new(),
            pool: None,
            pool_settings: Vec::new(),
            mode: None,
            listener: None,
            router: Router::new(),
            interceptors: Vec::new(),
            #[cfg(feature = "tower")]
            layers: Vec::new(),
            registry: None,
            metrics_registry: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

/// One setting changed on top of the base config.
type Setting = Box<dyn FnOnce(&mut ServerConfig) + Send>;
/// One pool setting changed on top of the pool's base.
type PoolSetting = Box<dyn FnOnce(&mut PoolConfig) + Send>;

/// Collects settings, services and interceptors, then starts the server.
/// See the [module docs](self) for how settings combine.
pub struct ServerBuilder {
    base: ServerConfig,
    settings: Vec<Setting>,
    /// The pool's base settings ([`pool`](Self::pool)), over the base config's.
    pool: Option<PoolConfig>,
    pool_settings: Vec<PoolSetting>,
    /// The dispatch mode, when set by [`dispatch`](Self::dispatch).
    mode: Option<Dispatch>,
    /// A listener the caller bound, served instead of binding `addr`.
    listener: Option<TcpListener>,
    router: Router,
    interceptors: Vec<Arc<dyn Interceptor>>,
    #[cfg(feature = "tower")]
    layers: Vec<crate::layers::LayerFn>,
    registry: Option<Arc<dyn Registry>>,
    metrics_registry: Option<prometheus_client::registry::Registry>,
    #[cfg(feature = "tls")]
    tls: Option<rpc_transport::tls::TlsAcceptor>,
}

impl ServerBuilder {
    fn set(mut self, setting: impl FnOnce(&mut ServerConfig) + Send + 'static) -> Self {
        self.settings.push(Box::new(setting));
        self
    }

    fn set_pool(mut self, setting: impl FnOnce(&mut PoolConfig) + Send + 'static) -> Self {
        self.pool_settings.push(Box::new(setting));
        self
    }

    /// Serves the binary protocol over TLS with a ready rustls config (beats
    /// the config's `tls` section). Feature `tls`.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, config: rustls::ServerConfig) -> Self {
        self.tls = Some(rpc_transport::tls::TlsAcceptor::from_config(config));
        self
    }

    /// The base configuration (a file's, say); the other setting methods
    /// change settings on top of it, called before or after.
    pub fn config(mut self, config: ServerConfig) -> Self {
        self.base = config;
        self
    }

    /// The listen address: `"host:port"`, a `SocketAddr`, anything that
    /// prints as one (port 0 picks a free port).
    pub fn addr(self, addr: impl Display) -> Self {
        let addr = addr.to_string();
        self.set(move |c| c.addr = addr)
    }

    /// Serves on a listener the caller bound (tonic's
    /// `serve_with_incoming`), instead of binding `addr`: to choose socket
    /// options, to bind before dropping privileges, or to know the port
    /// before the server starts. `local_addr()` is the listener's.
    pub fn listener(mut self, listener: TcpListener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// Also serves HTTP/JSON, `/health` and `/metrics` on `addr`.
    pub fn http_addr(self, addr: impl Display) -> Self {
        let addr = addr.to_string();
        self.set(move |c| c.http_addr = Some(addr))
    }

    /// Where handlers run: [`Dispatch::Pool`] (the default) or
    /// [`Dispatch::Direct`]. Applied after every other setting.
    pub fn dispatch(mut self, dispatch: Dispatch) -> Self {
        self.mode = Some(dispatch);
        self
    }

    /// Runs handlers on a worker pool with these settings as the pool's base
    /// (the `pool_*` methods change settings on top of it).
    pub fn pool(mut self, pool: PoolConfig) -> Self {
        self.pool = Some(pool);
        self
    }

    /// The worker pool's threads: `core` started up front, at most `max`.
    pub fn pool_threads(self, core: usize, max: usize) -> Self {
        self.set_pool(move |p| {
            p.core_threads = core;
            p.max_threads = max;
        })
    }

    /// The worker pool's queue bound; a call beyond it is answered `ServerBusy`.
    pub fn pool_queue_size(self, size: usize) -> Self {
        self.set_pool(move |p| p.queue_size = size)
    }

    /// The worker pool's queue: [`QueueKind::Transfer`] or [`QueueKind::Blocking`].
    pub fn pool_queue(self, queue: QueueKind) -> Self {
        self.set_pool(move |p| p.queue = queue)
    }

    /// How long a worker above the core size waits for work before it exits.
    pub fn pool_keep_alive(self, keep_alive: Duration) -> Self {
        self.set_pool(move |p| p.keep_alive = keep_alive)
    }

    /// Connections served at once (see [`ServerConfig::max_connections`]).
    pub fn max_connections(self, n: usize) -> Self {
        self.set(move |c| c.max_connections = n)
    }

    /// Connections served at once from one peer IP address.
    pub fn max_connections_per_ip(self, n: usize) -> Self {
        self.set(move |c| c.max_connections_per_ip = Some(n))
    }

    /// Calls one connection may have in progress before it is read no more.
    pub fn max_in_flight_per_connection(self, n: usize) -> Self {
        self.set(move |c| c.max_in_flight_per_connection = n)
    }

    /// How long a connection whose client comes back at once polls for its
    /// next frame before parking (`ZERO`: never; see
    /// [`ServerConfig::busy_poll`](crate::ServerConfig::busy_poll)).
    pub fn busy_poll(self, limit: Duration) -> Self {
        self.set(move |c| c.busy_poll = limit)
    }

    /// How long a graceful shutdown waits for in-flight calls.
    pub fn shutdown_grace(self, grace: Duration) -> Self {
        self.set(move |c| c.shutdown_grace = grace)
    }

    /// What large frames may hold, and whether freed memory goes back to the system.
    pub fn memory(self, memory: MemoryConfig) -> Self {
        self.set(move |c| c.memory = memory)
    }

    /// Streaming calls' window and per-connection bound, all at once.
    pub fn streams(self, streams: StreamConfig) -> Self {
        self.set(move |c| c.streams = streams)
    }

    /// Items of a caller's stream the server takes before its handler reads any.
    pub fn stream_window(self, window: u32) -> Self {
        self.set(move |c| c.streams.window = window)
    }

    /// Streams one connection may have open at once.
    pub fn max_streams_per_connection(self, n: usize) -> Self {
        self.set(move |c| c.streams.max_per_connection = n)
    }

    /// Every socket-level setting at once.
    pub fn transport(self, transport: TransportConfig) -> Self {
        self.set(move |c| c.transport = transport)
    }

    /// The largest frame accepted or sent, in bytes.
    pub fn max_frame_size(self, bytes: usize) -> Self {
        self.set(move |c| c.transport.max_frame_size = bytes)
    }

    /// How often an idle connection is pinged.
    pub fn heartbeat_interval(self, every: Duration) -> Self {
        self.set(move |c| c.transport.heartbeat_interval = every)
    }

    /// How long a connection may stay silent before it is closed.
    pub fn idle_timeout(self, after: Duration) -> Self {
        self.set(move |c| c.transport.idle_timeout = after)
    }

    /// `TCP_NODELAY` on accepted connections.
    pub fn nodelay(self, on: bool) -> Self {
        self.set(move |c| c.transport.nodelay = on)
    }

    /// Serves a service (what `#[brisk::service]` generates as `XxxServer`).
    pub fn service(mut self, handler: impl ServiceHandler) -> Self {
        self.router.add(Arc::new(handler));
        self
    }

    /// Serves an already shared service.
    pub fn service_arc(mut self, handler: Arc<dyn ServiceHandler>) -> Self {
        self.router.add(handler);
        self
    }

    /// Adds a server interceptor; the first added is the outermost.
    pub fn interceptor(mut self, interceptor: impl Interceptor) -> Self {
        self.interceptors.push(Arc::new(interceptor));
        self
    }

    /// Adds a tower layer around the handlers of unary calls (inside the
    /// interceptors; the first layer added is the outermost, as in
    /// `tower::ServiceBuilder`, which is itself a layer). Feature `tower`;
    /// see [`layers`](crate::layers) for what a layer sees and how its
    /// errors reach the caller.
    ///
    /// ```
    /// # async fn run() -> Result<(), rpc_core::RpcError> {
    /// use std::time::Duration;
    /// use rpc_server::Server;
    /// use tower::ServiceBuilder;
    ///
    /// let server = Server::builder()
    ///     .addr("127.0.0.1:0")
    ///     // Past 64 calls in handlers at once, answer `ServerBusy` at once.
    ///     .layer(ServiceBuilder::new().load_shed().concurrency_limit(64))
    ///     .layer(tower::timeout::TimeoutLayer::new(Duration::from_secs(2)))
    ///     .start()
    ///     .await?;
    /// # drop(server); Ok(()) }
    /// ```
    #[cfg(feature = "tower")]
    pub fn layer<L>(mut self, layer: L) -> Self
    where
        L: tower::Layer<crate::layers::LayeredService> + Send + 'static,
        L::Service: tower::Service<rpc_core::RpcRequest, Response = rpc_core::RpcResponse>
            + Clone
            + Send
            + Sync
            + 'static,
        <L::Service as tower::Service<rpc_core::RpcRequest>>::Error: Into<crate::layers::BoxError>,
        <L::Service as tower::Service<rpc_core::RpcRequest>>::Future: Send + 'static,
    {
        self.layers.push(crate::layers::keep(layer));
        self
    }

    /// Renders brisk's series into `registry` (a [`prometheus_client`]
    /// registry), so `/metrics` and [`ServerHandle::metrics_text`] show the
    /// caller's own series beside them. Register your metrics before; keep a
    /// clone of each to update it. Use the crate brisk re-exports
    /// ([`rpc_server::prometheus_client`](crate::prometheus_client)) so the
    /// versions match; a registry made with a prefix or constant labels
    /// applies them to brisk's series too.
    ///
    /// ```
    /// # async fn run() -> Result<(), rpc_core::RpcError> {
    /// use prometheus_client::metrics::counter::Counter;
    /// use prometheus_client::registry::Registry;
    /// use rpc_server::Server;
    ///
    /// let logins: Counter = Counter::default();
    /// let mut registry = Registry::default();
    /// registry.register("app_logins", "Logins seen by the app.", logins.clone());
    /// let server = Server::builder().addr("127.0.0.1:0").metrics_registry(registry).start().await?;
    /// logins.inc();
    /// assert!(server.metrics_text().contains("app_logins_total 1"));
    /// # Ok(()) }
    /// ```
    pub fn metrics_registry(mut self, registry: prometheus_client::registry::Registry) -> Self {
        self.metrics_registry = Some(registry);
        self
    }

    /// Registers every service in `registry` at start (beats the config's
    /// `registry` URL); graceful shutdown deregisters.
    pub fn registry(mut self, registry: Arc<dyn Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Registers every service in the registry this URL names at start
    /// (`etcd://host:port/root`).
    pub fn registry_url(self, url: impl Into<String>) -> Self {
        let url = url.into();
        self.set(move |c| c.registry = Some(url))
    }

    /// The address registered for clients (`host` or `host:port`).
    pub fn advertise_addr(self, addr: impl Display) -> Self {
        let addr = addr.to_string();
        self.set(move |c| c.advertise_addr = Some(addr))
    }

    /// This server's registered share of the load.
    pub fn weight(self, weight: u32) -> Self {
        self.set(move |c| c.weight = weight)
    }

    /// The configuration the server will run with: the base, then every
    /// setting, then the pool's, then the dispatch mode.
    fn resolve(
        base: ServerConfig,
        settings: Vec<Setting>,
        pool: Option<PoolConfig>,
        pool_settings: Vec<PoolSetting>,
        mode: Option<Dispatch>,
    ) -> ServerConfig {
        let mut config = base;
        for setting in settings {
            setting(&mut config);
        }
        let pool_given = pool.is_some() || !pool_settings.is_empty();
        if pool_given {
            let mut pool = pool
                .or_else(|| config.dispatch.pool().cloned())
                .unwrap_or_default();
            for setting in pool_settings {
                setting(&mut pool);
            }
            config.dispatch = DispatchConfig::Pool(pool);
        }
        if let Some(mode) = mode {
            config.dispatch.set_mode(mode);
        }
        config
    }

    /// Validates the config, binds (or takes the [`listener`](Self::listener)),
    /// starts serving on the current runtime and, with a registry, registers
    /// (an unreachable registry fails the start).
    pub async fn start(self) -> Result<ServerHandle, RpcError> {
        let mut config = Self::resolve(
            self.base,
            self.settings,
            self.pool,
            self.pool_settings,
            self.mode,
        );
        config.validate()?;
        #[cfg(feature = "tls")]
        let tls = match (self.tls, &config.tls) {
            (Some(acceptor), _) => Some(acceptor),
            (None, Some(files)) => Some(rpc_transport::tls::TlsAcceptor::load(files)?),
            (None, None) => None,
        };
        let given = self.listener.is_some();
        let unix = !given && matches!(Address::parse(&config.addr), Address::Unix(_));
        if unix && (config.registry.is_some() || self.registry.is_some()) {
            return Err(RpcError::config(
                "registry",
                format!(
                    "a server on the Unix socket {} is reachable on this host only: \
                     registering it would send other hosts' clients to a path they cannot \
                     open; serve TCP to register",
                    config.addr
                ),
            ));
        }
        let listener = match self.listener {
            Some(listener) => Listener::Tcp(listener),
            None => Listener::bind(&config.addr).await?,
        };
        #[cfg(not(feature = "http"))]
        if let Some(addr) = &config.http_addr {
            return Err(RpcError::config(
                "http_addr",
                format!(
                    "{addr:?} is set, but this build has no HTTP/JSON listener: enable \
                     brisk's `http` feature (on by default) or leave http_addr out"
                ),
            ));
        }
        #[cfg(feature = "http")]
        let http_listener = match &config.http_addr {
            Some(addr) => {
                Some(
                    crate::listener::bind_tcp(addr)
                        .await
                        .map_err(|e| RpcError::Io {
                            context: format!("binding the HTTP listener to {addr}"),
                            reason: format!("{e} (is another process using the port?)"),
                            source: Some(rpc_core::Cause::new(e)),
                        })?,
                )
            }
            None => None,
        };
        let listen_addr = listener.local_addr()?;
        if given {
            // What the server serves on: the caller's listener.
            config.addr = listen_addr.to_string();
        }
        let services: Vec<&'static str> = self.router.service_names().collect();
        let return_to_os = config.memory.return_to_os;
        #[cfg(feature = "tower")]
        let layers = crate::layers::stack(self.layers, &self.router);
        #[cfg_attr(not(feature = "tower"), allow(unused_mut))]
        let mut ctx = ServerCtx::new(
            config,
            self.router,
            self.interceptors,
            self.metrics_registry.unwrap_or_default(),
        )?;
        #[cfg(feature = "tower")]
        {
            ctx.layers = layers;
        }
        let ctx = Arc::new(ctx);
        if return_to_os {
            rpc_transport::allocator::mmap_large_blocks();
        }
        let tracker = TaskTracker::new();
        #[cfg(not(feature = "http"))]
        let http_addr = None;
        #[cfg(feature = "http")]
        let http_addr = match http_listener {
            Some(l) => {
                let a = l
                    .local_addr()
                    .map_err(|e| RpcError::io("reading the bound HTTP address", e))?;
                tracker.spawn(crate::http::accept_loop(l, ctx.clone(), tracker.clone()));
                info!(addr = %a, "brisk HTTP/JSON listening");
                Some(a)
            }
            None => None,
        };
        let accept = tokio::spawn(accept_loop(
            listener,
            ctx.clone(),
            tracker.clone(),
            #[cfg(feature = "tls")]
            tls,
        ));
        info!(addr = %listen_addr, dispatch = %ctx.dispatcher.mode(), "brisk server listening");
        let mut handle = ServerHandle {
            listen_addr,
            http_addr,
            ctx,
            tracker,
            accept: Some(accept),
            registration: None,
        };
        // On failure the handle drops here, which stops the server again.
        handle.registration = crate::registration::register(
            &handle.ctx.config,
            self.registry,
            services,
            handle.local_addr(),
        )
        .await?;
        Ok(handle)
    }
}

#[cfg(test)]
mod tests;
