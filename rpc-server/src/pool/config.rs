//! The pool's settings ([`PoolConfig`], [`QueueKind`]) and what it answers when
//! it cannot take a task ([`PoolError`], [`Rejected`]).
//!
//! The settings are checked once, by [`PoolConfig::validate`], before a pool
//! starts: a running pool never sees a value it cannot honour.

use std::fmt;
use std::io;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Task;

rpc_core::named_enum! {
    /// Which queue sits between submitters and workers. See the [module
    /// docs](super) for the trade-offs.
    #[derive(Default)]
    pub enum QueueKind: "queue" {
        /// Mutex + condvar FIFO (Java `LinkedBlockingQueue`), bounded by
        /// `queue_size` queued tasks.
        Blocking => "blocking",
        /// Hand-off queue waking the most recently parked worker (Java
        /// `LinkedTransferQueue`, as in Motan), bounded by
        /// `queue_size + max_threads` submitted-but-unfinished tasks.
        #[default]
        Transfer => "transfer",
    }
}

/// Sizing and behaviour of a [`WorkerPool`](super::WorkerPool).
///
/// Deserializable (serde) with every key optional, defaulting as in
/// [`PoolConfig::default`]; `keep_alive` is written in milliseconds:
///
/// ```toml
/// core_threads = 2          # default: number of CPUs
/// max_threads = 16          # default: core × 8
/// queue_size = 100000
/// keep_alive_ms = 60000
/// queue = "transfer"        # blocking | transfer
/// name = "brisk-worker"
/// ```
///
/// Deserializing does not validate; call [`validate`](Self::validate) (which
/// [`WorkerPool::new`](super::WorkerPool::new) also does).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PoolConfig {
    /// Threads started up front that never retire before shutdown. May be 0.
    pub core_threads: usize,
    /// Upper bound on live threads; must be ≥ 1 and ≥ `core_threads`.
    pub max_threads: usize,
    /// Queue bound, ≥ 1. For [`QueueKind::Blocking`] the maximum number of
    /// queued tasks; for [`QueueKind::Transfer`] the pool accepts at most
    /// `queue_size + max_threads` unfinished tasks.
    pub queue_size: usize,
    /// How long a thread above `core_threads` may stay idle before it exits
    /// (`keep_alive_ms` in config files).
    #[serde(rename = "keep_alive_ms", with = "rpc_core::config::duration_ms")]
    pub keep_alive: Duration,
    /// Queue implementation.
    pub queue: QueueKind,
    /// Thread-name prefix; threads are named `{name}-{n}` with `n` counting
    /// from 1.
    pub name: String,
}

impl Default for PoolConfig {
    /// core = number of CPUs, max = 8 × core, queue_size = 100 000,
    /// keep_alive = 60 s, [`QueueKind::Transfer`], name `"brisk-worker"`.
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        PoolConfig {
            core_threads: cpus,
            max_threads: cpus.saturating_mul(8),
            queue_size: 100_000,
            keep_alive: Duration::from_secs(60),
            queue: QueueKind::Transfer,
            name: "brisk-worker".to_owned(),
        }
    }
}

impl PoolConfig {
    /// Checks the invariants [`WorkerPool::new`](super::WorkerPool::new) relies on: `max_threads ≥ 1`,
    /// `core_threads ≤ max_threads`, `queue_size ≥ 1`, no NUL in `name`. The
    /// error message starts with the offending field's name.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_threads == 0 {
            return Err("max_threads must be at least 1".to_owned());
        }
        if self.core_threads > self.max_threads {
            return Err(format!(
                "core_threads ({}) must not exceed max_threads ({})",
                self.core_threads, self.max_threads
            ));
        }
        if self.queue_size == 0 {
            return Err("queue_size must be at least 1".to_owned());
        }
        if self.name.contains('\0') {
            return Err("name must not contain NUL bytes".to_owned());
        }
        Ok(())
    }
}

/// Why a [`WorkerPool`](super::WorkerPool) could not be created.
#[derive(Debug)]
pub enum PoolError {
    /// [`PoolConfig::validate`] failed; the message names the field.
    InvalidConfig(String),
    /// The OS refused to start one of the core threads.
    Spawn(io::Error),
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::InvalidConfig(msg) => write!(f, "invalid worker pool config: {msg}"),
            PoolError::Spawn(e) => write!(f, "failed to start worker thread: {e}"),
        }
    }
}

impl std::error::Error for PoolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PoolError::InvalidConfig(_) => None,
            PoolError::Spawn(e) => Some(e),
        }
    }
}

/// A task the pool refused — it is saturated or shut down. The task is handed
/// back untouched so the caller can answer "server busy" (or run it itself).
pub struct Rejected(pub Task);

impl Rejected {
    /// Takes the rejected task back.
    pub fn into_task(self) -> Task {
        self.0
    }
}

impl fmt::Debug for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Rejected(<task>)")
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("task rejected: worker pool is saturated or shut down")
    }
}

impl std::error::Error for Rejected {}
