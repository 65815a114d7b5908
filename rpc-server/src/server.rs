//! [`Server`]: building, starting and stopping a brisk server.
//!
//! `start()` binds, creates the worker pool (pool dispatch), spawns the accept
//! loop on the current tokio runtime and returns a [`ServerHandle`]. The handle
//! owns the server: [`ServerHandle::shutdown`] stops accepting, lets in-flight
//! calls finish (bounded by `shutdown_grace`), flushes their answers and closes;
//! dropping the handle without calling it closes everything at once;
//! [`ServerHandle::shutdown_on_signals`] runs that graceful shutdown when the
//! process gets SIGINT or SIGTERM.
//!
//! With a registry (`ServerBuilder::registry`, or `registry` in the config)
//! `start()` also registers every service, and the handle keeps the
//! registration: graceful shutdown deregisters first; dropping the handle leaves
//! the entries to expire with their lease, as a crash would (see `registration`).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rpc_core::{Dispatch, Interceptor, RpcError, ServiceHandler};
use rpc_registry::{Registration, Registry};
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::admission::{Admission, Admit};
use crate::connection::serve_connection;
use crate::ctx::ServerCtx;
use crate::metrics::Metrics;
use crate::pool::PoolStats;
use crate::refusal::Refusals;
use crate::router::Router;
use crate::signals::StopSignals;
use crate::stats::StatsSnapshot;
use crate::ServerConfig;

/// Entry point: `Server::builder()`.
pub struct Server;

impl Server {
    /// A builder with the default [`ServerConfig`].
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            config: ServerConfig::default(),
            router: Router::new(),
            interceptors: Vec::new(),
            registry: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

/// Collects config, services and interceptors, then starts the server.
pub struct ServerBuilder {
    config: ServerConfig,
    router: Router,
    interceptors: Vec<Arc<dyn Interceptor>>,
    registry: Option<Arc<dyn Registry>>,
    #[cfg(feature = "tls")]
    tls: Option<rpc_transport::tls::TlsAcceptor>,
}

impl ServerBuilder {
    /// Serves the binary protocol over TLS with a ready rustls config (beats
    /// the config's `tls` section). Feature `tls`.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, config: rustls::ServerConfig) -> Self {
        self.tls = Some(rpc_transport::tls::TlsAcceptor::from_config(config));
        self
    }

    /// Replaces the whole configuration.
    pub fn config(mut self, config: ServerConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets the listen address.
    pub fn addr(mut self, addr: impl Into<String>) -> Self {
        self.config.addr = addr.into();
        self
    }

    /// Also serves HTTP/JSON, `/health` and `/metrics` on `addr`.
    pub fn http_addr(mut self, addr: impl Into<String>) -> Self {
        self.config.http_addr = Some(addr.into());
        self
    }

    /// Sets the dispatch mode (a pool already configured keeps its settings).
    pub fn dispatch(mut self, dispatch: Dispatch) -> Self {
        self.config.dispatch.set_mode(dispatch);
        self
    }

    /// Runs handlers on a worker pool with these settings (whatever was set
    /// before by [`config`](Self::config) or [`dispatch`](Self::dispatch)).
    pub fn pool(mut self, pool: crate::PoolConfig) -> Self {
        self.config.dispatch = crate::config::DispatchConfig::Pool(pool);
        self
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

    /// Registers every service in `registry` at start (beats the config's
    /// `registry` URL); graceful shutdown deregisters.
    pub fn registry(mut self, registry: Arc<dyn Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Registers every service in the registry this URL names at start
    /// (`etcd://host:port/root`).
    pub fn registry_url(mut self, url: impl Into<String>) -> Self {
        self.config.registry = Some(url.into());
        self
    }

    /// The address registered for clients (`host` or `host:port`).
    pub fn advertise_addr(mut self, addr: impl Into<String>) -> Self {
        self.config.advertise_addr = Some(addr.into());
        self
    }

    /// This server's registered share of the load.
    pub fn weight(mut self, weight: u32) -> Self {
        self.config.weight = weight;
        self
    }

    /// Validates the config, binds, starts serving on the current runtime and,
    /// with a registry, registers (an unreachable registry fails the start).
    pub async fn start(self) -> Result<ServerHandle, RpcError> {
        self.config.validate()?;
        #[cfg(feature = "tls")]
        let tls = match (self.tls, &self.config.tls) {
            (Some(acceptor), _) => Some(acceptor),
            (None, Some(files)) => Some(rpc_transport::tls::TlsAcceptor::load(files)?),
            (None, None) => None,
        };
        let listener = TcpListener::bind(&self.config.addr)
            .await
            .map_err(|e| RpcError::Io {
                context: format!("binding the server to {}", self.config.addr),
                reason: format!("{e} (is another process using the port?)"),
                source: Some(rpc_core::Cause::new(e)),
            })?;
        let http_listener = match &self.config.http_addr {
            Some(addr) => Some(TcpListener::bind(addr).await.map_err(|e| RpcError::Io {
                context: format!("binding the HTTP listener to {addr}"),
                reason: format!("{e} (is another process using the port?)"),
                source: Some(rpc_core::Cause::new(e)),
            })?),
            None => None,
        };
        let local_addr = listener
            .local_addr()
            .map_err(|e| RpcError::io("reading the bound address", e))?;
        let services: Vec<&'static str> = self.router.service_names().collect();
        let return_to_os = self.config.memory.return_to_os;
        let ctx = Arc::new(ServerCtx::new(self.config, self.router, self.interceptors)?);
        if return_to_os {
            rpc_transport::allocator::mmap_large_blocks();
        }
        let tracker = TaskTracker::new();
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
        info!(addr = %local_addr, dispatch = %ctx.dispatcher.mode(), "brisk server listening");
        let mut handle = ServerHandle {
            local_addr,
            http_addr,
            ctx,
            tracker,
            accept: Some(accept),
            registration: None,
        };
        // On failure the handle drops here, which stops the server again.
        handle.registration =
            crate::registration::register(&handle.ctx.config, self.registry, services, local_addr)
                .await?;
        Ok(handle)
    }
}

/// Accepts connections until the server stops, admitting each through the
/// connection limits (see `admission`): an admitted connection gets its own
/// task, a refused one a short task that tells it why (see `refusal`).
async fn accept_loop(
    listener: TcpListener,
    ctx: Arc<ServerCtx>,
    tracker: TaskTracker,
    #[cfg(feature = "tls")] tls: Option<rpc_transport::tls::TlsAcceptor>,
) {
    let admission = Arc::new(Admission::new(&ctx.config, ctx.stats.clone()));
    let refusals = Refusals::new(
        #[cfg(feature = "tls")]
        tls.clone(),
    );
    let mut backoff = Duration::from_millis(1);
    loop {
        let accepted = tokio::select! {
            biased;
            _ = ctx.stop.stopping() => break,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((stream, peer)) => {
                backoff = Duration::from_millis(1);
                ctx.stats
                    .accepted_connections
                    .fetch_add(1, Ordering::Relaxed);
                let ticket = match admission.admit(peer.ip(), Instant::now()) {
                    Admit::Accepted(ticket) => ticket,
                    Admit::Refused(error) => {
                        warn!(%peer, %error, "connection refused");
                        refusals.refuse(stream, peer, error, &ctx.stop);
                        continue;
                    }
                };
                #[cfg(feature = "tls")]
                if let Some(acceptor) = &tls {
                    tracker.spawn(crate::connection::serve_tls_connection(
                        stream,
                        peer,
                        ctx.clone(),
                        acceptor.clone(),
                        ticket,
                    ));
                    continue;
                }
                tracker.spawn(serve_connection(stream, peer, ctx.clone(), ticket));
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                warn!(error = %e, "accept failed; backing off {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
    // Dropping the listener here refuses new connections at once.
}

/// What a graceful shutdown achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownReport {
    /// True when every in-flight call finished within the grace period.
    pub drained: bool,
    /// How long the shutdown took.
    pub elapsed: Duration,
}

/// A running server. Dropping it closes every connection immediately; call
/// [`shutdown`](ServerHandle::shutdown) for a graceful stop.
pub struct ServerHandle {
    local_addr: SocketAddr,
    http_addr: Option<SocketAddr>,
    ctx: Arc<ServerCtx>,
    tracker: TaskTracker,
    accept: Option<tokio::task::JoinHandle<()>>,
    /// Dropped with the handle: a registry lease then expires on its own.
    registration: Option<Registration>,
}

impl ServerHandle {
    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The bound HTTP/JSON address, when `http_addr` is configured.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Server counters.
    pub fn stats(&self) -> StatsSnapshot {
        self.ctx.stats.snapshot()
    }

    /// Worker pool counters (pool dispatch only).
    pub fn pool_stats(&self) -> Option<PoolStats> {
        self.ctx.dispatcher.pool().map(|p| p.stats())
    }

    /// Per-method and I/O metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.ctx.metrics
    }

    /// Everything in the Prometheus text format (what `GET /metrics` serves).
    pub fn metrics_text(&self) -> String {
        self.ctx
            .metrics
            .render(&self.ctx.stats.snapshot(), self.pool_stats().as_ref())
    }

    /// The effective configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.ctx.config
    }

    /// The server's registry entries, when it registered.
    pub fn registration(&self) -> Option<&Registration> {
        self.registration.as_ref()
    }

    /// Stops accepting, answers new requests `ShuttingDown`, waits up to
    /// `shutdown_grace` for in-flight calls and their answers, then closes.
    pub async fn shutdown(mut self) -> ShutdownReport {
        self.shutdown_inner().await
    }

    /// Serves until the process gets SIGINT (Ctrl-C) or SIGTERM (Ctrl-C only
    /// on non-unix systems), then shuts down gracefully as
    /// [`shutdown`](Self::shutdown) does and returns its report. The handlers
    /// are registered when this is first polled (see [`StopSignals`] to
    /// register them earlier, or to wait on more than signals).
    pub async fn shutdown_on_signals(self) -> ShutdownReport {
        let signal = StopSignals::install().wait().await;
        info!(addr = %self.local_addr, %signal, "stop signal received: shutting down gracefully");
        self.shutdown().await
    }

    async fn shutdown_inner(&mut self) -> ShutdownReport {
        let start = Instant::now();
        // Leave the registry first, so clients stop choosing this server.
        if let Some(registration) = self.registration.take() {
            if let Err(e) = registration.deregister().await {
                warn!(error = %e, "deregistering failed; the entries expire with their lease");
            }
        }
        self.ctx.stop.stop_gracefully();
        if let Some(accept) = self.accept.take() {
            let _ = accept.await;
        }
        self.tracker.close();
        let grace = self.ctx.config.shutdown_grace;
        let drained = tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_ok();
        if !drained {
            warn!(
                ?grace,
                "shutdown grace period over: closing remaining connections"
            );
            self.ctx.stop.stop_now();
            let _ = tokio::time::timeout(Duration::from_secs(2), self.tracker.wait()).await;
        }
        self.ctx.stop.stop_now();
        if let Some(pool) = self.ctx.dispatcher.pool().cloned() {
            let _ =
                tokio::task::spawn_blocking(move || pool.shutdown(Duration::from_secs(2))).await;
        }
        info!(addr = %self.local_addr, drained, "brisk server stopped");
        ShutdownReport {
            drained,
            elapsed: start.elapsed(),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.ctx.stop.stop_now();
    }
}
