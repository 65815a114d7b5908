//! `BenchmarkService`: the service every benchmark scenario calls, defined with
//! brisk's typed API exactly as a user would define theirs.
//!
//! From top to bottom each scenario blocks more: `do_nothing` returns at once,
//! the cache clones a record, the file scenario reads and parses
//! `messages.json` on every call, the db scenario runs a real query on every call
//! (embedded SQLite by default — blocking the thread that runs it, as JDBC did in
//! the Java original — or PostgreSQL). `echo` returns its bytes, for payload sweeps.
//!
//! Two streaming methods serve the `stream` and `pingpong` scenarios: `stream_items` answers
//! with a server stream of the caller's bytes repeated, `ping_pong` echoes each item of a
//! bidirectional stream back as it comes (the caller's [`Streaming`] is the answer stream
//! itself, so each item is read and sent on under the stream's credit, with no buffering).

use brisk::{Code, Context, Payload, Status, Stream, Streaming};

use crate::store::{Message, MessageStore, StoreError};

/// The jksoa-benchmark service.
#[brisk::service]
pub trait BenchmarkService {
    /// `nth`: nothing at all.
    async fn do_nothing(&self, cx: &Context) -> Result<(), Status>;
    /// `cache`: one of the 10 records from an in-process cache.
    async fn get_message_from_cache(&self, cx: &Context, id: i64) -> Result<Message, Status>;
    /// `file`: reads and parses `messages.json`, then finds the record.
    async fn get_message_from_file(&self, cx: &Context, id: i64) -> Result<Message, Status>;
    /// `db`: `select … from message where id = ?` on the configured database.
    async fn get_message_from_db(&self, cx: &Context, id: i64) -> Result<Message, Status>;
    /// `echo`: the same bytes back.
    async fn echo(&self, cx: &Context, data: Payload) -> Result<Payload, Status>;
    /// `stream`: a server stream of `count` items, each `data` (at most [`MAX_STREAM_ITEMS`]).
    async fn stream_items(
        &self,
        cx: &Context,
        count: u32,
        data: Payload,
    ) -> Result<impl Stream<Item = Result<Payload, Status>> + Send, Status>;
    /// `pingpong`: each of the caller's items back, in order, as it arrives; the answer stream
    /// ends when the caller's does.
    async fn ping_pong(
        &self,
        cx: &Context,
        items: Streaming<Payload>,
    ) -> Result<impl Stream<Item = Result<Payload, Status>> + Send, Status>;
}

/// The most items one `stream_items` call may ask for (a guard against a caller asking the
/// server to produce without end; the suite asks for [`STREAM_ITEMS`](crate::scenario::STREAM_ITEMS)).
pub const MAX_STREAM_ITEMS: u32 = 1_000_000;

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
fn handler_error(e: StoreError) -> Status {
    let code = if e.is_not_found() {
        Code::NotFound
    } else {
        Code::Unavailable
    };
    Status::new(code, e.to_string())
}

impl BenchmarkService for BenchmarkServiceImpl {
    async fn do_nothing(&self, _cx: &Context) -> Result<(), Status> {
        Ok(())
    }

    async fn get_message_from_cache(&self, _cx: &Context, id: i64) -> Result<Message, Status> {
        self.store.cache.get(id).map_err(handler_error)
    }

    async fn get_message_from_file(&self, _cx: &Context, id: i64) -> Result<Message, Status> {
        self.store.file.get(id).map_err(handler_error)
    }

    async fn get_message_from_db(&self, _cx: &Context, id: i64) -> Result<Message, Status> {
        self.store.db.get(id).await.map_err(handler_error)
    }

    async fn echo(&self, _cx: &Context, data: Payload) -> Result<Payload, Status> {
        Ok(data)
    }

    async fn stream_items(
        &self,
        _cx: &Context,
        count: u32,
        data: Payload,
    ) -> Result<impl Stream<Item = Result<Payload, Status>> + Send, Status> {
        if count > MAX_STREAM_ITEMS {
            return Err(Status::new(
                Code::InvalidArgument,
                format!("stream_items: {count} items asked for, at most {MAX_STREAM_ITEMS}"),
            ));
        }
        // Each item shares the request's buffer (`Bytes` clones are reference counts).
        Ok(futures::stream::iter(
            std::iter::repeat_n(data, count as usize).map(Ok),
        ))
    }

    async fn ping_pong(
        &self,
        _cx: &Context,
        items: Streaming<Payload>,
    ) -> Result<impl Stream<Item = Result<Payload, Status>> + Send, Status> {
        Ok(items)
    }
}
