//! The benchmark server: [`BenchmarkService`](crate::BenchmarkService) over a [`MessageStore`],
//! served by brisk with every dispatch and worker-pool setting the suite compares.
//!
//! # Why it exists
//!
//! The benchmark client measures a *separate* server process, as jksoa-benchmark did: a server
//! sharing the client's runtime and CPU would measure the client's scheduling as much as the
//! server. This module is that server, usable three ways:
//!
//! * `cargo run --release --example benchmark_server -- --dispatch pool --queue blocking` — a
//!   person starts it by hand (the example is a thin clap wrapper around [`run`]);
//! * the benchmark client spawns its own executable as a child process,
//!   `current_exe() __serve <ServerArgs::to_argv()>`, whose `__serve` subcommand calls [`run`];
//!   the child prints one `LISTENING <ip:port>` line on stdout ([`LISTENING_PREFIX`],
//!   [`parse_listening_line`], [`wait_for_listening`]) — followed by `LISTENING_HTTP <ip:port>`
//!   when `--http-addr` is set ([`LISTENING_HTTP_PREFIX`], [`wait_for_listening_all`]) — and,
//!   with `--exit-on-stdin-eof`, dies with its parent because its stdin pipe reaches EOF;
//! * tests and benches start it in-process with [`start`] (or [`serve_until`]).
//!
//! # Configuration
//!
//! [`ServerArgs`] are the command-line flags. The effective [`ServerConfig`]
//! ([`ServerArgs::server_config`]) is: the defaults, replaced by `--config FILE` (TOML or YAML,
//! the keys of [`ServerConfig`]) when given, then every flag given explicitly on top. All flags
//! are `Option`s for that reason: an unset flag leaves the file's (or the default) value alone.
//!
//! The store is opened before the server binds, so a wrong database URL or an unwritable data
//! directory stops the start with a clear message instead of a 100 % error rate in a report.
//!
//! # Output protocol (stdout)
//!
//! [`run`] prints the effective configuration ([`effective_config_text`]), then exactly one line
//! `LISTENING <ip:port>` (flushed) — and, only when an HTTP/JSON listener is configured
//! (`--http-addr` or `http_addr` in the config file), right after it one line
//! `LISTENING_HTTP <ip:port>` — and after a shutdown signal a short shutdown report. Logs
//! (tracing) belong on stderr. Writes to stdout after start-up ignore errors, so a parent that
//! closes its end of the pipe does not crash the server.

use std::fmt;
use std::future::Future;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use brisk::server::stats::StatsSnapshot;
use brisk::server::{ShutdownReport, StopSignal, StopSignals};
use brisk::{Dispatch, QueueKind, RpcError, Server, ServerConfig, ServerHandle};
use tracing::{info, warn};

use crate::players::Player;

use crate::service::{BenchmarkServiceImpl, BenchmarkServiceServer};
use crate::store::{MessageStore, StoreConfig, StoreError};

/// The line the server prints once it accepts connections is this prefix followed by the bound
/// address, e.g. `LISTENING 127.0.0.1:40123`.
pub const LISTENING_PREFIX: &str = "LISTENING ";

/// When the server also serves HTTP/JSON, the line right after the `LISTENING` line is this
/// prefix followed by the bound HTTP address, e.g. `LISTENING_HTTP 127.0.0.1:40124`.
pub const LISTENING_HTTP_PREFIX: &str = "LISTENING_HTTP ";

/// The hidden subcommand the benchmark client uses to run its own executable as the server:
/// `current_exe() __serve <ServerArgs::to_argv()>`.
pub const SERVE_SUBCOMMAND: &str = "__serve";

/// Largest database pool chosen automatically (from the worker pool size or the I/O threads).
/// An explicit `--db-pool-size` may exceed it.
pub const MAX_AUTO_DB_POOL: usize = 64;

/// How long [`run`] lets the runtime finish leftover tasks after the graceful shutdown.
const RUNTIME_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// Command-line flags of the benchmark server.
///
/// Every setting is optional: unset means "the value from `--config`, or the default". Build it
/// with clap (`#[command(flatten)]`) or in code (`ServerArgs { addr: Some(..), ..Default::default() }`),
/// and turn it back into flags with [`to_argv`](ServerArgs::to_argv).
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerArgs {
    /// Address to listen on, HOST:PORT; port 0 picks a free port [default: 127.0.0.1:9080]
    #[arg(long, value_name = "HOST:PORT")]
    pub addr: Option<String>,

    /// Also serve the HTTP/JSON protocol (`POST /{service}/{method}`, `/health`, `/metrics`) on
    /// this address, HOST:PORT; port 0 picks a free port [default: none]
    #[arg(long, value_name = "HOST:PORT")]
    pub http_addr: Option<String>,

    /// Where handlers run: `direct` (on the connection's I/O task) or `pool` (on the bounded
    /// worker pool) [default: pool]
    #[arg(long, value_name = "direct|pool")]
    pub dispatch: Option<Dispatch>,

    /// Worker pool queue: `blocking` (mutex + condvar FIFO) or `transfer` (lock-free hand-off)
    /// [default: transfer]
    #[arg(long, value_name = "blocking|transfer")]
    pub queue: Option<QueueKind>,

    /// Worker threads started up front [default: number of CPUs]
    #[arg(long, value_name = "N")]
    pub core_threads: Option<usize>,

    /// Upper bound on worker threads [default: core threads × 8]
    #[arg(long, value_name = "N")]
    pub max_threads: Option<usize>,

    /// Worker pool queue bound; beyond it requests get an immediate "server busy" answer
    /// [default: 100000]
    #[arg(long, value_name = "N")]
    pub queue_size: Option<usize>,

    /// Idle time after which a worker thread above the core size exits [default: 60000]
    #[arg(long, value_name = "MS")]
    pub keep_alive_ms: Option<u64>,

    /// Tokio I/O (runtime worker) threads [default: number of CPUs]
    #[arg(long, value_name = "N")]
    pub io_threads: Option<usize>,

    /// Database of the `db` scenario: `sqlite:PATH`, `sqlite::memory:` or
    /// `postgres://user:password@host:port/dbname` [default: embedded SQLite brisk-bench.db in
    /// the system temp directory]
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,

    /// Database connections [default: max threads with pool dispatch, I/O threads with direct
    /// dispatch, at most 64]
    #[arg(long, value_name = "N")]
    pub db_pool_size: Option<usize>,

    /// Directory of `messages.json` for the `file` scenario (created and seeded when missing)
    /// [default: brisk-bench in the system temp directory]
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// A server config file (.toml, .yaml or .yml, the keys of brisk's ServerConfig); flags given
    /// explicitly override its values
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Register in this service registry while running, e.g. `etcd://127.0.0.1:2379`
    /// (`etcd://HOST:PORT[,…][/ROOT][?ttl_ms=N]`; needs brisk's `etcd` feature:
    /// `cargo run --features etcd …`); a graceful shutdown deregisters
    #[arg(long, value_name = "URL")]
    pub registry: Option<String>,

    /// Address registered for clients, HOST or HOST:PORT [default: the bound address; required
    /// when listening on 0.0.0.0]
    #[arg(long, value_name = "HOST[:PORT]")]
    pub advertise_addr: Option<String>,

    /// This server's registered share of the load [default: 100]
    #[arg(long, value_name = "N")]
    pub weight: Option<u32>,

    /// Serve this player's benchmark service instead of brisk's: tarpc, tonic, volo or raw
    /// (the same store, its own framework; brisk's dispatch and pool flags do not apply)
    /// [default: brisk]
    #[arg(long, value_name = "NAME")]
    pub player: Option<Player>,

    /// Shut down when stdin reaches EOF (used by a parent process so the server dies with it)
    #[arg(long, hide = true)]
    pub exit_on_stdin_eof: bool,
}

impl ServerArgs {
    /// The args as command-line flags, such that parsing them back (clap) yields `self`: only
    /// the flags that are set, each as `--flag value`. Paths that are not valid UTF-8 are
    /// converted lossily; the database URL (password included) appears as given, so it will be
    /// visible in the child's command line.
    pub fn to_argv(&self) -> Vec<String> {
        let mut argv = Vec::new();
        let mut push = |flag: &str, value: Option<String>| {
            if let Some(value) = value {
                argv.push(format!("--{flag}"));
                argv.push(value);
            }
        };
        push("addr", self.addr.clone());
        push("http-addr", self.http_addr.clone());
        push("dispatch", self.dispatch.map(|d| d.name().to_owned()));
        push("queue", self.queue.map(|q| q.to_string()));
        push("core-threads", self.core_threads.map(|n| n.to_string()));
        push("max-threads", self.max_threads.map(|n| n.to_string()));
        push("queue-size", self.queue_size.map(|n| n.to_string()));
        push("keep-alive-ms", self.keep_alive_ms.map(|n| n.to_string()));
        push("io-threads", self.io_threads.map(|n| n.to_string()));
        push("db", self.db.clone());
        push("db-pool-size", self.db_pool_size.map(|n| n.to_string()));
        push(
            "data-dir",
            self.data_dir.as_ref().map(|p| p.display().to_string()),
        );
        push(
            "config",
            self.config.as_ref().map(|p| p.display().to_string()),
        );
        push("registry", self.registry.clone());
        push("advertise-addr", self.advertise_addr.clone());
        push("weight", self.weight.map(|n| n.to_string()));
        push("player", self.player.map(|p| p.name().to_owned()));
        if self.exit_on_stdin_eof {
            argv.push("--exit-on-stdin-eof".to_owned());
        }
        argv
    }

    /// The effective, validated server configuration: the defaults, or `--config` when given,
    /// then every flag that is set.
    ///
    /// When only one of `--core-threads` / `--max-threads` is given and it conflicts with the
    /// other bound (e.g. `--max-threads 4` on a 16-CPU host, whose default core size is 16), the
    /// bound that was not given follows the one that was. Both given and conflicting is an
    /// error. Errors are [`RpcError::Config`] naming the key.
    pub fn server_config(&self) -> Result<ServerConfig, RpcError> {
        let mut config = match &self.config {
            // Loaded without validation: the flags may still fix a value; validated below.
            Some(path) => brisk::rpc_core::config::load_file::<ServerConfig>(path)?,
            None => ServerConfig::default(),
        };
        if let Some(addr) = &self.addr {
            config.addr = addr.clone();
        }
        if let Some(addr) = &self.http_addr {
            config.http_addr = Some(addr.clone());
        }
        if let Some(dispatch) = self.dispatch {
            config.dispatch = dispatch;
        }
        let pool = &mut config.pool;
        if let Some(queue) = self.queue {
            pool.queue = queue;
        }
        if let Some(n) = self.core_threads {
            pool.core_threads = n;
        }
        if let Some(n) = self.max_threads {
            pool.max_threads = n;
        }
        if pool.core_threads > pool.max_threads {
            match (self.core_threads.is_some(), self.max_threads.is_some()) {
                (false, true) => pool.core_threads = pool.max_threads,
                (true, false) => pool.max_threads = pool.core_threads,
                _ => {}
            }
        }
        if let Some(n) = self.queue_size {
            pool.queue_size = n;
        }
        if let Some(ms) = self.keep_alive_ms {
            pool.keep_alive = Duration::from_millis(ms);
        }
        if let Some(url) = &self.registry {
            config.registry = Some(url.clone());
        }
        if let Some(addr) = &self.advertise_addr {
            config.advertise_addr = Some(addr.clone());
        }
        if let Some(weight) = self.weight {
            config.weight = weight;
        }
        config.validate()?;
        Ok(config)
    }

    /// Tokio worker threads: `--io-threads`, or the number of CPUs.
    pub fn effective_io_threads(&self) -> Result<usize, RpcError> {
        match self.io_threads {
            Some(0) => Err(RpcError::config("io-threads", "must be at least 1")),
            Some(n) => Ok(n),
            None => Ok(cpus()),
        }
    }

    /// Database pool size: `--db-pool-size`, or one connection per thread that may run a query
    /// at once (max worker threads with pool dispatch, I/O threads with direct dispatch), capped
    /// at [`MAX_AUTO_DB_POOL`].
    pub fn effective_db_pool_size(&self, config: &ServerConfig) -> Result<usize, RpcError> {
        match self.db_pool_size {
            Some(0) => Err(RpcError::config("db-pool-size", "must be at least 1")),
            Some(n) => Ok(n),
            None => {
                let threads = match config.dispatch {
                    Dispatch::Pool => config.pool.max_threads,
                    Dispatch::Direct => self.effective_io_threads()?,
                };
                Ok(threads.clamp(1, MAX_AUTO_DB_POOL))
            }
        }
    }

    /// Where the data lives: `--data-dir` (or the default directory), `--db` (or the default
    /// SQLite file) and the pool size from [`effective_db_pool_size`](Self::effective_db_pool_size).
    pub fn store_config(&self, config: &ServerConfig) -> Result<StoreConfig, RpcError> {
        let mut store = match &self.data_dir {
            Some(dir) => StoreConfig::new(dir),
            None => StoreConfig::default(),
        };
        store.db_url = self.db.clone();
        store.db_pool_size = self.effective_db_pool_size(config)?;
        Ok(store)
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Why the benchmark server could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// An invalid setting (flag or config file; the message names the key), or the server could
    /// not bind its address.
    #[error("{0}")]
    Rpc(#[from] RpcError),

    /// The message file or the database could not be opened.
    #[error("cannot open the benchmark data: {0}")]
    Store(#[from] StoreError),

    /// An operating-system level failure outside brisk (creating the runtime, reading the child's
    /// output).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A spawned server process ended before it printed its `LISTENING` line.
    #[error("the benchmark server process exited before it started listening (see its error output above){}", last_output_hint(.last_output))]
    ChildExited {
        /// The last lines the child printed on stdout, if any.
        last_output: Vec<String>,
    },
}

fn last_output_hint(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("; its last output: {}", lines.join(" | "))
    }
}

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
    /// The I/O threads asked for. [`start`] runs on the caller's runtime; only [`run`] builds
    /// a runtime with this many workers.
    pub io_threads: usize,
}

impl StartedServer {
    /// The bound address (the real port when the config said 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.handle.local_addr()
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
        dispatch: Dispatch::Direct,
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
    let task = tokio::spawn(crate::players::serve_peer(player, listener, store));
    Ok(StartedPeer {
        player,
        addr,
        store_description,
        task,
    })
}

/// [`run`] for a peer: starts it, prints `LISTENING <ip:port>`, serves until `shutdown` (or the
/// accept loop fails, which is an error).
async fn serve_peer_until<F>(
    args: &ServerArgs,
    player: Player,
    shutdown: F,
) -> Result<(), BenchError>
where
    F: Future<Output = ShutdownCause>,
{
    let mut peer = start_peer(args, player).await?;
    let mut out = std::io::stdout();
    say(
        &mut out,
        &format!(
            "{player} benchmark server\n  address          {}\n  settings         {}\n  data             {}",
            peer.addr,
            player.settings(),
            peer.store_description
        ),
    );
    say(&mut out, &format!("{LISTENING_PREFIX}{}", peer.addr));
    tokio::select! {
        cause = shutdown => {
            say(&mut out, &format!("{player} benchmark server stopped ({cause})"));
            Ok(())
        }
        ended = &mut peer.task => {
            let why = match ended {
                Ok(Ok(())) => "the accept loop ended".to_owned(),
                Ok(Err(e)) => e.to_string(),
                Err(e) => e.to_string(),
            };
            Err(BenchError::Io {
                context: format!("{player} server stopped serving"),
                source: std::io::Error::other(why),
            })
        }
    }
}

/// The block printed at start: address, dispatch, queue, core/max threads, queue size,
/// keep-alive, I/O threads, max frame size, database and data directory.
pub fn effective_config_text(server: &StartedServer) -> String {
    let config = server.config();
    let pool = &config.pool;
    let unused = if config.dispatch == Dispatch::Direct {
        "  (unused: direct dispatch)"
    } else {
        ""
    };
    let frame = config.transport.max_frame_size;
    let lines = [
        "brisk benchmark server".to_owned(),
        format!(
            "  address          {} (configured {})",
            server.local_addr(),
            config.addr
        ),
        format!("  dispatch         {}", config.dispatch),
        format!("  queue            {}{unused}", pool.queue),
        format!(
            "  worker threads   core {}, max {}{unused}",
            pool.core_threads, pool.max_threads
        ),
        format!("  queue size       {}{unused}", pool.queue_size),
        format!(
            "  keep-alive       {} ms{unused}",
            pool.keep_alive.as_millis()
        ),
        format!("  io threads       {}", server.io_threads),
        format!(
            "  max frame size   {frame} bytes ({:.1} MiB)",
            frame as f64 / (1024.0 * 1024.0)
        ),
        format!("  db               {}", server.store.db.describe()),
        format!("  data dir         {}", server.data_dir.display()),
    ];
    let mut text = lines.join("\n");
    if let Some(http) = server.http_addr() {
        text.push_str(&format!("\n  http/json        {http}"));
    }
    if let Some(registration) = server.handle.registration() {
        let addr = registration
            .instances()
            .first()
            .map(|i| i.addr.as_str())
            .unwrap_or("?");
        text.push_str(&format!(
            "\n  registry         {} as {addr} (weight {})",
            registration.registry(),
            config.weight
        ));
    }
    text
}

/// What ended a [`serve_until`] run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownCause {
    /// SIGINT / Ctrl-C.
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// stdin reached EOF (`--exit-on-stdin-eof`: the parent process went away).
    StdinEof,
    /// The caller's shutdown future completed for another reason.
    Requested,
}

impl fmt::Display for ShutdownCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ShutdownCause::Interrupt => "interrupt (Ctrl-C)",
            ShutdownCause::Terminate => "SIGTERM",
            ShutdownCause::StdinEof => "stdin closed",
            ShutdownCause::Requested => "shutdown requested",
        })
    }
}

/// Writes `text` and a newline, then flushes; errors are logged, not returned (a parent that
/// stopped reading must not bring the server down).
fn say(out: &mut impl Write, text: &str) {
    let result = writeln!(out, "{text}").and_then(|()| out.flush());
    if let Err(e) = result {
        warn!(error = %e, "could not write to the server's output");
    }
}

/// Starts the server ([`start`]), prints the effective configuration and the
/// `LISTENING <ip:port>` line to `out`, waits for `shutdown`, shuts down gracefully and prints
/// the shutdown report. [`run`] is this with stdout and the process signals.
pub async fn serve_until<W, F>(
    args: &ServerArgs,
    mut out: W,
    shutdown: F,
) -> Result<ShutdownReport, BenchError>
where
    W: Write,
    F: Future<Output = ShutdownCause>,
{
    let server = start(args).await?;
    say(&mut out, &effective_config_text(&server));
    say(
        &mut out,
        &format!("{LISTENING_PREFIX}{}", server.local_addr()),
    );
    if let Some(http) = server.http_addr() {
        say(&mut out, &format!("{LISTENING_HTTP_PREFIX}{http}"));
    }
    let cause = shutdown.await;
    info!(%cause, "benchmark server shutting down");
    let stats = server.handle.stats();
    let pool_stats = server.handle.pool_stats();
    let report = server.shutdown().await;
    let mut text = shutdown_text(cause, &report, &stats);
    if let Some(pool) = pool_stats {
        text.push_str(&format!(
            "\n  worker pool      {} tasks completed, {} rejected, largest size {} threads",
            pool.completed, pool.rejected, pool.largest_pool_size
        ));
    }
    say(&mut out, &text);
    Ok(report)
}

fn shutdown_text(cause: ShutdownCause, report: &ShutdownReport, stats: &StatsSnapshot) -> String {
    format!(
        "brisk benchmark server stopped ({cause})\n  \
         drained          {} in {} ms\n  \
         requests         {} ({} errors, {} rejected as busy)\n  \
         connections      {} accepted, {} refused, {} evicted",
        if report.drained {
            "all in-flight calls"
        } else {
            "NOT all in-flight calls (grace period over)"
        },
        report.elapsed.as_millis(),
        stats.requests,
        stats.errors,
        stats.busy_rejections,
        stats.accepted_connections,
        stats.refused_connections,
        stats.evicted_connections,
    )
}

/// What [`run`] stops on: SIGINT or SIGTERM (brisk's [`StopSignals`], the same handlers
/// `ServerHandle::shutdown_on_signals` uses), registered up front so that a signal arriving
/// right after the `LISTENING` line is already handled gracefully, and optionally the end of
/// stdin.
struct ShutdownSignals {
    signals: StopSignals,
    stdin_eof: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl ShutdownSignals {
    /// Registers the handlers (inside a runtime); with `watch_stdin`, starts a thread that reads
    /// stdin to EOF.
    fn install(watch_stdin: bool) -> ShutdownSignals {
        let stdin_eof = watch_stdin.then(|| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            // A plain thread, not tokio's stdin: a blocking read would keep the runtime from
            // shutting down. The thread is detached and ends with the process.
            let spawned = std::thread::Builder::new()
                .name("stdin-watch".into())
                .spawn(move || {
                    let mut stdin = std::io::stdin().lock();
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = std::io::Read::read(&mut stdin, &mut buf) {
                        if n == 0 {
                            break;
                        }
                    }
                    let _ = tx.send(());
                });
            if let Err(e) = spawned {
                warn!(error = %e, "cannot watch stdin; --exit-on-stdin-eof has no effect");
            }
            rx
        });
        ShutdownSignals {
            signals: StopSignals::install(),
            stdin_eof,
        }
    }

    /// Completes on the first signal.
    async fn wait(mut self) -> ShutdownCause {
        let stdin = async {
            match self.stdin_eof.as_mut() {
                // A dropped sender (thread failed) counts as EOF too: either way stdin is gone.
                Some(rx) => {
                    let _ = rx.await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            signal = self.signals.wait() => match signal {
                StopSignal::Interrupt => ShutdownCause::Interrupt,
                StopSignal::Terminate => ShutdownCause::Terminate,
            },
            _ = stdin => ShutdownCause::StdinEof,
        }
    }
}

/// The blocking entry point of the benchmark server: builds a multi-thread tokio runtime with
/// `--io-threads` workers, starts, prints the effective configuration and `LISTENING <ip:port>`
/// on stdout, waits for Ctrl-C, SIGTERM or (with `--exit-on-stdin-eof`) the end of stdin, then
/// shuts down gracefully and prints the shutdown report.
pub fn run(args: ServerArgs) -> Result<(), BenchError> {
    let io_threads = args.effective_io_threads()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(io_threads)
        .thread_name("brisk-io")
        .enable_all()
        .build()
        .map_err(|source| BenchError::Io {
            context: format!("cannot start the tokio runtime with {io_threads} I/O threads"),
            source,
        })?;
    let result = runtime.block_on(async {
        let signals = ShutdownSignals::install(args.exit_on_stdin_eof);
        match args.player {
            Some(player) if player != Player::Brisk => {
                serve_peer_until(&args, player, signals.wait()).await
            }
            _ => serve_until(&args, std::io::stdout(), signals.wait())
                .await
                .map(drop),
        }
    });
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_TIMEOUT);
    result
}

/// The address in a `LISTENING <ip:port>` line, or `None` for any other line.
pub fn parse_listening_line(line: &str) -> Option<SocketAddr> {
    line.trim_end()
        .strip_prefix(LISTENING_PREFIX)?
        .trim()
        .parse()
        .ok()
}

/// The address in a `LISTENING_HTTP <ip:port>` line, or `None` for any other line.
pub fn parse_listening_http_line(line: &str) -> Option<SocketAddr> {
    line.trim_end()
        .strip_prefix(LISTENING_HTTP_PREFIX)?
        .trim()
        .parse()
        .ok()
}

/// The addresses a server process announced on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListeningAddrs {
    /// The binary protocol's address (the `LISTENING` line).
    pub addr: SocketAddr,
    /// The HTTP/JSON address (the `LISTENING_HTTP` line), when there was one.
    pub http_addr: Option<SocketAddr>,
}

/// [`wait_for_listening`], and with `expect_http` also the `LISTENING_HTTP` line the server
/// prints right after `LISTENING` when it serves HTTP (pass `true` when the child was started
/// with `--http-addr`). Only the one line after `LISTENING` is examined: if it is not
/// `LISTENING_HTTP` it goes to `on_line` and `http_addr` is `None`. Without `expect_http` this
/// never reads past `LISTENING` (a server without HTTP prints nothing more until it stops).
pub fn wait_for_listening_all(
    reader: &mut impl BufRead,
    expect_http: bool,
    mut on_line: impl FnMut(&str),
) -> Result<ListeningAddrs, BenchError> {
    let addr = wait_for_listening(reader, &mut on_line)?;
    if !expect_http {
        return Ok(ListeningAddrs {
            addr,
            http_addr: None,
        });
    }
    let mut line = String::new();
    let n = reader
        .read_line(&mut line)
        .map_err(|source| BenchError::Io {
            context: "reading the benchmark server's output".into(),
            source,
        })?;
    if n == 0 {
        return Err(BenchError::ChildExited {
            last_output: vec![format!("{LISTENING_PREFIX}{addr}")],
        });
    }
    let http_addr = parse_listening_http_line(&line);
    if http_addr.is_none() {
        on_line(line.trim_end());
    }
    Ok(ListeningAddrs { addr, http_addr })
}

/// Reads a server process's stdout until its `LISTENING` line and returns the address. Every
/// other line is handed to `on_line` (e.g. to echo the effective configuration). Blocks; the
/// caller should keep draining (or drop) the reader afterwards. If the output ends first (the
/// child failed; its error is on its stderr) the error is [`BenchError::ChildExited`].
pub fn wait_for_listening(
    reader: &mut impl BufRead,
    mut on_line: impl FnMut(&str),
) -> Result<SocketAddr, BenchError> {
    let mut last = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .map_err(|source| BenchError::Io {
                context: "reading the benchmark server's output".into(),
                source,
            })?;
        if n == 0 {
            return Err(BenchError::ChildExited { last_output: last });
        }
        if let Some(addr) = parse_listening_line(&line) {
            return Ok(addr);
        }
        let text = line.trim_end();
        on_line(text);
        if last.len() == 5 {
            last.remove(0);
        }
        last.push(text.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_lines() {
        assert_eq!(
            parse_listening_line("LISTENING 127.0.0.1:9080\n"),
            Some("127.0.0.1:9080".parse().unwrap())
        );
        assert_eq!(parse_listening_line("  address 127.0.0.1:9080"), None);
        let mut out = std::io::Cursor::new(b"a\nb\nLISTENING [::1]:5\nafter\n".to_vec());
        let mut seen = Vec::new();
        let addr = wait_for_listening(&mut out, |l| seen.push(l.to_owned())).unwrap();
        assert_eq!(addr, "[::1]:5".parse().unwrap());
        assert_eq!(seen, ["a", "b"]);
        let err =
            wait_for_listening(&mut std::io::Cursor::new(b"oops\n".to_vec()), |_| {}).unwrap_err();
        assert!(err.to_string().contains("oops"), "{err}");
    }

    #[test]
    fn listening_http_lines() {
        assert_eq!(
            parse_listening_http_line("LISTENING_HTTP 127.0.0.1:9081\n"),
            Some("127.0.0.1:9081".parse().unwrap())
        );
        // Neither parser takes the other's line.
        assert_eq!(parse_listening_line("LISTENING_HTTP 127.0.0.1:9081"), None);
        assert_eq!(parse_listening_http_line("LISTENING 127.0.0.1:9080"), None);

        let text = b"cfg\nLISTENING 127.0.0.1:1\nLISTENING_HTTP 127.0.0.1:2\nlater\n";
        let mut seen = Vec::new();
        let got = wait_for_listening_all(&mut std::io::Cursor::new(text.to_vec()), true, |l| {
            seen.push(l.to_owned())
        })
        .unwrap();
        assert_eq!(got.addr, "127.0.0.1:1".parse().unwrap());
        assert_eq!(got.http_addr, Some("127.0.0.1:2".parse().unwrap()));
        assert_eq!(seen, ["cfg"]);

        // Not expected: stops at LISTENING.
        let mut reader = std::io::Cursor::new(text.to_vec());
        let got = wait_for_listening_all(&mut reader, false, |_| {}).unwrap();
        assert_eq!(got.http_addr, None);
        let mut rest = String::new();
        reader.read_line(&mut rest).unwrap();
        assert_eq!(rest, "LISTENING_HTTP 127.0.0.1:2\n");

        // Expected but another line follows: echoed, no HTTP address.
        let mut seen = Vec::new();
        let got = wait_for_listening_all(
            &mut std::io::Cursor::new(b"LISTENING 127.0.0.1:1\nother\n".to_vec()),
            true,
            |l| seen.push(l.to_owned()),
        )
        .unwrap();
        assert_eq!(got.http_addr, None);
        assert_eq!(seen, ["other"]);
    }

    #[test]
    fn http_addr_flag_round_trips_and_configures() {
        let args = ServerArgs {
            addr: Some("127.0.0.1:0".into()),
            http_addr: Some("127.0.0.1:0".into()),
            ..ServerArgs::default()
        };
        let argv = args.to_argv();
        assert!(argv.windows(2).any(|w| w == ["--http-addr", "127.0.0.1:0"]));
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: ServerArgs,
        }
        let parsed =
            <Cli as clap::Parser>::try_parse_from(std::iter::once("x".to_owned()).chain(argv))
                .unwrap();
        assert_eq!(parsed.args, args);
        let config = args.server_config().unwrap();
        assert_eq!(config.http_addr.as_deref(), Some("127.0.0.1:0"));
        assert_eq!(
            ServerArgs::default().server_config().unwrap().http_addr,
            None
        );
    }
}
