//! Errors of the benchmark data store.
//!
//! The store sits behind the benchmark RPC methods and is opened once at server start, so its
//! errors are read by a person looking at a failed start or an error rate in a benchmark report.
//! Every variant therefore names *what* (the file path, or the database URL with the password
//! redacted), *what failed* and *what to do about it*. [`StoreError::NotFound`] is kept distinct
//! so the RPC layer can map it to a "not found" reply instead of an internal error.

use std::path::PathBuf;
use std::time::Duration;

use crate::store::message::{MAX_ID, MIN_ID};

/// Everything that can go wrong opening or reading the benchmark data.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No record with this id (seeded ids are `1..=10`). Not an infrastructure failure.
    #[error("no message with id {0} (the seeded ids are {MIN_ID}..={MAX_ID}; callers should use key = i % 10 + 1)")]
    NotFound(i64),

    /// Reading, creating or writing a file of the store (the JSON message file, or the directory
    /// of the SQLite database) failed.
    #[error("could not {action} {}: {source}; check that the directory exists and is readable and writable by this process (missing files are recreated with the 10 seed records at start)", path.display())]
    FileIo {
        /// The file involved.
        path: PathBuf,
        /// What was being done, e.g. "read the message file".
        action: &'static str,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },

    /// The JSON message file exists but is not a JSON array of messages.
    #[error("message file {} is not a valid JSON array of messages ({source}); delete it and it will be recreated with the 10 seed records on the next start", path.display())]
    FileCorrupt {
        /// The corrupt file.
        path: PathBuf,
        /// The parse error (with line and column).
        #[source]
        source: serde_json::Error,
    },

    /// An embedded SQLite operation failed.
    #[error("SQLite database {target}: could not {action}: {source}; check that the path is writable and not locked by another program, or delete the file to have it recreated and reseeded")]
    Sqlite {
        /// The database path (or `:memory:`).
        target: String,
        /// What was being done, e.g. "open" or "query message by id".
        action: &'static str,
        /// The underlying SQLite error.
        #[source]
        source: rusqlite::Error,
    },

    /// A PostgreSQL operation failed.
    #[error("PostgreSQL database {target}: could not {action}: {source}; check that the server is running and reachable, and that the user, password and database in the URL are right (TLS is not supported: use sslmode=disable or prefer)")]
    Postgres {
        /// The database URL, password redacted.
        target: String,
        /// What was being done, e.g. "connect" or "create and seed table message".
        action: &'static str,
        /// The underlying driver error.
        #[source]
        source: tokio_postgres::Error,
    },

    /// The existing `message` table has columns of the wrong type for [`crate::store::Message`].
    #[error("database {target}: table message exists with an incompatible schema ({detail}); expected id, from_uid, to_uid bigint and content text — drop the table (it is recreated and seeded on the next start) or point the benchmark at another database")]
    SchemaMismatch {
        /// The database, password redacted.
        target: String,
        /// Which column has which type.
        detail: String,
    },

    /// The database URL has a scheme this store does not speak.
    #[error("unsupported database URL {url}: use sqlite:PATH, sqlite::memory:, a plain file path, or postgres://user:password@host:port/dbname (MySQL is not supported yet)")]
    UnsupportedUrl {
        /// The URL, password redacted.
        url: String,
    },

    /// A configuration value is unusable.
    #[error("invalid benchmark store configuration: {0}")]
    InvalidConfig(String),

    /// Every pooled connection stayed busy for the whole checkout timeout.
    #[error("{target}: no free connection in the pool of {pool_size} after waiting {waited:?}; raise the database pool size or lower the benchmark concurrency")]
    PoolTimeout {
        /// The database, password redacted.
        target: String,
        /// Configured pool size.
        pool_size: usize,
        /// How long the caller waited.
        waited: Duration,
    },

    /// The connection pool itself failed: it could not fill itself at start, or it is closed.
    /// (A busy pool is [`StoreError::PoolTimeout`]; a refused connection is
    /// [`StoreError::Postgres`] or [`StoreError::Sqlite`].)
    #[error("{target}: the connection pool failed: {source}; check that the database is reachable and usable, then restart the benchmark server")]
    Pool {
        /// The database, password redacted.
        target: String,
        /// The pool's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A blocking call was made on a thread that must not block (a current-thread runtime).
    #[error("{target}: get_blocking was called on a current-thread tokio runtime thread, where it would deadlock; call the async get() there, or call get_blocking from a worker-pool thread or a multi-thread runtime")]
    BlockingInRuntime {
        /// The database, password redacted.
        target: String,
    },
}

impl StoreError {
    /// True for [`StoreError::NotFound`], the only error that is not an infrastructure failure.
    pub fn is_not_found(&self) -> bool {
        matches!(self, StoreError::NotFound(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_is_distinct_and_explains_the_valid_range() {
        let e = StoreError::NotFound(11);
        assert!(e.is_not_found());
        let s = e.to_string();
        assert!(s.contains("11") && s.contains("1..=10"), "{s}");
        let io = StoreError::FileIo {
            path: PathBuf::from("/x/messages.json"),
            action: "read the message file",
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "gone"),
        };
        assert!(!io.is_not_found());
        assert!(io.to_string().contains("/x/messages.json"));
    }
}
