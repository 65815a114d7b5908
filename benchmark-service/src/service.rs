//! `BenchmarkService`: the service every benchmark scenario calls, defined with
//! brisk's typed API exactly as a user would define theirs.
//!
//! From top to bottom each scenario blocks more: `do_nothing` returns at once,
//! the cache clones a record, the file scenario reads and parses
//! `messages.json` on every call, the db scenario runs a real query on every call
//! (embedded SQLite by default — blocking the thread that runs it, as JDBC did in
//! the Java original — or PostgreSQL). `echo` returns its bytes, for payload sweeps.

use brisk::{async_trait, Payload, RpcError};

use crate::store::{Message, MessageStore, StoreError};
use brisk::{Code, Status};

brisk::service! {
    /// The jksoa-benchmark service.
    pub trait BenchmarkService {
        /// `nth`: nothing at all.
        async fn do_nothing();
        /// `cache`: one of the 10 records from an in-process cache.
        async fn get_message_from_cache(id: i64) -> Message;
        /// `file`: reads and parses `messages.json`, then finds the record.
        async fn get_message_from_file(id: i64) -> Message;
        /// `db`: `select … from message where id = ?` on the configured database.
        async fn get_message_from_db(id: i64) -> Message;
        /// `echo`: the same bytes back.
        async fn echo(data: Payload) -> Payload;
    }
}

/// The implementation over a [`MessageStore`].
#[derive(Debug, Clone)]
pub struct BenchmarkServiceImpl {
    store: MessageStore,
}

impl BenchmarkServiceImpl {
    /// Serves the records of `store`.
    pub fn new(store: MessageStore) -> Self {
        BenchmarkServiceImpl { store }
    }

    /// The store behind the service.
    pub fn store(&self) -> &MessageStore {
        &self.store
    }
}

/// A store failure as the caller's error: a missing record is
/// [`Code::NotFound`], anything else the store's infrastructure failing
/// ([`Code::Unavailable`]).
fn handler_error(e: StoreError) -> RpcError {
    let code = if e.is_not_found() {
        Code::NotFound
    } else {
        Code::Unavailable
    };
    Status::new(code, e.to_string()).into()
}

#[async_trait]
impl BenchmarkService for BenchmarkServiceImpl {
    async fn do_nothing(&self) -> Result<(), RpcError> {
        Ok(())
    }

    async fn get_message_from_cache(&self, id: i64) -> Result<Message, RpcError> {
        self.store.cache.get(id).map_err(handler_error)
    }

    async fn get_message_from_file(&self, id: i64) -> Result<Message, RpcError> {
        self.store.file.get(id).map_err(handler_error)
    }

    async fn get_message_from_db(&self, id: i64) -> Result<Message, RpcError> {
        self.store.db.get(id).await.map_err(handler_error)
    }

    async fn echo(&self, data: Payload) -> Result<Payload, RpcError> {
        Ok(data)
    }
}
