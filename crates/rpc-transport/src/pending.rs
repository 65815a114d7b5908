//! [`PendingCalls`]: the calls of one client connection that wait for an answer,
//! and the one timer that times them all out.
//!
//! # Why not a timer per call
//!
//! Each call needs a deadline, and the obvious `tokio::time::timeout` around the
//! wait registers an entry in the runtime's timer wheel when the call starts and
//! removes it when the answer arrives: two trips through the timer driver's lock
//! per call, for a timer that almost never fires (profiled at 8 % of the client's
//! CPU at 1:100:1024). Instead the table remembers each call's deadline, rounded
//! *up* to the millisecond, and one sweeper task per connection sleeps until the
//! earliest deadline that may still be pending, fails what has expired, and goes
//! back to sleep until the next one. Starting a call costs one `fetch_min` on an
//! atomic; only a call whose deadline is *earlier* than every pending one (a
//! shorter timeout than its neighbours) wakes the sweeper to re-arm.
//!
//! With every call on the same timeout, the sweeper wakes about once per timeout
//! period, scans the table (calls in flight, a few hundred at most in practice)
//! and sleeps again: its cost is independent of the call rate. A call never
//! times out early; it may time out up to a millisecond late.
//!
//! # Why a mutex around a `HashMap`
//!
//! Insert (caller), remove (reader, or the caller giving up) and the sweep all
//! touch one table; a `parking_lot` mutex uncontended is one atomic each way, the
//! same price as a `DashMap` shard lock, and lets the sweep see a consistent
//! table. Request ids are sequential, so the map hashes them with one
//! multiplication.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rpc_codec::Frame;
use rpc_core::RpcError;
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

use crate::CloseSignal;

/// What a waiting call receives: its answer frame or why there is none.
pub(crate) type Outcome = Result<Frame, RpcError>;

/// No deadline pending.
const NONE_DUE: u64 = u64::MAX;

/// Hashes sequential request ids by one multiplication (Fibonacci hashing), which
/// spreads them over the high bits the table's probing looks at.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

struct Entry {
    slot: oneshot::Sender<Outcome>,
    /// Milliseconds after the table's epoch, rounded up.
    due_ms: u64,
}

/// The pending calls of one connection, keyed by request id.
pub(crate) struct PendingCalls {
    table: Mutex<HashMap<u64, Entry, BuildHasherDefault<IdHasher>>>,
    epoch: Instant,
    /// The earliest deadline that may still be pending (ms after `epoch`), or
    /// `NONE_DUE`. Lowered by `insert`, recomputed by the sweep.
    next_due_ms: AtomicU64,
    /// Woken when `insert` lowers `next_due_ms` below what the sweeper sleeps to.
    earlier: Notify,
}

impl std::fmt::Debug for PendingCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingCalls")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl PendingCalls {
    pub(crate) fn new() -> Self {
        PendingCalls {
            table: Mutex::new(HashMap::default()),
            epoch: Instant::now(),
            next_due_ms: AtomicU64::new(NONE_DUE),
            earlier: Notify::new(),
        }
    }

    fn due_ms(&self, deadline: Instant) -> u64 {
        let after = deadline.saturating_duration_since(self.epoch);
        // Round up: a call is never failed before its deadline.
        let ms = after.as_nanos().div_ceil(1_000_000);
        ms.min(NONE_DUE as u128 - 1) as u64
    }

    /// Registers call `id`, due at `deadline`; the receiver gets its outcome.
    pub(crate) fn insert(&self, id: u64, deadline: Instant) -> oneshot::Receiver<Outcome> {
        let (slot, rx) = oneshot::channel();
        let due_ms = self.due_ms(deadline);
        self.table.lock().insert(id, Entry { slot, due_ms });
        // After the insert: a sweep that recomputes the minimum either saw this
        // entry or stored its minimum before this lowers it.
        if self.next_due_ms.fetch_min(due_ms, Ordering::AcqRel) > due_ms {
            self.earlier.notify_one();
        }
        rx
    }

    /// Completes call `id` with `outcome`; false when it is no longer pending
    /// (timed out, or given up by its caller).
    pub(crate) fn complete(&self, id: u64, outcome: Outcome) -> bool {
        let entry = self.table.lock().remove(&id);
        match entry {
            Some(entry) => {
                let _ = entry.slot.send(outcome);
                true
            }
            None => false,
        }
    }

    /// Forgets call `id` (its caller stopped waiting).
    pub(crate) fn remove(&self, id: u64) {
        self.table.lock().remove(&id);
    }

    /// Fails every pending call with `err`.
    pub(crate) fn fail_all(&self, err: &RpcError) {
        let entries: Vec<Entry> = self.table.lock().drain().map(|(_, e)| e).collect();
        for entry in entries {
            let _ = entry.slot.send(Err(err.clone()));
        }
    }

    /// Calls waiting for an answer.
    pub(crate) fn len(&self) -> usize {
        self.table.lock().len()
    }

    /// Fails the calls whose deadline has passed (with a bare `Timeout` that the
    /// waiting call fills in with its names) and recomputes the earliest deadline.
    fn sweep(&self, now: Instant) {
        let now_ms = now.saturating_duration_since(self.epoch).as_millis() as u64;
        let expired: Vec<Entry> = {
            let mut table = self.table.lock();
            let ids: Vec<u64> = table
                .iter()
                .filter(|(_, e)| e.due_ms <= now_ms)
                .map(|(id, _)| *id)
                .collect();
            let expired: Vec<Entry> = ids.iter().filter_map(|id| table.remove(id)).collect();
            let next = table.values().map(|e| e.due_ms).min().unwrap_or(NONE_DUE);
            // Under the lock, so that a concurrent insert's `fetch_min` comes after.
            self.next_due_ms.store(next, Ordering::Release);
            expired
        };
        for entry in expired {
            let _ = entry.slot.send(Err(RpcError::Timeout {
                service: String::new(),
                method: String::new(),
                timeout: Duration::ZERO,
            }));
        }
    }
}

/// Spawns the sweeper of `pending`; it ends when `close` fires.
pub(crate) fn spawn_sweeper(pending: Arc<PendingCalls>, close: Arc<CloseSignal>) {
    tokio::spawn(async move {
        let closed = close.closed();
        tokio::pin!(closed);
        loop {
            // Register for "an earlier deadline arrived" before reading the
            // earliest deadline, so that a lowering in between is not missed.
            let earlier = pending.earlier.notified();
            tokio::pin!(earlier);
            earlier.as_mut().enable();
            let due = pending.next_due_ms.load(Ordering::Acquire);
            let at = match due {
                NONE_DUE => None,
                ms => pending.epoch.checked_add(Duration::from_millis(ms)),
            };
            let Some(at) = at else {
                tokio::select! {
                    biased;
                    _ = &mut closed => return,
                    _ = earlier => continue,
                }
            };
            tokio::select! {
                biased;
                _ = &mut closed => return,
                _ = earlier => continue,
                _ = tokio::time::sleep_until(at) => {}
            }
            pending.sweep(Instant::now());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn expired_calls_time_out_and_answered_ones_do_not() {
        let pending = Arc::new(PendingCalls::new());
        let close = Arc::new(CloseSignal::new());
        spawn_sweeper(pending.clone(), close.clone());
        let now = Instant::now();
        let slow = pending.insert(1, now + Duration::from_millis(50));
        let fast = pending.insert(2, now + Duration::from_millis(50));
        let short = pending.insert(3, now + Duration::from_millis(10));
        assert!(pending.complete(2, Err(RpcError::ShuttingDown)));
        tokio::time::sleep(Duration::from_millis(11)).await;
        assert!(matches!(short.await, Ok(Err(RpcError::Timeout { .. }))));
        assert_eq!(pending.len(), 1, "only call 1 is still pending");
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert!(matches!(slow.await, Ok(Err(RpcError::Timeout { .. }))));
        assert!(matches!(fast.await, Ok(Err(RpcError::ShuttingDown))));
        assert!(!pending.complete(1, Err(RpcError::ShuttingDown)));
        close.close("test over");
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_deadline_rearms_the_sweeper() {
        let pending = Arc::new(PendingCalls::new());
        let close = Arc::new(CloseSignal::new());
        spawn_sweeper(pending.clone(), close.clone());
        let now = Instant::now();
        let _late = pending.insert(1, now + Duration::from_secs(60));
        tokio::task::yield_now().await; // the sweeper now sleeps until +60 s
        let early = pending.insert(2, now + Duration::from_millis(5));
        let started = Instant::now();
        assert!(matches!(early.await, Ok(Err(RpcError::Timeout { .. }))));
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(5) && waited < Duration::from_secs(1),
            "timed out after {waited:?}"
        );
        assert_eq!(pending.len(), 1);
        close.close("test over");
    }

    #[test]
    fn fail_all_empties_the_table() {
        let pending = PendingCalls::new();
        let mut rx = pending.insert(7, Instant::now() + Duration::from_secs(1));
        pending.fail_all(&RpcError::ShuttingDown);
        assert_eq!(pending.len(), 0);
        assert!(matches!(rx.try_recv(), Ok(Err(RpcError::ShuttingDown))));
    }
}
