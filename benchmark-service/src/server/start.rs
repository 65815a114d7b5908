//! Starting a benchmark server on the caller's tokio runtime: [`start`] for brisk (a
//! [`StartedServer`]) and [`start_peer`] for tarpc, tonic, volo or raw (a [`StartedPeer`]).
//!
//! Both open the [`MessageStore`] before binding, so a wrong database URL or an unwritable data
//! directory stops the start with a clear error instead of a 100 % error rate in a report. Both
//! handles stop serving when dropped.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use brisk::server::ShutdownReport;
use brisk::transport::addr::ListenAddr;
use brisk::{DispatchConfig, Server, ServerConfig, ServerHandle};
use tracing::info;

use crate::players::Player;
use crate::service::{BenchmarkServiceImpl, BenchmarkServiceServer};
use crate::store::MessageStore;

use super::args::ServerArgs;
use super::error::BenchError;

/// A started benchmark server: the brisk handle plus what it serves.
pub struct StartedServer {
    /// The running brisk server; [`shutdown`](StartedServer::shutdown) stops it gracefully,
    /// dropping it closes everything at once.
    pub handle: ServerHandle,
    /// The data behind the service (shared with the handlers).
    pub store: MessageStore,
    /// [`MessageStore::describe`] of the opened store.
    pub store_description: String,
    /// Directory of `messages.json`.
    pub data_dir: PathBuf,
    /// The I/O threads asked for. [`start`] runs on the caller's runtime; only
    /// [`run`](super::run) builds a runtime with this many workers.
    pub io_threads: usize,
}

impl StartedServer {
    /// Where it listens: the bound TCP address (the real port when the config said 0), or
    /// its Unix socket.
    pub fn local_addr(&self) -> ListenAddr {
        self.handle.listen_addr().clone()
    }

    /// The bound HTTP/JSON address, when an HTTP listener is configured.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.handle.http_addr()
    }

    /// The effective server configuration.
    pub fn config(&self) -> &ServerConfig {
        self.handle.config()
    }

    /// Stops accepting, drains in-flight calls (bounded by `shutdown_grace`), then closes.
    pub async fn shutdown(self) -> ShutdownReport {
        self.handle.shutdown().await
    }
}

impl fmt::Debug for StartedServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StartedServer")
            .field("local_addr", &self.local_addr())
            .field("store", &self.store_description)
            .field("data_dir", &self.data_dir)
            .field("io_threads", &self.io_threads)
            .finish_non_exhaustive()
    }
}

/// Opens the [`MessageStore`] and starts the brisk server with the
/// [`BenchmarkService`](crate::BenchmarkService) on the current tokio runtime (which must be
/// multi-threaded when the database is PostgreSQL).
pub async fn start(args: &ServerArgs) -> Result<StartedServer, BenchError> {
    let config = args.server_config()?;
    let io_threads = args.effective_io_threads()?;
    let store_config = args.store_config(&config)?;
    let data_dir = store_config.data_dir.clone();
    let store = MessageStore::open(store_config).await?;
    let store_description = store.describe();
    info!(store = %store_description, "benchmark data ready");
    let handle = Server::builder()
        .config(config)
        .service(BenchmarkServiceServer::new(BenchmarkServiceImpl::new(
            store.clone(),
        )))
        .start()
        .await?;
    Ok(StartedServer {
        handle,
        store,
        store_description,
        data_dir,
        io_threads,
    })
}

/// A started peer server (tarpc, tonic, volo or raw): its address and its accept task.
#[derive(Debug)]
pub struct StartedPeer {
    /// The framework serving.
    pub player: Player,
    /// The bound address.
    pub addr: SocketAddr,
    /// [`MessageStore::describe`] of the opened store.
    pub store_description: String,
    /// The accept loop; aborting it stops accepting (open connections end with the runtime).
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Drop for StartedPeer {
    /// Stops accepting: a peer started in-process must not outlive its handle (its open
    /// connections end with the runtime, or when their clients close them).
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Opens the [`MessageStore`] exactly as [`start`] does and serves `player`'s benchmark service
/// on the current runtime at `--addr`. The database pool gets one connection per I/O thread
/// (the peers run their handlers on the runtime, like brisk's direct dispatch).
pub async fn start_peer(args: &ServerArgs, player: Player) -> Result<StartedPeer, BenchError> {
    let config = ServerConfig {
        dispatch: DispatchConfig::Direct,
        ..ServerConfig::default()
    };
    let store = MessageStore::open(args.store_config(&config)?).await?;
    let store_description = store.describe();
    let addr = args.addr.clone().unwrap_or_else(|| config.addr.clone());
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|source| BenchError::Io {
            context: format!("{player} server: cannot bind {addr}"),
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| BenchError::Io {
        context: format!("{player} server: no local address"),
        source,
    })?;
    let task = tokio::spawn(crate::players::serve_peer(
        player,
        listener,
        store,
        args.volo_transport.unwrap_or_default(),
    ));
    Ok(StartedPeer {
        player,
        addr,
        store_description,
        task,
    })
}
