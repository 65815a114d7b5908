//! The `db` scenario: a real database queried on every lookup.
//!
//! The top rung of the benchmark ladder (nth < cache < file < db) runs
//! `select id, from_uid, to_uid, content from message where id = ?` against a real database on
//! every call, through a bounded connection pool and a prepared statement — what a typical
//! service does, and what jksoa-benchmark's `getMessageFromDb` did over JDBC.
//!
//! Two backends, chosen by URL ([`MessageDb::open`]):
//!
//! * **Embedded SQLite** (the default, `sqlite:PATH`, `sqlite::memory:` or a plain path) via
//!   rusqlite. Nothing to install, so the benchmark runs anywhere. The table is created and
//!   seeded idempotently (`insert or replace`) at open, the file is put in WAL mode so readers
//!   never block each other, and the pool holds `pool_size` connections, each caching the
//!   prepared select (`prepare_cached`). A SQLite query is **synchronous**: it blocks the
//!   calling thread, exactly like JDBC did in the Java original. That is the point of the
//!   scenario — the server decides whether the blocking happens on an I/O thread or on a worker
//!   pool, and the benchmark measures the difference. So [`MessageDb::get_blocking`] is the
//!   natural call from worker-pool threads, and the async [`MessageDb::get`] runs the query
//!   inline (it does not hide it behind `spawn_blocking`).
//! * **PostgreSQL** (`postgres://…` / `postgresql://…`) via tokio-postgres, for measurements
//!   against a networked database. The table is created and seeded at open (under an advisory
//!   lock, so several servers may start at once); the pool holds `pool_size` clients, each with
//!   the select prepared once. [`MessageDb::get`] truly awaits; [`MessageDb::get_blocking`]
//!   blocks on it for callers on plain threads.
//!
//! Both pools are bounded with checkout/return semantics (one query per connection at a time,
//! like a JDBC pool) and a checkout timeout ([`CHECKOUT_TIMEOUT`]), so "pool too small for this
//! concurrency" shows up as latency and, at worst, a clear [`StoreError::PoolTimeout`] rather
//! than a hang. Passwords never appear in [`MessageDb::describe`] or in errors.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};
use rusqlite::{OpenFlags, OptionalExtension, TransactionBehavior};
use tokio_postgres::types::Type;
use tokio_postgres::NoTls;

use crate::store::error::StoreError;
use crate::store::message::{seed_messages, Message};

/// Pool size used when the configuration does not give one.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// How long a caller waits for a free pooled connection before [`StoreError::PoolTimeout`].
pub const CHECKOUT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a SQLite connection waits on a lock held by another connection or process.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connect timeout applied to PostgreSQL URLs that do not set `connect_timeout`.
const PG_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// `application_name` applied to PostgreSQL URLs that do not set one.
const PG_APPLICATION_NAME: &str = "brisk-benchmark";

/// Key of the transaction-scoped advisory lock serialising concurrent seeding ("brisk\0\0\x01").
const PG_SEED_LOCK_KEY: i64 = 0x6272_6973_6b00_0001;

/// The scenario's query, SQLite placeholder syntax.
pub const SELECT_SQL: &str = "select id, from_uid, to_uid, content from message where id = ?";

const PG_SELECT_SQL: &str = "select id, from_uid, to_uid, content from message where id = $1";

const SQLITE_CREATE_SQL: &str = "create table if not exists message (\
     id integer primary key, \
     from_uid integer not null, \
     to_uid integer not null, \
     content text not null)";

const SQLITE_SEED_SQL: &str =
    "insert or replace into message (id, from_uid, to_uid, content) values (?1, ?2, ?3, ?4)";

const PG_CREATE_SQL: &str = "create table if not exists message (\
     id bigint primary key, \
     from_uid bigint not null, \
     to_uid bigint not null, \
     content text not null)";

const PG_SEED_SQL: &str = "insert into message (id, from_uid, to_uid, content) \
     values ($1, $2, $3, $4) \
     on conflict (id) do update set \
     from_uid = excluded.from_uid, to_uid = excluded.to_uid, content = excluded.content";

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
    Sqlite(SqlitePool),
    // boxed: the PostgreSQL pool is several times the size of the SQLite one
    Postgres(Box<PgPool>),
}

impl std::fmt::Debug for MessageDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("MessageDb").field(&self.describe()).finish()
    }
}

impl MessageDb {
    /// The URL used when none is configured: `sqlite:<temp dir>/brisk-bench.db`.
    pub fn default_url() -> String {
        format!(
            "sqlite:{}",
            std::env::temp_dir().join("brisk-bench.db").display()
        )
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
            DbTarget::SqliteFile(path) => Backend::Sqlite(SqlitePool::open_file(&path, pool_size)?),
            DbTarget::SqliteMemory => Backend::Sqlite(SqlitePool::open_memory(pool_size)?),
            DbTarget::Postgres(url) => {
                Backend::Postgres(Box::new(PgPool::open(&url, pool_size).await?))
            }
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
            Backend::Sqlite(pool) => pool.get(id),
            Backend::Postgres(pool) => pool.get_blocking(id),
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
            Backend::Sqlite(pool) => pool.get(id),
            Backend::Postgres(pool) => pool.get(id).await,
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
            Backend::Sqlite(pool) => pool.slots.len(),
            Backend::Postgres(pool) => pool.size,
        }
    }

    fn label(&self) -> &str {
        match &*self.inner {
            Backend::Sqlite(pool) => &pool.label,
            Backend::Postgres(pool) => &pool.label,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// URL handling

#[derive(Debug, PartialEq, Eq)]
enum DbTarget {
    SqliteFile(PathBuf),
    SqliteMemory,
    Postgres(String),
}

fn parse_url(url: &str) -> Result<DbTarget, StoreError> {
    let url = url.trim();
    if url.is_empty() {
        return Err(StoreError::InvalidConfig(format!(
            "the database URL is empty; leave it unset for the default {}",
            MessageDb::default_url()
        )));
    }
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
        return Ok(DbTarget::Postgres(url.to_string()));
    }
    let path = if lower.starts_with("sqlite:") {
        let rest = &url["sqlite:".len()..];
        let rest = rest.strip_prefix("//").unwrap_or(rest);
        rest.split('?').next().unwrap_or(rest)
    } else if lower.contains("://") {
        return Err(StoreError::UnsupportedUrl {
            url: redact_url(url),
        });
    } else {
        url
    };
    match path {
        "" => Err(StoreError::InvalidConfig(format!(
            "the SQLite URL {url} has no path; use sqlite:PATH or sqlite::memory:"
        ))),
        ":memory:" => Ok(DbTarget::SqliteMemory),
        p => Ok(DbTarget::SqliteFile(PathBuf::from(p))),
    }
}

/// `url` with any password replaced by `***` (userinfo `user:pw@` and `password=` parameters).
pub(crate) fn redact_url(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let auth_start = scheme_end + 3;
        let rest = &out[auth_start..];
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            if let Some(colon) = rest[..at].find(':') {
                out.replace_range(auth_start + colon + 1..auth_start + at, "***");
            }
        }
    }
    if let Some(q) = out.find('?') {
        let (base, query) = out.split_at(q + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_string(),
            })
            .collect();
        out = format!("{base}{}", query.join("&"));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// SQLite

/// A fixed set of connections, each in its own slot; `free` lists the slots not checked out.
/// Checkout pops a free slot index (waiting on `available` when there is none) and locks that
/// slot's (then uncontended) mutex; dropping the guard pushes the index back. Because the index
/// is returned in `Drop`, a panic while a connection is held cannot shrink the pool.
struct SqlitePool {
    slots: Vec<Mutex<rusqlite::Connection>>,
    free: Mutex<Vec<usize>>,
    available: Condvar,
    /// `sqlite PATH` / `sqlite :memory:`
    label: String,
    /// Path (or `:memory:`) for error messages.
    target: String,
}

struct SqliteConn<'a> {
    pool: &'a SqlitePool,
    slot: usize,
    conn: MutexGuard<'a, rusqlite::Connection>,
}

impl Drop for SqliteConn<'_> {
    fn drop(&mut self) {
        self.pool.free.lock().push(self.slot);
        self.pool.available.notify_one();
    }
}

fn sqlite_err(target: &str, action: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    let target = target.to_string();
    move |source| StoreError::Sqlite {
        target,
        action,
        source,
    }
}

impl SqlitePool {
    fn open_file(path: &Path, pool_size: usize) -> Result<SqlitePool, StoreError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| StoreError::FileIo {
                path: path.to_path_buf(),
                action: "create the directory for the SQLite database",
                source,
            })?;
        }
        let target = path.display().to_string();
        SqlitePool::open(&path.to_string_lossy(), target, false, pool_size)
    }

    fn open_memory(pool_size: usize) -> Result<SqlitePool, StoreError> {
        // A plain ":memory:" would give every pooled connection its own empty database; a
        // uniquely named shared-cache memory database is one database for the whole pool, alive
        // while any of its connections is open.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let uri = format!(
            "file:brisk-bench-mem-{}-{}?mode=memory&cache=shared",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        SqlitePool::open(&uri, ":memory:".to_string(), true, pool_size)
    }

    fn open(
        open_path: &str,
        target: String,
        memory: bool,
        pool_size: usize,
    ) -> Result<SqlitePool, StoreError> {
        let mut first = open_sqlite_conn(open_path, &target, memory)?;
        seed_sqlite(&mut first, &target)?;
        let mut conns = vec![first];
        for _ in 1..pool_size {
            conns.push(open_sqlite_conn(open_path, &target, memory)?);
        }
        for conn in &conns {
            // Fill each connection's statement cache now; this also checks the table's columns.
            conn.prepare_cached(SELECT_SQL)
                .map_err(sqlite_err(&target, "prepare the select on table message"))?;
        }
        Ok(SqlitePool {
            slots: conns.into_iter().map(Mutex::new).collect(),
            free: Mutex::new((0..pool_size).rev().collect()),
            available: Condvar::new(),
            label: format!("sqlite {target}"),
            target,
        })
    }

    fn checkout(&self, timeout: Duration) -> Result<SqliteConn<'_>, StoreError> {
        let start = Instant::now();
        let deadline = start + timeout;
        let mut free = self.free.lock();
        loop {
            if let Some(slot) = free.pop() {
                drop(free);
                return Ok(SqliteConn {
                    pool: self,
                    slot,
                    conn: self.slots[slot].lock(),
                });
            }
            if self.available.wait_until(&mut free, deadline).timed_out() && free.is_empty() {
                return Err(StoreError::PoolTimeout {
                    target: self.label.clone(),
                    pool_size: self.slots.len(),
                    waited: start.elapsed(),
                });
            }
        }
    }

    fn get(&self, id: i64) -> Result<Message, StoreError> {
        let conn = self.checkout(CHECKOUT_TIMEOUT)?;
        let mut stmt = conn.conn.prepare_cached(SELECT_SQL).map_err(sqlite_err(
            &self.target,
            "prepare the select on table message",
        ))?;
        let row = stmt
            .query_row([id], |row| {
                Ok(Message {
                    id: row.get(0)?,
                    from_uid: row.get(1)?,
                    to_uid: row.get(2)?,
                    content: row.get(3)?,
                })
            })
            .optional()
            .map_err(sqlite_err(&self.target, "query table message by id"))?;
        row.ok_or(StoreError::NotFound(id))
    }
}

fn open_sqlite_conn(
    open_path: &str,
    target: &str,
    memory: bool,
) -> Result<rusqlite::Connection, StoreError> {
    // The default flags: read-write, create, URI filenames, no mutex (each connection is used
    // by one thread at a time, guarded by its pool slot).
    let conn = rusqlite::Connection::open_with_flags(open_path, OpenFlags::default())
        .map_err(sqlite_err(target, "open"))?;
    conn.busy_timeout(SQLITE_BUSY_TIMEOUT)
        .map_err(sqlite_err(target, "set the busy timeout"))?;
    if !memory {
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(sqlite_err(target, "switch to WAL journal mode"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(db = %target, mode = %mode, "SQLite refused WAL journal mode; readers may block each other");
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sqlite_err(target, "set synchronous=NORMAL"))?;
    }
    Ok(conn)
}

fn seed_sqlite(conn: &mut rusqlite::Connection, target: &str) -> Result<(), StoreError> {
    let action = "create and seed table message";
    // IMMEDIATE takes the write lock up front, so concurrent starters queue on the busy timeout
    // instead of failing on a read-to-write lock upgrade.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite_err(target, action))?;
    tx.execute_batch(SQLITE_CREATE_SQL)
        .map_err(sqlite_err(target, action))?;
    {
        let mut insert = tx
            .prepare(SQLITE_SEED_SQL)
            .map_err(sqlite_err(target, action))?;
        for m in seed_messages() {
            insert
                .execute(rusqlite::params![m.id, m.from_uid, m.to_uid, m.content])
                .map_err(sqlite_err(target, action))?;
        }
    }
    tx.commit().map_err(sqlite_err(target, action))
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

/// `size` permits bound the clients in use; `idle` holds connected clients not in use. A client
/// found closed (server restart, network drop) is discarded and a new one connected in its
/// place, so the pool heals instead of failing every later call.
struct PgPool {
    config: tokio_postgres::Config,
    permits: tokio::sync::Semaphore,
    idle: Mutex<Vec<PgConn>>,
    size: usize,
    handle: tokio::runtime::Handle,
    /// `postgresql host:port/db`
    label: String,
    /// The URL with the password redacted, for error messages.
    target: String,
    /// Connections opened over the pool's life (for logs and tests).
    connects: AtomicUsize,
}

struct PgConn {
    client: tokio_postgres::Client,
    select: tokio_postgres::Statement,
}

fn pg_err(target: &str, action: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    let target = target.to_string();
    move |source| StoreError::Postgres {
        target,
        action,
        source,
    }
}

impl PgPool {
    async fn open(url: &str, pool_size: usize) -> Result<PgPool, StoreError> {
        let target = redact_url(url);
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(pg_err(&target, "parse the PostgreSQL URL"))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(PG_CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name(PG_APPLICATION_NAME);
        }
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            StoreError::InvalidConfig(format!(
                "the PostgreSQL database {target} must be opened from inside a tokio runtime"
            ))
        })?;
        let pool = PgPool {
            label: pg_label(&config),
            config,
            permits: tokio::sync::Semaphore::new(pool_size),
            idle: Mutex::new(Vec::with_capacity(pool_size)),
            size: pool_size,
            handle,
            target,
            connects: AtomicUsize::new(0),
        };
        let mut first = pool.connect_client().await?;
        pool.seed(&mut first).await?;
        let mut conns = vec![pool.prepare(first).await?];
        for _ in 1..pool_size {
            conns.push(pool.connect().await?);
        }
        pool.idle.lock().extend(conns);
        Ok(pool)
    }

    async fn connect_client(&self) -> Result<tokio_postgres::Client, StoreError> {
        let (client, connection) = self
            .config
            .connect(NoTls)
            .await
            .map_err(pg_err(&self.target, "connect"))?;
        self.connects.fetch_add(1, Ordering::Relaxed);
        let target = self.target.clone();
        self.handle.spawn(async move {
            if let Err(error) = connection.await {
                tracing::warn!(db = %target, %error, "PostgreSQL connection closed with an error; the pool will reconnect");
            }
        });
        Ok(client)
    }

    async fn prepare(&self, client: tokio_postgres::Client) -> Result<PgConn, StoreError> {
        let select = client
            .prepare_typed(PG_SELECT_SQL, &[Type::INT8])
            .await
            .map_err(pg_err(&self.target, "prepare the select on table message"))?;
        let bad: Vec<String> = select
            .columns()
            .iter()
            .zip([Type::INT8, Type::INT8, Type::INT8, Type::TEXT])
            .filter(|(col, want)| {
                let ty = col.type_();
                !(ty == want || (*want == Type::TEXT && *ty == Type::VARCHAR))
            })
            .map(|(col, _)| format!("{} is {}", col.name(), col.type_()))
            .collect();
        if !bad.is_empty() {
            return Err(StoreError::SchemaMismatch {
                target: self.target.clone(),
                detail: bad.join(", "),
            });
        }
        Ok(PgConn { client, select })
    }

    async fn connect(&self) -> Result<PgConn, StoreError> {
        let client = self.connect_client().await?;
        self.prepare(client).await
    }

    async fn seed(&self, client: &mut tokio_postgres::Client) -> Result<(), StoreError> {
        let err = || pg_err(&self.target, "create and seed table message");
        let tx = client.transaction().await.map_err(err())?;
        // Several servers starting at once would otherwise race on `create table if not exists`.
        tx.execute("select pg_advisory_xact_lock($1)", &[&PG_SEED_LOCK_KEY])
            .await
            .map_err(err())?;
        tx.batch_execute(PG_CREATE_SQL).await.map_err(err())?;
        let insert = tx
            .prepare_typed(
                PG_SEED_SQL,
                &[Type::INT8, Type::INT8, Type::INT8, Type::TEXT],
            )
            .await
            .map_err(err())?;
        for m in seed_messages() {
            tx.execute(&insert, &[&m.id, &m.from_uid, &m.to_uid, &m.content])
                .await
                .map_err(err())?;
        }
        tx.commit().await.map_err(err())
    }

    async fn get(&self, id: i64) -> Result<Message, StoreError> {
        let start = Instant::now();
        let _permit = match tokio::time::timeout(CHECKOUT_TIMEOUT, self.permits.acquire()).await {
            Ok(Ok(permit)) => permit,
            // Elapsed, or the semaphore was closed (never done): either way no connection.
            _ => {
                return Err(StoreError::PoolTimeout {
                    target: self.target.clone(),
                    pool_size: self.size,
                    waited: start.elapsed(),
                })
            }
        };
        // Holding a permit guarantees at most `size` connections are checked out. If this
        // future is dropped mid-query the connection is dropped (closed) with it and a new one
        // is made on a later checkout.
        let idle = self.idle.lock().pop();
        let conn = match idle {
            Some(conn) if !conn.client.is_closed() => conn,
            _ => self.connect().await?,
        };
        let err = || pg_err(&self.target, "query table message by id");
        match query_message(&conn, id).await {
            Ok(found) => {
                self.idle.lock().push(conn);
                found.ok_or(StoreError::NotFound(id))
            }
            Err(error) if conn.client.is_closed() || is_connection_lost(&error) => {
                // The server went away under an idle connection (restart, admin termination,
                // network drop): retry once on a fresh connection.
                tracing::info!(db = %self.target, %error, "PostgreSQL connection lost; reconnecting");
                drop(conn);
                let conn = self.connect().await?;
                let found = query_message(&conn, id).await;
                if !conn.client.is_closed() {
                    self.idle.lock().push(conn);
                }
                found.map_err(err())?.ok_or(StoreError::NotFound(id))
            }
            Err(error) => {
                self.idle.lock().push(conn);
                Err(err()(error))
            }
        }
    }

    fn get_blocking(&self, id: i64) -> Result<Message, StoreError> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        match Handle::try_current() {
            // A plain OS thread (e.g. a worker-pool thread): drive the future here; the
            // connection tasks keep running on the pool's runtime.
            Err(_) => self.handle.block_on(self.get(id)),
            Ok(current) if current.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| self.handle.block_on(self.get(id)))
            }
            Ok(_) => Err(StoreError::BlockingInRuntime {
                target: self.target.clone(),
            }),
        }
    }
}

async fn query_message(conn: &PgConn, id: i64) -> Result<Option<Message>, tokio_postgres::Error> {
    let Some(row) = conn.client.query_opt(&conn.select, &[&id]).await? else {
        return Ok(None);
    };
    Ok(Some(Message {
        id: row.try_get(0)?,
        from_uid: row.try_get(1)?,
        to_uid: row.try_get(2)?,
        content: row.try_get(3)?,
    }))
}

/// The connection is gone: closed, or the server is shutting it down (SQLSTATE class 57P:
/// admin_shutdown, crash_shutdown, cannot_connect_now).
fn is_connection_lost(error: &tokio_postgres::Error) -> bool {
    error.is_closed() || error.code().is_some_and(|c| c.code().starts_with("57P"))
}

fn pg_label(config: &tokio_postgres::Config) -> String {
    use tokio_postgres::config::Host;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        #[cfg(unix)]
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("postgresql {host}:{port}/{db}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::message::{MAX_ID, MIN_ID};
    use crate::store::test_util::TempDir;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    fn sqlite_url(dir: &TempDir, name: &str) -> String {
        format!("sqlite:{}", dir.path().join(name).display())
    }

    fn assert_all_found(db: &MessageDb) {
        for id in MIN_ID..=MAX_ID {
            assert_eq!(db.get_blocking(id).unwrap(), Message::seed(id));
        }
        assert!(matches!(db.get_blocking(11), Err(StoreError::NotFound(11))));
        assert!(matches!(db.get_blocking(0), Err(StoreError::NotFound(0))));
    }

    #[test]
    fn url_parsing() {
        let file = |p: &str| Ok(DbTarget::SqliteFile(PathBuf::from(p)));
        assert_eq!(parse_url("sqlite:/tmp/a.db"), file("/tmp/a.db"));
        assert_eq!(parse_url("sqlite:///tmp/a.db"), file("/tmp/a.db"));
        assert_eq!(parse_url("sqlite://rel/a.db?mode=rwc"), file("rel/a.db"));
        assert_eq!(parse_url("SQLITE:a.db"), file("a.db"));
        assert_eq!(parse_url(" /var/x.db "), file("/var/x.db"));
        assert_eq!(parse_url("x.db"), file("x.db"));
        assert_eq!(parse_url("sqlite::memory:"), Ok(DbTarget::SqliteMemory));
        assert_eq!(parse_url("sqlite://:memory:"), Ok(DbTarget::SqliteMemory));
        assert_eq!(parse_url(":memory:"), Ok(DbTarget::SqliteMemory));
        assert_eq!(
            parse_url("postgres://u@h/db"),
            Ok(DbTarget::Postgres("postgres://u@h/db".into()))
        );
        assert_eq!(
            parse_url("postgresql://u@h/db"),
            Ok(DbTarget::Postgres("postgresql://u@h/db".into()))
        );
        assert!(matches!(parse_url(""), Err(StoreError::InvalidConfig(_))));
        assert!(matches!(
            parse_url("sqlite:"),
            Err(StoreError::InvalidConfig(_))
        ));
        let err = parse_url("mysql://root:hunter2@db:3306/bench").unwrap_err();
        assert!(matches!(err, StoreError::UnsupportedUrl { .. }));
        let msg = err.to_string();
        assert!(msg.contains("mysql://root:***@db:3306/bench"), "{msg}");
        assert!(!msg.contains("hunter2"), "{msg}");
    }

    impl PartialEq for StoreError {
        fn eq(&self, other: &Self) -> bool {
            self.to_string() == other.to_string()
        }
    }

    #[test]
    fn redaction() {
        assert_eq!(
            redact_url("postgres://user:s3cret@host:5432/db"),
            "postgres://user:***@host:5432/db"
        );
        assert_eq!(
            redact_url("postgres://user:p@ss@host/db?password=x&sslmode=disable"),
            "postgres://user:***@host/db?password=***&sslmode=disable"
        );
        assert_eq!(
            redact_url("postgres://user@host/db"),
            "postgres://user@host/db"
        );
        assert_eq!(
            redact_url("postgres://host/db?user=u&PASSWORD=x"),
            "postgres://host/db?user=u&PASSWORD=***"
        );
        assert_eq!(redact_url("/tmp/a.db"), "/tmp/a.db");
    }

    #[test]
    fn default_url_is_sqlite_in_temp_dir() {
        let url = MessageDb::default_url();
        assert!(url.starts_with("sqlite:"));
        assert!(url.ends_with("brisk-bench.db"));
        assert_eq!(
            parse_url(&url),
            Ok(DbTarget::SqliteFile(
                std::env::temp_dir().join("brisk-bench.db")
            ))
        );
    }

    #[test]
    fn fresh_sqlite_db_is_created_and_seeded() {
        let dir = TempDir::new("db-fresh");
        let path = dir.path().join("nested/dir/bench.db");
        let url = format!("sqlite:{}", path.display());
        let db = rt().block_on(MessageDb::open(&url, 2)).unwrap();
        assert!(path.exists());
        assert_eq!(db.kind(), DbKind::Sqlite);
        assert!(db.is_blocking());
        assert_eq!(db.pool_size(), 2);
        assert_eq!(db.describe(), format!("sqlite {} (pool 2)", path.display()));
        assert!(format!("{db:?}").contains("sqlite"));
        assert_all_found(&db);

        let check = rusqlite::Connection::open(&path).unwrap();
        let mode: String = check
            .query_row("pragma journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn plain_path_and_memory_urls_work() {
        let dir = TempDir::new("db-plain");
        let path = dir.path().join("plain.db");
        let rt = rt();
        let db = rt
            .block_on(MessageDb::open(&path.display().to_string(), 1))
            .unwrap();
        assert_all_found(&db);

        // every pooled connection sees the one seeded in-memory database
        let mem = rt.block_on(MessageDb::open("sqlite::memory:", 3)).unwrap();
        assert_eq!(mem.describe(), "sqlite :memory: (pool 3)");
        let held: Vec<_> = match &*mem.inner {
            Backend::Sqlite(pool) => (0..3)
                .map(|_| pool.checkout(Duration::from_secs(1)).unwrap())
                .collect(),
            Backend::Postgres(_) => unreachable!(),
        };
        for c in &held {
            let n: i64 = c
                .conn
                .query_row("select count(*) from message", [], |r| r.get(0))
                .unwrap();
            assert_eq!(n, 10);
        }
        drop(held);
        assert_all_found(&mem);
        // a second memory database is a separate one
        let other = rt.block_on(MessageDb::open(":memory:", 1)).unwrap();
        assert_all_found(&other);
    }

    #[test]
    fn reopen_is_idempotent() {
        let dir = TempDir::new("db-reopen");
        let url = sqlite_url(&dir, "bench.db");
        let rt = rt();
        let first = rt.block_on(MessageDb::open(&url, 2)).unwrap();
        // tamper with a row and add one; reopening restores the seed rows and keeps the extra
        {
            let c = rusqlite::Connection::open(dir.path().join("bench.db")).unwrap();
            c.execute("update message set content = 'tampered' where id = 4", [])
                .unwrap();
            c.execute(
                "insert into message (id, from_uid, to_uid, content) values (42, 1, 2, 'extra')",
                [],
            )
            .unwrap();
        }
        // reopen while the first pool is still open, then again after it is gone
        let second = rt.block_on(MessageDb::open(&url, 3)).unwrap();
        assert_all_found(&second);
        assert_all_found(&first);
        drop(first);
        drop(second);
        let third = rt.block_on(MessageDb::open(&url, 1)).unwrap();
        assert_all_found(&third);
        assert_eq!(third.get_blocking(42).unwrap().content, "extra");
        let c = rusqlite::Connection::open(dir.path().join("bench.db")).unwrap();
        let n: i64 = c
            .query_row(
                "select count(*) from message where id between 1 and 10",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 10);
    }

    #[test]
    fn concurrent_gets_from_8_threads_through_a_pool_of_2() {
        let dir = TempDir::new("db-concurrent");
        let rt = rt();
        let db = rt
            .block_on(MessageDb::open(&sqlite_url(&dir, "bench.db"), 2))
            .unwrap();
        let handle = rt.handle().clone();
        let threads: Vec<_> = (0..8i64)
            .map(|t| {
                let db = db.clone();
                let handle = handle.clone();
                std::thread::spawn(move || {
                    for i in 0..300i64 {
                        let id = (i + t) % 10 + 1;
                        // alternate the blocking call and the async call driven by block_on
                        let m = if i % 2 == 0 {
                            db.get_blocking(id)
                        } else {
                            handle.block_on(db.get(id))
                        };
                        assert_eq!(m.unwrap().id, id);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // every connection went back to the pool
        if let Backend::Sqlite(pool) = &*db.inner {
            assert_eq!(pool.free.lock().len(), 2);
        }
    }

    #[test]
    fn gets_from_inside_tokio_tasks() {
        let dir = TempDir::new("db-tasks");
        let rt = rt();
        let db = rt
            .block_on(MessageDb::open(&sqlite_url(&dir, "bench.db"), 2))
            .unwrap();
        rt.block_on(async {
            let tasks: Vec<_> = (0..16i64)
                .map(|t| {
                    let db = db.clone();
                    tokio::spawn(async move {
                        for i in 0..50i64 {
                            let id = (i + t) % 10 + 1;
                            assert_eq!(db.get(id).await.unwrap().id, id);
                        }
                        let db2 = db.clone();
                        tokio::task::spawn_blocking(move || db2.get_blocking(t % 10 + 1))
                            .await
                            .unwrap()
                            .unwrap()
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
        // and on a current-thread runtime
        let ct = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert_eq!(ct.block_on(db.get(5)).unwrap(), Message::seed(5));
    }

    #[test]
    fn exhausted_pool_times_out_with_a_clear_error() {
        let dir = TempDir::new("db-timeout");
        let db = rt()
            .block_on(MessageDb::open(&sqlite_url(&dir, "bench.db"), 1))
            .unwrap();
        let Backend::Sqlite(pool) = &*db.inner else {
            unreachable!()
        };
        let held = pool.checkout(Duration::from_secs(1)).unwrap();
        let err = pool.checkout(Duration::from_millis(50)).err().unwrap();
        assert!(
            matches!(err, StoreError::PoolTimeout { pool_size: 1, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("bench.db"), "{err}");
        drop(held);
        assert!(pool.checkout(Duration::from_millis(50)).is_ok());
    }

    #[test]
    fn bad_configs_are_clear_errors() {
        let rt = rt();
        let dir = TempDir::new("db-bad");
        let err = rt
            .block_on(MessageDb::open(&sqlite_url(&dir, "x.db"), 0))
            .unwrap_err();
        assert!(matches!(err, StoreError::InvalidConfig(_)), "{err}");

        // a regular file where the database directory should be
        let blocker = dir.path().join("blocker");
        std::fs::write(&blocker, b"x").unwrap();
        let path = blocker.join("x.db");
        let err = rt
            .block_on(MessageDb::open(&path.display().to_string(), 1))
            .unwrap_err();
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );

        // not a database
        let junk = dir.path().join("junk.db");
        std::fs::write(&junk, vec![b'j'; 4096]).unwrap();
        let err = rt
            .block_on(MessageDb::open(&junk.display().to_string(), 1))
            .unwrap_err();
        assert!(matches!(err, StoreError::Sqlite { .. }), "{err}");
        assert!(
            err.to_string().contains(&junk.display().to_string()),
            "{err}"
        );

        // a table with other columns
        let other = dir.path().join("other.db");
        rusqlite::Connection::open(&other)
            .unwrap()
            .execute_batch("create table message (id integer primary key, body text)")
            .unwrap();
        let err = rt
            .block_on(MessageDb::open(&other.display().to_string(), 1))
            .unwrap_err();
        assert!(matches!(err, StoreError::Sqlite { .. }), "{err}");

        // PostgreSQL nobody listens on: fails fast, names the URL, hides the password
        let err = rt
            .block_on(MessageDb::open(
                "postgres://bench:hunter2@127.0.0.1:1/bench",
                1,
            ))
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(
                err,
                StoreError::Postgres {
                    action: "connect",
                    ..
                }
            ),
            "{msg}"
        );
        assert!(
            msg.contains("postgres://bench:***@127.0.0.1:1/bench"),
            "{msg}"
        );
        assert!(!msg.contains("hunter2"), "{msg}");
    }

    // --- PostgreSQL, only when BRISK_TEST_POSTGRES_URL is set ---------------------------------

    fn postgres_url() -> Option<String> {
        match std::env::var("BRISK_TEST_POSTGRES_URL") {
            Ok(url) if !url.trim().is_empty() => Some(url),
            _ => {
                eprintln!(
                    "note: BRISK_TEST_POSTGRES_URL is not set; skipping the PostgreSQL test \
                     (e.g. BRISK_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:55432/postgres)"
                );
                None
            }
        }
    }

    #[test]
    fn postgres_open_get_concurrent_and_reconnect() {
        let Some(url) = postgres_url() else { return };
        // a test-specific application_name, so the reconnect check below terminates only the
        // connections of this pool
        let app = format!("brisk-test-{}-reconnect", std::process::id());
        let sep = if url.contains('?') { '&' } else { '?' };
        let url = format!("{url}{sep}application_name={app}");
        let rt = rt();
        let db = rt.block_on(MessageDb::open(&url, 2)).unwrap();
        assert_eq!(db.kind(), DbKind::Postgres);
        assert!(!db.is_blocking());
        let desc = db.describe();
        assert!(
            desc.starts_with("postgresql ") && desc.ends_with("(pool 2)"),
            "{desc}"
        );
        println!("opened {desc}");

        // from a non-runtime OS thread: blocking and block_on(get)
        assert_all_found(&db);
        for id in MIN_ID..=MAX_ID {
            assert_eq!(rt.block_on(db.get(id)).unwrap(), Message::seed(id));
        }

        // reopen is idempotent (and concurrent opens do not race on create table)
        rt.block_on(async {
            let (a, b) = tokio::join!(MessageDb::open(&url, 1), MessageDb::open(&url, 1));
            assert_all_found_async(&a.unwrap()).await;
            assert_all_found_async(&b.unwrap()).await;
        });

        // 8 OS threads through a pool of 2, mixing get_blocking and Handle::block_on(get)
        let handle = rt.handle().clone();
        let threads: Vec<_> = (0..8i64)
            .map(|t| {
                let db = db.clone();
                let handle = handle.clone();
                std::thread::spawn(move || {
                    for i in 0..100i64 {
                        let id = (i + t) % 10 + 1;
                        let m = if i % 2 == 0 {
                            db.get_blocking(id)
                        } else {
                            handle.block_on(db.get(id))
                        };
                        assert_eq!(m.unwrap().id, id);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }

        // 32 tokio tasks, some also calling get_blocking on runtime threads (block_in_place)
        rt.block_on(async {
            let tasks: Vec<_> = (0..32i64)
                .map(|t| {
                    let db = db.clone();
                    tokio::spawn(async move {
                        for i in 0..20i64 {
                            let id = (i + t) % 10 + 1;
                            assert_eq!(db.get(id).await.unwrap().id, id);
                        }
                        assert!(db.get(11).await.unwrap_err().is_not_found());
                        let db2 = db.clone();
                        tokio::task::spawn_blocking(move || db2.get_blocking(t % 10 + 1))
                            .await
                            .unwrap()
                            .unwrap();
                        db.get_blocking(t % 10 + 1).unwrap()
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });

        // the server drops our connections: the pool reconnects instead of failing forever
        let Backend::Postgres(pool) = &*db.inner else {
            unreachable!()
        };
        let before = pool.connects.load(Ordering::Relaxed);
        rt.block_on(async {
            let (client, conn) = pool.config.connect(NoTls).await.unwrap();
            tokio::spawn(conn);
            client
                .execute(
                    "select pg_terminate_backend(pid) from pg_stat_activity \
                     where application_name = $1 and pid <> pg_backend_pid()",
                    &[&app],
                )
                .await
                .unwrap();
            // straight away: idle connections may not know yet that they are dead, so this
            // exercises the retry-once-on-a-closed-connection path
            assert_all_found_async(&db).await;
        });
        assert!(pool.connects.load(Ordering::Relaxed) > before);
    }

    async fn assert_all_found_async(db: &MessageDb) {
        for id in MIN_ID..=MAX_ID {
            assert_eq!(db.get(id).await.unwrap(), Message::seed(id));
        }
        assert!(matches!(db.get(11).await, Err(StoreError::NotFound(11))));
    }

    #[test]
    fn postgres_incompatible_existing_table_is_a_clear_error() {
        let Some(url) = postgres_url() else { return };
        let schema = format!("brisk_test_schema_{}", std::process::id());
        let rt = rt();
        let admin_config: tokio_postgres::Config = url.parse().unwrap();
        let admin = rt.block_on(async {
            let (client, conn) = admin_config.connect(NoTls).await.unwrap();
            tokio::spawn(conn);
            client
                .batch_execute(&format!(
                    "drop schema if exists {schema} cascade; create schema {schema}; \
                     create table {schema}.message (id integer primary key, \
                     from_uid integer not null, to_uid integer not null, content text not null)"
                ))
                .await
                .unwrap();
            client
        });
        let sep = if url.contains('?') { '&' } else { '?' };
        let scoped = format!("{url}{sep}options=-c%20search_path%3D{schema}");
        let result = rt.block_on(MessageDb::open(&scoped, 1));
        rt.block_on(admin.batch_execute(&format!("drop schema {schema} cascade")))
            .unwrap();
        let err = result.unwrap_err();
        assert!(matches!(err, StoreError::SchemaMismatch { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("id is int4"), "{msg}");
        assert!(msg.contains("drop the table"), "{msg}");
    }

    #[test]
    fn postgres_get_blocking_on_current_thread_runtime_is_an_error_not_a_deadlock() {
        let Some(url) = postgres_url() else { return };
        let rt = rt();
        let db = rt.block_on(MessageDb::open(&url, 1)).unwrap();
        let ct = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let err = ct.block_on(async { db.get_blocking(1) }).unwrap_err();
        assert!(matches!(err, StoreError::BlockingInRuntime { .. }), "{err}");
    }
}
