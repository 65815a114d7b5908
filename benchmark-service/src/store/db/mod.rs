//! The `db` scenario: a real database queried on every lookup.
//!
//! The top rung of the benchmark ladder (nth < cache < file < db) runs
//! `select id, from_uid, to_uid, content from message where id = ?` against a real database on
//! every call, through a bounded connection pool and a prepared statement — what a typical
//! service does, and what jksoa-benchmark's `getMessageFromDb` did over JDBC.
//!
//! [`MessageDb`] is the one handle the server holds; the URL given to [`MessageDb::open`]
//! chooses one of two backends, each in its own module:
//!
//! * **Embedded SQLite** (the default; `sqlite.rs`, an r2d2 pool of rusqlite connections).
//!   Nothing to install, so the benchmark runs anywhere. Its queries block the calling thread,
//!   as JDBC did: [`MessageDb::get_blocking`] is the natural call from worker-pool threads, and
//!   the async [`MessageDb::get`] runs the query inline (it does not hide it behind
//!   `spawn_blocking`), because measuring where that blocking lands is the point of the scenario.
//! * **PostgreSQL** (`postgres.rs`, a deadpool pool of tokio-postgres clients), for measurements
//!   against a networked database. [`MessageDb::get`] truly awaits; [`MessageDb::get_blocking`]
//!   blocks on it for callers on plain threads.
//!
//! Both create and seed the `message` table at open, open every pooled connection eagerly (a
//! bad URL fails the start, not the first query) and wait at most [`CHECKOUT_TIMEOUT`] for a
//! free connection. URLs are parsed and redacted in `url.rs`: passwords never appear in
//! [`MessageDb::describe`] or in errors.

mod limits;
mod postgres;
mod sqlite;
mod url;

#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use limits::{CHECKOUT_TIMEOUT, DEFAULT_POOL_SIZE};
pub use sqlite::SELECT_SQL;

use crate::store::error::StoreError;
use crate::store::message::Message;
use postgres::PgStore;
use sqlite::SqliteStore;
use url::{parse_url, redact_url, DbTarget};

/// Which database engine a [`MessageDb`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbKind {
    /// Embedded SQLite (rusqlite): queries block the calling thread.
    Sqlite,
    /// PostgreSQL (tokio-postgres): queries are async.
    Postgres,
}

/// The `message` table behind a bounded connection pool. Cheap to clone (shared `Arc`).
#[derive(Clone)]
pub struct MessageDb {
    inner: Arc<Backend>,
}

enum Backend {
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

impl std::fmt::Debug for MessageDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("MessageDb").field(&self.describe()).finish()
    }
}

impl MessageDb {
    /// The URL used when none is configured: `sqlite:<temp dir>/brisk-bench.db`.
    pub fn default_url() -> String {
        url::default_url()
    }

    /// Opens (creating and seeding when needed) the database at `url` with a pool of
    /// `pool_size` connections, all opened eagerly so a bad URL fails here, at start.
    ///
    /// Accepted URLs:
    /// * `sqlite:PATH`, `sqlite://PATH`, `sqlite:///ABSOLUTE/PATH` or a plain `PATH` — a SQLite
    ///   file (parent directories are created; a `?query` suffix is ignored);
    /// * `sqlite::memory:` or `:memory:` — a private in-memory SQLite database shared by the
    ///   pool's connections;
    /// * `postgres://user:password@host:port/dbname` (or `postgresql://`), any libpq-style
    ///   query parameters tokio-postgres understands; no TLS.
    ///
    /// For SQLite the opening and seeding run inline (a few milliseconds, once at start). For
    /// PostgreSQL it must be awaited inside a tokio runtime, whose handle the pool keeps: the
    /// connection tasks run on that runtime, so it must outlive the `MessageDb` and be a
    /// multi-thread runtime (or otherwise be driven) for `get` to make progress.
    pub async fn open(url: &str, pool_size: usize) -> Result<MessageDb, StoreError> {
        if pool_size == 0 {
            return Err(StoreError::InvalidConfig(format!(
                "database pool size for {} is 0; it must be at least 1 (the default is {DEFAULT_POOL_SIZE})",
                redact_url(url)
            )));
        }
        let backend = match parse_url(url)? {
            DbTarget::SqliteFile(path) => {
                Backend::Sqlite(SqliteStore::open_file(&path, pool_size)?)
            }
            DbTarget::SqliteMemory => Backend::Sqlite(SqliteStore::open_memory(pool_size)?),
            DbTarget::Postgres(url) => Backend::Postgres(PgStore::open(&url, pool_size).await?),
        };
        let db = MessageDb {
            inner: Arc::new(backend),
        };
        tracing::info!(db = %db.describe(), "benchmark message database ready");
        Ok(db)
    }

    /// The record with `id`, or [`StoreError::NotFound`]; blocks the calling thread.
    ///
    /// SQLite: runs the query on this thread (checking out a pooled connection, waiting up to
    /// [`CHECKOUT_TIMEOUT`] when all are busy). PostgreSQL: blocks on the async query — from a
    /// plain OS thread via the pool's runtime handle, from a multi-thread runtime's thread via
    /// `block_in_place`; on a current-thread runtime it returns
    /// [`StoreError::BlockingInRuntime`] instead of deadlocking.
    pub fn get_blocking(&self, id: i64) -> Result<Message, StoreError> {
        match &*self.inner {
            Backend::Sqlite(store) => store.get(id),
            Backend::Postgres(store) => store.get_blocking(id),
        }
    }

    /// The record with `id`, or [`StoreError::NotFound`].
    ///
    /// SQLite: the query runs **inline, blocking the polling thread** for its duration, as JDBC
    /// blocked the caller in the Java original — the benchmark measures that blocking; offload
    /// it with a worker pool (or [`get_blocking`](MessageDb::get_blocking) in
    /// `spawn_blocking`) if you want it off the I/O thread. PostgreSQL: awaits the async client.
    pub async fn get(&self, id: i64) -> Result<Message, StoreError> {
        match &*self.inner {
            Backend::Sqlite(store) => store.get(id),
            Backend::Postgres(store) => store.get(id).await,
        }
    }

    /// Human-readable target without secrets, e.g. `sqlite /tmp/brisk-bench.db (pool 8)` or
    /// `postgresql 127.0.0.1:5432/bench (pool 8)`.
    pub fn describe(&self) -> String {
        format!("{} (pool {})", self.label(), self.pool_size())
    }

    /// Which engine this is.
    pub fn kind(&self) -> DbKind {
        match &*self.inner {
            Backend::Sqlite(_) => DbKind::Sqlite,
            Backend::Postgres(_) => DbKind::Postgres,
        }
    }

    /// True when [`get`](MessageDb::get) blocks the polling thread (SQLite).
    pub fn is_blocking(&self) -> bool {
        self.kind() == DbKind::Sqlite
    }

    /// Number of pooled connections.
    pub fn pool_size(&self) -> usize {
        match &*self.inner {
            Backend::Sqlite(store) => store.pool_size(),
            Backend::Postgres(store) => store.pool_size(),
        }
    }

    fn label(&self) -> &str {
        match &*self.inner {
            Backend::Sqlite(store) => store.label(),
            Backend::Postgres(store) => store.label(),
        }
    }
}
