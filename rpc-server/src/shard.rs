//! Which copy of a sharded counter the calling thread writes.
//!
//! A counter that every thread running calls adds to per call (a method's
//! metrics, the server's request count) is a line all of them write: each add
//! waits for the line to come back from the thread that wrote it last. Such
//! counters are kept [`SHARDS`] times over, each copy on cache lines of its
//! own; a thread adds to the copy [`index`] gives it (threads numbered as they
//! first ask, so threads beyond `SHARDS` share copies, which stays correct:
//! the adds are atomic), and a read sums the copies.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Copies of a sharded counter.
pub(crate) const SHARDS: usize = 8;

/// The calling thread's copy, below [`SHARDS`].
pub(crate) fn index() -> usize {
    static THREADS: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = THREADS.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    INDEX.with(|index| *index)
}
