//! [`MessageStore`]: the three data sources of the benchmark service, opened together.
//!
//! The server builds one `MessageStore` at start from a [`StoreConfig`] and hands clones to its
//! handlers (every part is a cheap `Arc` clone). Opening everything up front means a missing
//! directory, a corrupt `messages.json` or a wrong database URL stops the server with a clear
//! message before any benchmark runs, instead of showing up as a 100 % error rate in a report.

use std::path::PathBuf;

use crate::store::cache::MessageCache;
use crate::store::db::{MessageDb, DEFAULT_POOL_SIZE};
use crate::store::error::StoreError;
use crate::store::file::{MessageFile, MESSAGE_FILE_NAME};

/// Where the benchmark data lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// Directory of `messages.json` (created when missing).
    pub data_dir: PathBuf,
    /// Database URL (see [`MessageDb::open`]); `None` means [`MessageDb::default_url`], an
    /// embedded SQLite file `brisk-bench.db` in the system temp directory.
    pub db_url: Option<String>,
    /// Connections in the database pool (at least 1).
    pub db_pool_size: usize,
}

impl StoreConfig {
    /// Data in `data_dir`, default database, default pool size.
    pub fn new(data_dir: impl Into<PathBuf>) -> StoreConfig {
        StoreConfig {
            data_dir: data_dir.into(),
            db_url: None,
            db_pool_size: DEFAULT_POOL_SIZE,
        }
    }

    /// `<data_dir>/messages.json`.
    pub fn file_path(&self) -> PathBuf {
        self.data_dir.join(MESSAGE_FILE_NAME)
    }

    /// The configured database URL, or the default one.
    pub fn effective_db_url(&self) -> String {
        self.db_url.clone().unwrap_or_else(MessageDb::default_url)
    }
}

impl Default for StoreConfig {
    /// `<temp dir>/brisk-bench` for the file, the default SQLite database, pool of
    /// [`DEFAULT_POOL_SIZE`].
    fn default() -> Self {
        StoreConfig::new(std::env::temp_dir().join("brisk-bench"))
    }
}

/// The cache, file and database behind the `cache`, `file` and `db` scenarios.
#[derive(Debug, Clone)]
pub struct MessageStore {
    /// In-process records (`cache` scenario).
    pub cache: MessageCache,
    /// `messages.json`, re-read on every call (`file` scenario).
    pub file: MessageFile,
    /// The database, queried on every call (`db` scenario).
    pub db: MessageDb,
}

impl MessageStore {
    /// Opens all three, creating and seeding the file and the database when needed.
    pub async fn open(config: StoreConfig) -> Result<MessageStore, StoreError> {
        let cache = MessageCache::new();
        let file = MessageFile::open(config.file_path())?;
        let db = MessageDb::open(&config.effective_db_url(), config.db_pool_size).await?;
        Ok(MessageStore { cache, file, db })
    }

    /// One line for the start-up log, e.g.
    /// `cache 10 records; file /tmp/brisk-bench/messages.json; db sqlite /tmp/brisk-bench.db (pool 8)`.
    pub fn describe(&self) -> String {
        format!(
            "cache {} records; file {}; db {}",
            self.cache.len(),
            self.file.path().display(),
            self.db.describe()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::message::{Message, MAX_ID, MIN_ID};
    use crate::store::test_util::TempDir;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn opens_all_three_sources() {
        let dir = TempDir::new("bundle");
        let config = StoreConfig {
            data_dir: dir.path().join("data"),
            db_url: Some(format!(
                "sqlite:{}",
                dir.path().join("db/bench.db").display()
            )),
            db_pool_size: 2,
        };
        assert_eq!(config.file_path(), dir.path().join("data/messages.json"));
        let store = MessageStore::open(config).await.unwrap();
        for id in MIN_ID..=MAX_ID {
            let want = Message::seed(id);
            assert_eq!(store.cache.get(id).unwrap(), want);
            assert_eq!(store.file.get(id).unwrap(), want);
            assert_eq!(store.db.get(id).await.unwrap(), want);
        }
        assert!(store.file.path().exists());
        let d = store.describe();
        assert!(
            d.contains("cache 10 records") && d.contains("messages.json") && d.contains("(pool 2)"),
            "{d}"
        );
    }

    #[test]
    fn defaults() {
        let c = StoreConfig::default();
        assert_eq!(c.data_dir, std::env::temp_dir().join("brisk-bench"));
        assert_eq!(c.db_pool_size, DEFAULT_POOL_SIZE);
        assert_eq!(c.effective_db_url(), MessageDb::default_url());
        let c = StoreConfig {
            db_url: Some("sqlite::memory:".into()),
            ..StoreConfig::new("/x")
        };
        assert_eq!(c.effective_db_url(), "sqlite::memory:");
    }
}
