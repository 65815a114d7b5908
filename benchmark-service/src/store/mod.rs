//! The data behind the benchmark scenarios.
//!
//! The benchmark service serves the same 10 [`Message`] records (ids `1..=10`, callers use
//! key `i % 10 + 1`) from sources that block more and more, one per scenario:
//!
//! | scenario | source | what a call does |
//! |---|---|---|
//! | `nth` | — | nothing |
//! | `cache` | [`MessageCache`] | a map lookup and a clone |
//! | `file` | [`MessageFile`] | reads and parses `messages.json` from disk (std::fs, blocking) |
//! | `db` | [`MessageDb`] | a prepared select through a bounded pool: embedded SQLite (blocking) or PostgreSQL (async) |
//!
//! The server opens a [`MessageStore`] (all three) once at start from a [`StoreConfig`].
//! Errors are [`StoreError`]; [`StoreError::NotFound`] is the only non-infrastructure one.

mod bundle;
mod cache;
mod db;
mod error;
mod file;
mod message;

#[cfg(test)]
pub(crate) mod test_util;

pub use bundle::{MessageStore, StoreConfig};
pub use cache::MessageCache;
pub use db::{DbKind, MessageDb, CHECKOUT_TIMEOUT, DEFAULT_POOL_SIZE, SELECT_SQL};
pub use error::StoreError;
pub use file::{MessageFile, MESSAGE_FILE_NAME};
pub use message::{seed_messages, Message, MAX_ID, MESSAGE_COUNT, MIN_ID};
