//! [`Shared`]: the state the pool handle, its workers and its monitor
//! share — the protocol counters of the grow-before-queue rule, the thread
//! slots, and the shutdown handshake — with the small steps on them that
//! submitters and workers both take.
//!
//! The counters that every call touches sit on cache lines of their own
//! ([`Padded`]). Their orderings, and the three races they close, are the
//! pool's module docs' "Correctness notes".

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::Duration;

use super::monitor::bell::Monitor;
use super::seat::Seat;
use super::sync::thread::JoinHandle;
use super::sync::{Arc, Condvar, Mutex};
use super::sync::{AtomicBool, AtomicU64, AtomicUsize};
use super::{Rejected, Task, TaskQueue};
use std::ops::Deref;

/// What the queue reads of the pool's activity: the workers inside a task,
/// and the monitor's clock.
#[derive(Default)]
pub(crate) struct Pulse {
    /// Threads currently inside a task.
    pub(super) active: Padded<AtomicUsize>,
    /// Ticks of the monitor since the pool started ([`monitor::TICK`](super::monitor::TICK) each).
    pub(super) tick: AtomicU64,
}

/// Keeps a hot counter on its own cache line so that workers bumping one
/// counter do not invalidate the line submitters read another from.
#[derive(Default)]
#[repr(align(128))]
pub(super) struct Padded<T>(T);

impl<T> Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A call whose handler waits off the workers, counted against the pool's
/// admission bound until dropped ([`WorkerPool::park`](super::WorkerPool::park)).
pub(crate) struct Parked(pub(super) Arc<Shared>);

impl Drop for Parked {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Relaxed);
    }
}

/// State shared by the pool handle and all worker threads.
pub(super) struct Shared {
    pub(super) queue: Box<dyn TaskQueue>,
    pub(super) core: usize,
    pub(super) max: usize,
    pub(super) keep_alive: Duration,
    /// Max unfinished tasks: `queue_size + max_threads` for the transfer
    /// queue, unlimited for the blocking queue (which bounds itself).
    pub(super) submit_limit: usize,
    /// Max unfinished tasks plus calls waiting off the workers (see
    /// [`Parked`]): `queue_size + max_threads`, for either queue.
    pub(super) admit_limit: usize,
    /// Calls whose handler waits, off the workers ([`Parked`]).
    pub(super) waiting: AtomicUsize,
    /// A worker keeps a lone caller's rhythm: it waits awake for the next
    /// call after each (`rhythm.rs`), and looks at a lent read side then.
    pub(super) rhythm: AtomicBool,
    pub(super) name: String,
    /// The tokio runtime every worker thread enters once, for its life, when
    /// the pool runs a server's calls (a handler may spawn, sleep or do
    /// tokio I/O): entering per task was a thread-local swap in and out
    /// per call.
    pub(super) runtime: Option<tokio::runtime::Handle>,

    /// Accepted but unfinished tasks (queued + running + being handed over),
    /// a run ([`WorkerPool::submit_run`](super::WorkerPool::submit_run)) counted as its unfinished calls.
    pub(super) submitted: Padded<AtomicUsize>,
    /// The calls in `submitted` that a run will start after the one it
    /// runs: they need no thread of their own, so growth leaves them out
    /// (`submitted - run_rest` is the work that needs a thread each).
    /// Lowered before `submitted` is, so a reader in between sees more
    /// work, not less.
    pub(super) run_rest: Padded<AtomicUsize>,
    /// The monitor's tick when it last started a thread for a stalled queue
    /// (`monitor/`).
    pub(super) grown_at: AtomicU64,
    /// Threads inside a task, and the monitor's tick (shared with the queue).
    pub(super) pulse: Arc<Pulse>,
    pub(super) completed: Padded<AtomicU64>,
    /// Live threads, including slots reserved for threads being spawned.
    pub(super) pool_size: Padded<AtomicUsize>,
    pub(super) largest: AtomicUsize,
    pub(super) rejected: AtomicU64,
    pub(super) shutdown: AtomicBool,
    pub(super) next_id: AtomicUsize,

    pub(super) handles: Mutex<Vec<JoinHandle<()>>>,
    /// Every live worker, as the monitor sees it.
    pub(super) seats: Mutex<Vec<Arc<Seat>>>,
    pub(super) monitor: Monitor,
    /// The monitor thread, joined by `shutdown`.
    pub(super) monitor_thread: Mutex<Option<JoinHandle<()>>>,
    /// Signalled whenever a thread gives up its `pool_size` slot.
    pub(super) exit_lock: Mutex<()>,
    pub(super) exited: Condvar,
}

impl Shared {
    pub(super) fn reject(&self, task: Task) -> Rejected {
        self.rejected.fetch_add(1, Relaxed);
        Rejected(task)
    }

    /// Un-counts a task that `submit` had already added to `submitted` and
    /// rejects it. A `shutdown` may be waiting for `submitted` to reach zero
    /// (see [`WorkerPool::shutdown`](super::WorkerPool::shutdown)), so tell it — only needed once the flag
    /// is set: we decrement before we read the flag and `shutdown` sets the
    /// flag before it reads `submitted` (all `SeqCst`), so if we read `false`
    /// here, `shutdown` sees the decrement.
    pub(super) fn withdraw(&self, task: Task) -> Rejected {
        let task = self.withdraw_resumed(task);
        self.rejected.fetch_add(1, Relaxed);
        task
    }

    /// [`withdraw`](Self::withdraw) without counting a rejection: a
    /// resumed task refused because the pool shut down.
    pub(super) fn withdraw_resumed(&self, task: Task) -> Rejected {
        self.uncount(1);
        Rejected(task)
    }

    /// What names this pool to its workers' seats: the address of its
    /// shared state.
    pub(super) fn id(&self) -> usize {
        self as *const Shared as usize
    }

    /// How many unfinished tasks the bounds admit now, read after a
    /// submitter counted its own: `submit_limit`, and `admit_limit` less
    /// the calls waiting off the workers; none once the pool is shut down
    /// (the re-check that closes the race with `shutdown`).
    pub(super) fn unfinished_limit(&self) -> usize {
        if self.shutdown.load(SeqCst) {
            return 0;
        }
        self.submit_limit
            .min(self.admit_limit.saturating_sub(self.waiting.load(Relaxed)))
    }

    /// Takes `calls` back out of `submitted` (see [`withdraw`](Self::withdraw)
    /// for why a `shutdown` is told).
    pub(super) fn uncount(&self, calls: usize) {
        self.submitted.fetch_sub(calls, SeqCst);
        if self.shutdown.load(SeqCst) {
            self.notify_exit();
        }
    }

    /// Whether `shutdown` must keep waiting: a thread holds a slot, or an
    /// accepted task has not finished — possibly one whose submitter has not
    /// yet started the thread that will run it.
    pub(super) fn busy(&self) -> bool {
        self.pool_size.load(SeqCst) > 0 || self.submitted.load(SeqCst) > 0
    }

    /// The unfinished calls that need a thread each: all but those runs
    /// will start after the one they run (`run_rest`, read first: a run
    /// counts its calls in `submitted` before its rest, so every rest read
    /// has its calls in the `submitted` read after it).
    pub(super) fn needing_threads(&self) -> usize {
        let rest = self.run_rest.load(SeqCst);
        self.submitted.load(SeqCst).saturating_sub(rest)
    }

    /// Reserves a thread slot if the pool is below `max_threads`.
    pub(super) fn reserve_thread(&self) -> bool {
        let mut n = self.pool_size.load(SeqCst);
        loop {
            if n >= self.max {
                return false;
            }
            match self
                .pool_size
                .compare_exchange_weak(n, n + 1, SeqCst, SeqCst)
            {
                Ok(_) => {
                    self.largest.fetch_max(n + 1, Relaxed);
                    return true;
                }
                Err(current) => n = current,
            }
        }
    }

    /// Gives up a thread slot and tells `shutdown` waiters.
    pub(super) fn release_slot(&self) {
        self.pool_size.fetch_sub(1, SeqCst);
        self.notify_exit();
    }

    /// Wakes `shutdown` waiters after `pool_size` (or, on the reject path,
    /// `submitted`) went down.
    pub(super) fn notify_exit(&self) {
        // Take the lock so a `shutdown` that just checked `busy()` and is
        // about to wait cannot miss this notification.
        let _guard = self.exit_lock.lock();
        self.exited.notify_all();
    }

    /// Called after an idle thread above core timed out. Returns `true` if the
    /// thread has given up its slot and must exit.
    pub(super) fn try_retire(&self) -> bool {
        if self.shutdown.load(SeqCst) {
            return false; // the drain path decides
        }
        let mut n = self.pool_size.load(SeqCst);
        loop {
            if n <= self.core {
                return false;
            }
            match self
                .pool_size
                .compare_exchange_weak(n, n - 1, SeqCst, SeqCst)
            {
                Ok(_) => break,
                Err(current) => n = current,
            }
        }
        // A submitter may have counted us as idle and enqueued just before we
        // left. If more tasks are in flight than threads remain, take a slot
        // back and keep working (see module docs).
        if self.submitted.load(SeqCst) > n - 1 && self.reserve_thread() {
            return false;
        }
        true
    }

    pub(super) fn begin_shutdown(&self) {
        if !self.shutdown.swap(true, SeqCst) {
            self.queue.close();
            self.monitor.stop();
        }
    }
}
