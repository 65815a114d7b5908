//! [`ServerHandle`]: a running brisk server — its accept loop, and stopping it.
//!
//! `ServerBuilder::start()` (see `builder`) binds, creates the worker pool
//! (pool dispatch), spawns the accept loop on the current tokio runtime and
//! returns a [`ServerHandle`]. The handle owns the server: [`ServerHandle::shutdown`] stops accepting, lets in-flight
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

use rpc_registry::Registration;
use rpc_transport::addr::ListenAddr;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::admission::{Admission, Admit};
use crate::connection::serve_connection;
use crate::ctx::ServerCtx;
use crate::listener::{Accepted, Listener};
use crate::metrics::Metrics;
use crate::pool::PoolStats;
use crate::refusal::Refusals;
use crate::signals::StopSignals;
use crate::stats::StatsSnapshot;
use crate::ServerConfig;

/// Accepts connections until the server stops, admitting each through the
/// connection limits (see `admission`): an admitted connection gets its own
/// task, a refused one a short task that tells it why (see `refusal`).
pub(crate) async fn accept_loop(
    listener: Listener,
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
            Ok(accepted) => {
                backoff = Duration::from_millis(1);
                ctx.stats
                    .accepted_connections
                    .fetch_add(1, Ordering::Relaxed);
                let ip = match &accepted {
                    Accepted::Tcp(_, peer) => Some(peer.ip()),
                    Accepted::Unix(..) => None,
                };
                let ticket = match admission.admit(ip, Instant::now()) {
                    Admit::Accepted(ticket) => ticket,
                    Admit::Refused(error) => {
                        let peer = accepted.peer().label;
                        warn!(%peer, %error, "connection refused");
                        match accepted {
                            Accepted::Tcp(stream, _) => {
                                refusals.refuse(stream, peer, error, &ctx.stop)
                            }
                            Accepted::Unix(stream, _) => {
                                refusals.refuse(stream, peer, error, &ctx.stop)
                            }
                        }
                        continue;
                    }
                };
                #[cfg(feature = "tls")]
                if let Some(acceptor) = &tls {
                    tracker.spawn(crate::connection::serve_tls_connection(
                        accepted,
                        ctx.clone(),
                        acceptor.clone(),
                        ticket,
                    ));
                    continue;
                }
                tracker.spawn(serve_connection(accepted, ctx.clone(), ticket));
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
    pub(crate) listen_addr: ListenAddr,
    pub(crate) http_addr: Option<SocketAddr>,
    pub(crate) ctx: Arc<ServerCtx>,
    pub(crate) tracker: TaskTracker,
    pub(crate) accept: Option<tokio::task::JoinHandle<()>>,
    /// Dropped with the handle: a registry lease then expires on its own.
    pub(crate) registration: Option<Registration>,
}

impl ServerHandle {
    /// The bound TCP address (useful with port 0). A server on a Unix
    /// socket has none and answers the unspecified `0.0.0.0:0`: use
    /// [`listen_addr`](Self::listen_addr), which covers both.
    pub fn local_addr(&self) -> SocketAddr {
        self.listen_addr
            .tcp()
            .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// Where the server listens, TCP or Unix; it prints as the address a
    /// client connects to (`Client::builder().addr(server.listen_addr())`).
    pub fn listen_addr(&self) -> &ListenAddr {
        &self.listen_addr
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

    /// Everything in the OpenMetrics text format (what `GET /metrics`
    /// serves): brisk's series and those of the registry given to
    /// [`metrics_registry`](crate::ServerBuilder::metrics_registry).
    pub fn metrics_text(&self) -> String {
        crate::metrics::render(&self.ctx.registry)
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
        info!(addr = %self.listen_addr, %signal, "stop signal received: shutting down gracefully");
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
        info!(addr = %self.listen_addr, drained, "brisk server stopped");
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
