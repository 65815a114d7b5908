//! The benchmark server's command-line flags ([`ServerArgs`]) and what they build: the effective
//! brisk [`ServerConfig`], the I/O thread count, and the store's [`StoreConfig`].
//!
//! Every flag is an `Option` so that an unset flag leaves the `--config` file's (or the
//! default) value alone; [`ServerArgs::to_argv`] turns the args back into flags such that clap
//! parses them into the same value, which is how the runner hands them to a child process.
//! Nothing here starts anything: these are pure functions of the flags (and the CPU count).

use std::path::PathBuf;
use std::time::Duration;

use brisk::{Dispatch, QueueKind, RpcError, ServerConfig};

use crate::host::{cpus, CpuList};
use crate::players::{volo, Player};
use crate::store::StoreConfig;

/// Largest database pool chosen automatically (from the worker pool size or the I/O threads).
/// An explicit `--db-pool-size` may exceed it.
pub const MAX_AUTO_DB_POOL: usize = 64;

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

    /// With `--player volo`: volo-thrift's transport, `pool` (its default pooled ping-pong
    /// transport) or `mux` (multiplexed) — the clients must use the same [default: pool]
    #[arg(long, value_name = "pool|mux")]
    pub volo_transport: Option<volo::Transport>,

    /// Run on these CPUs only, as `taskset -c` writes them (`1`, `2-3`; Linux): the client
    /// of a one-machine run on the others is then as on a host of its own. The defaults that
    /// count CPUs (I/O and worker threads) count these [default: every CPU]
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<CpuList>,

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
        push(
            "volo-transport",
            self.volo_transport.map(|t| t.name().to_owned()),
        );
        push("cpus", self.cpus.as_ref().map(CpuList::to_string));
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
            config.dispatch.set_mode(dispatch);
        }
        // The pool's settings exist only in pool dispatch.
        if let Some(pool) = config.dispatch.pool_mut() {
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
                let threads = match config.dispatch.pool() {
                    Some(pool) => pool.max_threads,
                    None => self.effective_io_threads()?,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_addr_flag_round_trips_and_configures() {
        let args = ServerArgs {
            addr: Some("127.0.0.1:0".into()),
            http_addr: Some("127.0.0.1:0".into()),
            cpus: Some("0-1".parse().unwrap()),
            ..ServerArgs::default()
        };
        let argv = args.to_argv();
        assert!(argv.windows(2).any(|w| w == ["--http-addr", "127.0.0.1:0"]));
        assert!(argv.windows(2).any(|w| w == ["--cpus", "0,1"]));
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
