//! The embedded SQLite backend: an r2d2 pool of rusqlite connections.
//!
//! A SQLite query is **synchronous**: it blocks the calling thread, exactly like JDBC did in
//! the Java original. That is the point of the `db` scenario — the server decides whether the
//! blocking happens on an I/O thread or on a worker pool, and the benchmark measures the
//! difference — so [`SqliteStore::get`] is a plain blocking function.
//!
//! Invariants:
//! * The table is created and seeded (idempotently, `insert or replace`) on a first connection
//!   before the pool exists, inside an IMMEDIATE transaction so concurrent starters queue on the
//!   busy timeout instead of failing on a read-to-write lock upgrade. Failures there are typed
//!   [`StoreError::Sqlite`] errors naming the file, and come back at once.
//! * The pool holds exactly `pool_size` connections for its whole life: all are opened at start
//!   (`min_idle = max_size`) and none is ever closed (no idle timeout, no maximum lifetime, no
//!   validity check on checkout — a SQLite connection cannot go stale). So each connection's
//!   statement cache, filled with the select at start, stays warm, and a checkout costs no
//!   query of its own.
//! * Files are put in WAL mode (`synchronous=NORMAL`) so readers never block each other; the
//!   in-memory database is one shared-cache database for the whole pool, kept alive by the
//!   connection manager for as long as the pool lives.

use std::path::Path;
use std::time::{Duration, Instant};

use r2d2::ManageConnection;
use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{OptionalExtension, TransactionBehavior};

use super::limits::CHECKOUT_TIMEOUT;
use crate::store::error::StoreError;
use crate::store::message::{seed_messages, Message};

/// The scenario's query, SQLite placeholder syntax.
pub const SELECT_SQL: &str = "select id, from_uid, to_uid, content from message where id = ?";

const CREATE_SQL: &str = "create table if not exists message (\
     id integer primary key, \
     from_uid integer not null, \
     to_uid integer not null, \
     content text not null)";

const SEED_SQL: &str =
    "insert or replace into message (id, from_uid, to_uid, content) values (?1, ?2, ?3, ?4)";

/// How long a SQLite connection waits on a lock held by another connection or process.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A pooled connection, checked out until dropped.
pub(super) type SqliteConn = r2d2::PooledConnection<SqliteConnectionManager>;

/// The `message` table in one SQLite database, behind a fixed pool of connections.
pub(super) struct SqliteStore {
    pool: r2d2::Pool<SqliteConnectionManager>,
    /// `sqlite PATH` / `sqlite :memory:`
    label: String,
    /// Path (or `:memory:`) for error messages.
    target: String,
}

fn sqlite_err(target: &str, action: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    let target = target.to_string();
    move |source| StoreError::Sqlite {
        target,
        action,
        source,
    }
}

impl SqliteStore {
    /// Opens (creating its directory, creating and seeding the table when needed) the database
    /// file at `path`.
    pub(super) fn open_file(path: &Path, pool_size: usize) -> Result<SqliteStore, StoreError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| StoreError::FileIo {
                path: path.to_path_buf(),
                action: "create the directory for the SQLite database",
                source,
            })?;
        }
        let target = path.display().to_string();
        let manager = SqliteConnectionManager::file(path);
        SqliteStore::open(manager, target, false, pool_size)
    }

    /// Opens a fresh private in-memory database, seeded, shared by the pool's connections.
    pub(super) fn open_memory(pool_size: usize) -> Result<SqliteStore, StoreError> {
        let manager = SqliteConnectionManager::memory();
        SqliteStore::open(manager, ":memory:".to_string(), true, pool_size)
    }

    fn open(
        manager: SqliteConnectionManager,
        target: String,
        memory: bool,
        pool_size: usize,
    ) -> Result<SqliteStore, StoreError> {
        let max_size = u32::try_from(pool_size).map_err(|_| {
            StoreError::InvalidConfig(format!(
                "database pool size {pool_size} for {target} is too large"
            ))
        })?;
        let init_target = target.clone();
        let manager = manager.with_init(move |conn| configure(conn, &init_target, memory));

        // Seed on a connection of our own first: its errors are typed and immediate, where the
        // pool would retry a failing connection until its timeout.
        let mut seeder = manager.connect().map_err(sqlite_err(&target, "open"))?;
        seed(&mut seeder, &target)?;
        drop(seeder);

        let label = format!("sqlite {target}");
        let pool = r2d2::Pool::builder()
            .max_size(max_size)
            .min_idle(Some(max_size))
            .idle_timeout(None)
            .max_lifetime(None)
            .test_on_check_out(false)
            .connection_timeout(CHECKOUT_TIMEOUT)
            .error_handler(Box::new(LogErrors {
                target: target.clone(),
            }))
            .build(manager)
            .map_err(|source| StoreError::Pool {
                target: label.clone(),
                source: Box::new(source),
            })?;
        let store = SqliteStore {
            pool,
            label,
            target,
        };

        // Fill each connection's statement cache now; this also checks the table's columns.
        let held = (0..pool_size)
            .map(|_| store.checkout(CHECKOUT_TIMEOUT))
            .collect::<Result<Vec<_>, _>>()?;
        for conn in &held {
            conn.prepare_cached(SELECT_SQL).map_err(sqlite_err(
                &store.target,
                "prepare the select on table message",
            ))?;
        }
        Ok(store)
    }

    /// A connection of the pool, waiting up to `timeout` for one to be free.
    pub(super) fn checkout(&self, timeout: Duration) -> Result<SqliteConn, StoreError> {
        let start = Instant::now();
        self.pool
            .get_timeout(timeout)
            .map_err(|_| StoreError::PoolTimeout {
                target: self.label.clone(),
                pool_size: self.pool_size(),
                waited: start.elapsed(),
            })
    }

    /// The record with `id`, or [`StoreError::NotFound`]; runs on (and blocks) this thread.
    pub(super) fn get(&self, id: i64) -> Result<Message, StoreError> {
        let conn = self.checkout(CHECKOUT_TIMEOUT)?;
        let mut stmt = conn.prepare_cached(SELECT_SQL).map_err(sqlite_err(
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

    /// Number of pooled connections.
    pub(super) fn pool_size(&self) -> usize {
        self.pool.max_size() as usize
    }

    /// `sqlite PATH` / `sqlite :memory:`.
    pub(super) fn label(&self) -> &str {
        &self.label
    }

    /// Connections in the pool that are not checked out.
    #[cfg(test)]
    pub(super) fn idle_connections(&self) -> usize {
        self.pool.state().idle_connections as usize
    }
}

/// Per-connection settings, applied by the manager to every connection it opens.
fn configure(conn: &mut rusqlite::Connection, target: &str, memory: bool) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    if !memory {
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(db = %target, mode = %mode, "SQLite refused WAL journal mode; readers may block each other");
        }
        conn.pragma_update(None, "synchronous", "NORMAL")?;
    }
    Ok(())
}

fn seed(conn: &mut rusqlite::Connection, target: &str) -> Result<(), StoreError> {
    let action = "create and seed table message";
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite_err(target, action))?;
    tx.execute_batch(CREATE_SQL)
        .map_err(sqlite_err(target, action))?;
    {
        let mut insert = tx.prepare(SEED_SQL).map_err(sqlite_err(target, action))?;
        for m in seed_messages() {
            insert
                .execute(rusqlite::params![m.id, m.from_uid, m.to_uid, m.content])
                .map_err(sqlite_err(target, action))?;
        }
    }
    tx.commit().map_err(sqlite_err(target, action))
}

/// Sends the errors the pool meets while opening connections in the background to `tracing`.
#[derive(Debug)]
struct LogErrors {
    target: String,
}

impl r2d2::HandleError<rusqlite::Error> for LogErrors {
    fn handle_error(&self, error: rusqlite::Error) {
        tracing::warn!(db = %self.target, %error, "SQLite pool could not open a connection");
    }
}
