//! [`ServerStats`]: cheap counters an operator (and the benchmark suite) reads.
//!
//! Every field is a relaxed atomic — or, for the count every call adds to, a
//! [`Counter`] of one atomic per thread shard, summed when read — written
//! where the event happens (accept loop, admission, connection tasks) and
//! read together by [`ServerStats::snapshot`]; a snapshot is not one
//! instant, and neither is a `Counter`'s sum.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::shard::{self, SHARDS};

/// Live counters of one server.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Connections currently open.
    pub open_connections: AtomicUsize,
    /// Connections accepted since start.
    pub accepted_connections: AtomicU64,
    /// Connections refused on arrival by `max_connections` (when no open
    /// connection could be evicted) or `max_connections_per_ip`.
    pub refused_connections: AtomicU64,
    /// Connections closed to make room at `max_connections` (each had gone
    /// longest without a call).
    pub evicted_connections: AtomicU64,
    /// Requests read.
    pub requests: Counter,
    /// Requests answered with an error status.
    pub errors: AtomicU64,
    /// Requests rejected because the worker pool was full.
    pub busy_rejections: AtomicU64,
    /// Frames read while their connection was busy-polling for them, each a
    /// wake-up saved (`busy_poll`).
    pub busy_polled_frames: AtomicU64,
    /// Of those, the frames the poll read from the socket itself, before
    /// any runtime thread had seen the socket readable (on a runtime with
    /// several workers the only way a poll sees them).
    pub busy_poll_reads: AtomicU64,
    /// Writes of pooled answers that a worker made itself, on the socket its
    /// connection lent while it waited (each a wake-up of the connection's
    /// task saved; plain sockets only).
    pub worker_writes: AtomicU64,
    /// Requests a worker read itself, on the read side its connection lent
    /// while a lone caller kept its rhythm or a pipelining caller had the
    /// pool to itself (each a wake-up of the connection's task and a
    /// hand-over to the pool saved; plain sockets only).
    pub worker_reads: AtomicU64,
    /// Batches of pooled calls that found every worker parked and yielded
    /// their runtime thread before waking one, so the thread's other ready
    /// connections could submit theirs first (`connection`, "Waking the
    /// pool"); each batch of a shared turn counts, joined or not.
    pub deferred_wakes: AtomicU64,
}

/// A point-in-time copy of [`ServerStats`] (fields as documented there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[allow(missing_docs)] // each field is its `ServerStats` counter, documented there
pub struct StatsSnapshot {
    pub open_connections: usize,
    pub accepted_connections: u64,
    pub refused_connections: u64,
    pub evicted_connections: u64,
    pub requests: u64,
    pub errors: u64,
    pub busy_rejections: u64,
    pub busy_polled_frames: u64,
    pub busy_poll_reads: u64,
    pub worker_writes: u64,
    pub worker_reads: u64,
    pub deferred_wakes: u64,
}

impl ServerStats {
    /// Reads all counters.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            open_connections: self.open_connections.load(Ordering::Relaxed),
            accepted_connections: self.accepted_connections.load(Ordering::Relaxed),
            refused_connections: self.refused_connections.load(Ordering::Relaxed),
            evicted_connections: self.evicted_connections.load(Ordering::Relaxed),
            requests: self.requests.get(),
            errors: self.errors.load(Ordering::Relaxed),
            busy_rejections: self.busy_rejections.load(Ordering::Relaxed),
            busy_polled_frames: self.busy_polled_frames.load(Ordering::Relaxed),
            busy_poll_reads: self.busy_poll_reads.load(Ordering::Relaxed),
            worker_writes: self.worker_writes.load(Ordering::Relaxed),
            worker_reads: self.worker_reads.load(Ordering::Relaxed),
            deferred_wakes: self.deferred_wakes.load(Ordering::Relaxed),
        }
    }
}

/// A count that every thread running calls adds to: one copy per
/// thread shard (`shard.rs`), on cache lines of its own, summed when read.
#[derive(Default)]
pub struct Counter(Box<[Padded; SHARDS]>);

/// Shows the count, not its copies.
impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

#[derive(Default)]
#[repr(align(128))]
struct Padded(AtomicU64);

impl Counter {
    /// Adds `n`, to the calling thread's copy.
    pub fn add(&self, n: u64) {
        self.0[shard::index()].0.fetch_add(n, Ordering::Relaxed);
    }

    /// The count: every copy's, summed.
    pub fn get(&self) -> u64 {
        self.0.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::Counter;

    #[test]
    fn a_counter_sums_what_every_thread_added() {
        let counter = Counter::default();
        std::thread::scope(|s| {
            for _ in 0..20 {
                s.spawn(|| {
                    for _ in 0..50 {
                        counter.add(2);
                    }
                });
            }
        });
        assert_eq!(counter.get(), 20 * 50 * 2);
        assert_eq!(format!("{counter:?}"), "2000");
    }
}
