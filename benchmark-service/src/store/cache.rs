//! The `cache` scenario: the 10 records in an in-process map.
//!
//! This is the "blocks a little" rung of the benchmark ladder (nth < cache < file < db): a
//! lookup is a hash-map probe plus a clone of a ~60-byte record, with no I/O and no lock. The
//! map is immutable after construction and shared behind an `Arc`, so cloning a
//! [`MessageCache`] is cheap and concurrent readers never contend — what the scenario measures
//! is the RPC path, not the cache.

use std::collections::HashMap;
use std::sync::Arc;

use crate::store::error::StoreError;
use crate::store::message::{seed_messages, Message};

/// Immutable in-process map of messages by id. Cheap to clone (shared `Arc`).
#[derive(Debug, Clone)]
pub struct MessageCache {
    map: Arc<HashMap<i64, Message>>,
}

impl MessageCache {
    /// A cache holding the 10 seed records ([`seed_messages`]).
    pub fn new() -> MessageCache {
        MessageCache::from_messages(seed_messages())
    }

    /// A cache holding `messages` (a later record with the same id wins).
    pub fn from_messages(messages: impl IntoIterator<Item = Message>) -> MessageCache {
        let map = messages.into_iter().map(|m| (m.id, m)).collect();
        MessageCache { map: Arc::new(map) }
    }

    /// A clone of the record with `id`, or [`StoreError::NotFound`].
    pub fn get(&self, id: i64) -> Result<Message, StoreError> {
        self.map.get(&id).cloned().ok_or(StoreError::NotFound(id))
    }

    /// Number of records held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when no record is held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl Default for MessageCache {
    fn default() -> Self {
        MessageCache::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::message::{MAX_ID, MIN_ID};

    #[test]
    fn holds_the_ten_seed_records() {
        let cache = MessageCache::new();
        assert_eq!(cache.len(), 10);
        assert!(!cache.is_empty());
        for id in MIN_ID..=MAX_ID {
            assert_eq!(cache.get(id).unwrap(), Message::seed(id));
        }
        // the key formula callers use always hits
        for i in 0..100i64 {
            assert_eq!(cache.get(i % 10 + 1).unwrap().id, i % 10 + 1);
        }
    }

    #[test]
    fn missing_ids_are_not_found() {
        let cache = MessageCache::default();
        for id in [0, 11, -1, i64::MAX] {
            assert!(matches!(cache.get(id), Err(StoreError::NotFound(x)) if x == id));
        }
    }

    #[test]
    fn clones_share_and_threads_read_concurrently() {
        let cache = MessageCache::new();
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let c = cache.clone();
                std::thread::spawn(move || {
                    for i in 0..1000i64 {
                        let id = (i + t) % 10 + 1;
                        assert_eq!(c.get(id).unwrap().id, id);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
}
