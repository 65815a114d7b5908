//! A Tomcat-style bounded pool of OS worker threads for running service
//! handlers off the async runtime.
//!
//! # Why a thread pool in a tokio server
//!
//! Service handlers may block (JDBC-style database calls, file I/O, CPU-heavy
//! work). Running them on tokio's reactor threads would stall every connection,
//! so the server hands each decoded request to this pool and writes the reply
//! when the task finishes. When the pool is saturated, [`WorkerPool::submit`]
//! returns the task straight back in a [`Rejected`] so the server can answer
//! "server busy" immediately instead of queueing without limit.
//!
//! # Why it is shaped like Tomcat's executor, not like `ThreadPoolExecutor`
//!
//! A plain Java `ThreadPoolExecutor` only grows beyond its core size once the
//! queue is *full*: with a large queue (we default to 100 000) the pool would
//! effectively never grow and requests would wait behind a handful of blocked
//! threads. Tomcat (and jkrpc/Motan after it) turn that around with a trick in
//! `TaskQueue.offer`: it keeps a count of *submitted but not yet finished*
//! tasks and, on each submit,
//!
//! 1. if the pool is already at `max_threads` → enqueue;
//! 2. else if submitted ≤ live threads (some thread is idle) → enqueue, the
//!    idle thread picks it up (a run of calls counts as one here);
//! 3. else if the pool is below `max_threads` → start a new thread, which runs
//!    this task first;
//! 4. else → enqueue.
//!
//! So the pool grows *before* it queues, and only queues once every one of
//! `max_threads` threads is busy. Threads above `core_threads` that stay idle
//! for `keep_alive` exit again; core threads are started up front and live
//! until shutdown.
//!
//! # The two queue kinds
//!
//! Both sit behind the private `TaskQueue` trait (offer / poll with timeout /
//! len / close, plus the wake-up hooks below):
//!
//! * [`QueueKind::Blocking`] (`blocking.rs`) — `LinkedBlockingQueue`: a mutex
//!   and condvar around a `VecDeque`, bounded by `queue_size` queued tasks;
//!   every offer wakes a parked worker.
//! * [`QueueKind::Transfer`] (`transfer.rs`, the default) —
//!   `LinkedTransferQueue` as Motan uses it: a hand-off queue that wakes a
//!   worker only when none is awake to take the task, the most recently
//!   parked first. Like Motan, the *pool* bounds it with the submitted-task
//!   counter it already keeps for the rule above: a submit is rejected when
//!   submitted (queued + running) would exceed `queue_size + max_threads`.
//!
//! # Wake-ups, and the monitor
//!
//! On two cores a context switch costs more than a short handler, so the
//! pool is built to need few: a batch of tasks submitted quietly
//! ([`WorkerPool::submit_quietly`], or together with
//! `WorkerPool::submit_batch`, then one [`WorkerPool::wake_idle`]) wakes
//! at most one worker; a worker runs queued tasks back to back without
//! parking; and the wake-ups its tasks ask for (`wake_soon`, a connection's
//! answers) go out once its run of tasks ends (`seat.rs`). All of that rests
//! on an awake worker coming back soon, which a blocking handler breaks; so a
//! monitor thread (`monitor.rs`) looks every millisecond while there is work
//! and wakes one more worker while the oldest queued task has waited a full
//! tick — or, when every live worker is inside a task and none is parked,
//! starts one more thread (up to `max_threads`) — and sends the deferred
//! wake-ups of a worker stuck in a task. A blocking handler holds up what is
//! queued behind it for 1–2 ms, not for as long as it blocks. A submit still
//! starts a thread itself when more tasks are unfinished than threads are
//! live; the monitor's growth covers what a submit cannot see (counts read
//! while a run changed them).
//!
//! A lone caller (one call at a time, 1:1) gets no batch to share a wake-up
//! with: each of its calls would find the worker parked. So a worker whose
//! one task was the pool's only work waits for the next awake, for up to
//! 100 µs, before it parks (`rhythm.rs`, `TaskQueue::spin`); one worker at a
//! time, never while other calls keep the pool busy, and only while the
//! caller's calls have been coming closer together than that. While it
//! waits so it looks at what a task asked it to (`seat::IdlePoll`: the
//! caller's socket, lent by its connection), and submits the work it finds
//! to itself.
//!
//! # A run of calls
//!
//! A worker that reads a run of a pipelining caller's requests itself
//! submits them as one task that runs them one after another
//! (`WorkerPool::submit_run`, `dispatch::run`): counted as its calls
//! against the bound, and as one task by the growth rule above (one thread
//! runs it: its calls after the first need no thread of their own,
//! `Shared::run_rest`), and watched, so the monitor queues the calls it has
//! not started once it has gone on past the previous tick — one call
//! blocks, or its calls are long together (`seat.rs`, "A run of calls").
//!
//! # Work the pool accepted before
//!
//! A pooled async handler that waits holds no worker: its future becomes a
//! task whose waker hands its next poll back with `WorkerPool::resume`
//! (`dispatch::on_pool`). That hand-back grows the pool like a submit, goes
//! ahead of the queued tasks, and is never refused over the bound: the call
//! was admitted when it came in, and refusing its next poll would lose it.
//! The call still counts against the bound while it waits (`Parked`): new
//! submissions are refused while unfinished tasks and waiting calls
//! together exceed `queue_size + max_threads`, so a pool whose handlers
//! await a slow database still sheds load with `ServerBusy`. Shutdown does
//! not wait for waiting calls: once the pool is shut down, a woken one is
//! refused and dropped (the server closes its connections first, which
//! gives every call up).
//!
//! # Correctness notes
//!
//! The protocol counters (`submitted`, `active`, `pool_size`, the shutdown
//! flag) use `SeqCst`, which on the usual targets costs no more than the
//! read-modify-writes we need anyway. Three races are closed explicitly:
//!
//! * *Idle thread retiring while a task is enqueued for it.* A worker that
//!   times out first gives up its slot (`pool_size -= 1`), then re-reads
//!   `submitted`; if more tasks are in flight than threads remain it takes the
//!   slot back and keeps working. A submitter increments `submitted` before it
//!   reads `pool_size`, so one of the two always sees the other — in
//!   particular a pool with `core_threads == 0` can never strand a queued task
//!   with no thread left to run it.
//! * *Submit racing shutdown.* A submitter increments `submitted` and then
//!   re-checks the shutdown flag, so a task is either rejected or counted
//!   before shutdown becomes visible. Draining workers exit only once nothing
//!   is queued and `submitted ≤ active` (every accepted task is running
//!   somewhere), so an accepted task that is still on its way into the queue
//!   is never abandoned. A run counts its calls not started yet in
//!   `submitted` too; at shutdown the monitor queues them every tick, so
//!   that state does not last either. `shutdown` waits for
//!   `submitted == 0` as well as for `pool_size == 0`: with no thread left
//!   (`core_threads == 0`), an accepted submitter may not have started the
//!   thread for its task yet when
//!   `shutdown` looks (the loom models in `loom_tests.rs` check this
//!   interleaving).
//! * *Lost wake-ups.* Each queue's `poll` re-checks for tasks and for `close`
//!   under the same synchronisation the producer uses to publish, so a worker
//!   that is about to park always sees a concurrent offer or close. A worker
//!   leaves `active` before it looks for its next task, so an offer that saw
//!   it active (and woke nobody) is seen by it. An offer that found a worker
//!   on its way (woken, or spinning) wakes nobody either; if that worker
//!   takes one task and leaves others queued, it nudges the monitor before
//!   it runs its task (`Taken::watch`), since its task may block. The
//!   monitor sleeps only after looking for work under the queue's and the
//!   seats' locks, with `asleep` set first (see `monitor.rs`).
//!
//! # Model checking
//!
//! These claims are checked with [loom](https://docs.rs/loom), as tokio
//! checks its own primitives: `sync.rs` lets this module, `blocking.rs` and
//! `transfer.rs` run on loom's primitives under
//! `RUSTFLAGS="--cfg brisk_loom"`, and `loom_tests.rs` explores every
//! interleaving of small models (exactly-once, the bound, wake-ups, a quiet
//! batch, the monitor's rescue, deferred wake-ups, retiring, submit racing
//! shutdown, a run racing shutdown) up to a preemption bound. Run them with
//! `.ci/loom`. They found the two `shutdown` races now fixed there: it could
//! return `true` before an accepted task had run, and `false` with no time
//! limit.

mod blocking;
mod config;
mod monitor;
mod rhythm;
mod seat;
mod stats;
pub(crate) mod streak;
mod sync;
mod transfer;

pub use config::{PoolConfig, PoolError, QueueKind, Rejected};
pub(crate) use seat::{poll_soon, wake_soon, IdlePoll};
pub use stats::PoolStats;

use crate::panic::panic_message;
use blocking::BlockingQueue;
use monitor::Monitor;
pub(crate) use rhythm::yield_while;
use rhythm::Rhythm;
use seat::Seat;
use std::fmt;
use std::io;
use std::ops::Deref;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};
use sync::thread::{self, JoinHandle};
use sync::{Arc, Condvar, Mutex};
use sync::{AtomicBool, AtomicU64, AtomicUsize};
use transfer::TransferQueue;

/// A unit of work for the pool: run once, on a worker thread.
///
/// Every `FnOnce() + Send + 'static` closure is one. The job owns its box
/// while it runs, so a job type of its own may keep the allocation for its
/// next job instead of freeing it (a pooled call's, made on the connection
/// task and freed on a worker, would otherwise cross threads through the
/// allocator's slow path; see `rpc_core::spares`).
///
/// ```
/// use rpc_server::pool::{Job, PoolConfig, WorkerPool};
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// /// A job of its own type; a closure is one too.
/// struct Greet(mpsc::Sender<&'static str>);
///
/// impl Job for Greet {
///     fn run(self: Box<Self>) {
///         self.0.send("hello").ok();
///     }
/// }
///
/// let pool = WorkerPool::new(PoolConfig::default())?;
/// let (tx, rx) = mpsc::channel();
/// pool.submit(Box::new(Greet(tx.clone()))).ok();
/// pool.submit(Box::new(move || tx.send("world").unwrap())).ok();
/// let mut got = [rx.recv_timeout(Duration::from_secs(5))?, rx.recv_timeout(Duration::from_secs(5))?];
/// got.sort();
/// assert_eq!(got, ["hello", "world"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Job: Send + 'static {
    /// Runs the job.
    fn run(self: Box<Self>);
}

impl<F: FnOnce() + Send + 'static> Job for F {
    #[inline]
    fn run(self: Box<Self>) {
        (*self)()
    }
}

/// A job as the pool holds it.
pub type Task = Box<dyn Job>;

/// The calls a task runs one after another that it has not started yet
/// ([`WorkerPool::submit_run`]): what the monitor hands to the shared queue
/// when the task is stuck in one of them (see `seat.rs`, "A run of calls").
pub(crate) trait Rest: Send + Sync {
    /// Takes every call not started yet, each as a task of its own, in
    /// order. A call is either taken here or started by the run, never both.
    fn take_rest(&self) -> Vec<Task>;
}

/// The queue between submitters and workers.
///
/// `poll` waits until a task is available, the timeout elapses (`None` = no
/// limit, `Some(ZERO)` = don't wait) or the queue is closed and empty. `close`
/// wakes every parked poller; afterwards polls never wait on an empty queue,
/// but offers are still accepted so that a submission that raced shutdown is
/// drained rather than lost.
pub(crate) trait TaskQueue: Send + Sync {
    /// Queues `task`; with `wake` false the queue may leave waking a worker
    /// for it to a later [`wake_idle`](Self::wake_idle). `Ok(true)`: the
    /// queued tasks wait for a worker that is inside a task (it may block),
    /// so the monitor must watch.
    fn offer(&self, task: Task, wake: bool) -> Result<bool, Task>;
    /// [`offer`](Self::offer) with a wake-up, even when the queue is full:
    /// work the pool accepted before (see [`WorkerPool::resume`]).
    fn offer_past_bound(&self, task: Task) -> bool;
    /// Whether the pool may hand this queue a batch of tasks at once
    /// ([`offer_batch`](Self::offer_batch)): true for a queue the pool
    /// bounds, which refuses no task itself.
    fn takes_batches(&self) -> bool {
        false
    }
    /// Queues `tasks`, in order, as that many quiet [`offer`](Self::offer)s
    /// made at one instant: under one lock, and waking nobody (the caller
    /// wakes the pool after, [`wake_idle`](Self::wake_idle)). Called only
    /// when [`takes_batches`](Self::takes_batches) says so; a queue that
    /// does not queues each task past its bound here.
    fn offer_batch(&self, tasks: std::vec::Drain<'_, Task>) {
        for task in tasks {
            self.offer_past_bound(task);
        }
    }
    /// Wakes a worker if tasks are queued and none is awake to take them;
    /// returns whether the monitor must watch, as `offer` does.
    fn wake_idle(&self) -> bool;
    /// Whether [`wake_idle`](Self::wake_idle) would wake a parked worker
    /// now: tasks are queued, a worker is parked, and none is inside a
    /// task, spinning or on its way to take them. A snapshot, which may
    /// change at once: a caller still calls `wake_idle` after it. Always
    /// `false` for a queue that wakes a worker per offer.
    fn needs_wake(&self) -> bool {
        false
    }
    /// The monitor's tick `now`: wakes a worker if the oldest task has
    /// waited a full tick; says whether any task is queued, and whether one
    /// that waited so found no parked worker to wake.
    #[cfg_attr(brisk_loom, allow(dead_code))] // used by the monitor thread, not started under loom
    fn rescue(&self, now: u64) -> Rescue;
    /// Whether no task is queued, read under the queue's lock.
    #[cfg_attr(brisk_loom, allow(dead_code))] // used by the monitor thread, not started under loom
    fn is_empty_locked(&self) -> bool;
    fn poll(&self, timeout: Option<Duration>) -> Option<Taken>;
    /// Waits for a task for up to `limit` awake, without parking: a worker
    /// whose lone task just ended expects the next one within a round trip
    /// (see [`IDLE_SPIN`]). `None` when none came (or the queue does not
    /// spin: the blocking queue wakes a worker per offer anyway). `yields`
    /// is asked at every turn whether the turn gives the core away (see
    /// [`yield_while`]); it may look for work of its own meanwhile and
    /// submit it (`seat::IdlePoll`), which ends the wait.
    fn spin(&self, limit: Duration, yields: &mut dyn FnMut() -> bool) -> Option<Taken> {
        let _ = (limit, yields);
        None
    }
    /// Hands `poll` to the worker waiting awake in [`spin`](Self::spin),
    /// which looks at it at every turn (`seat::IdlePoll`) or releases it
    /// when its wait ends; back when no worker waits so.
    fn lend_spinner(
        &self,
        poll: std::sync::Arc<dyn IdlePoll>,
    ) -> Result<(), std::sync::Arc<dyn IdlePoll>> {
        Err(poll)
    }
    /// What was lent to the spinning worker, taken (by that worker).
    fn take_lent(&self) -> Option<std::sync::Arc<dyn IdlePoll>> {
        None
    }
    /// Whether [`spin`](Self::spin) waits at all.
    fn spins(&self) -> bool {
        false
    }
    /// Workers parked in [`poll`](Self::poll) (tests wait for a pool's
    /// threads to settle with it).
    #[cfg(test)]
    fn parked(&self) -> usize {
        0
    }
    fn len(&self) -> usize;
    fn close(&self);
}

/// What the monitor's [`TaskQueue::rescue`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rescue {
    /// Nothing queued.
    Empty,
    /// Tasks queued, and a worker on its way to them (maybe woken now).
    Queued,
    /// The oldest task has waited a full tick with no worker parked to wake
    /// and none on its way: a new thread takes it.
    Stalled,
}

/// A task taken from the queue by a worker.
pub(crate) struct Taken {
    pub(crate) task: Task,
    /// Tasks are left queued behind this one with no worker on its way to
    /// them: their offers woke nobody because this worker was on its way
    /// (woken, or spinning), and it is about to go inside a task that may
    /// block. The monitor must watch them, as after an `offer` that returned
    /// `true`.
    pub(crate) watch: bool,
}

impl From<Task> for Taken {
    fn from(task: Task) -> Self {
        Taken { task, watch: false }
    }
}

/// The calls the running task counted done beyond itself
/// ([`WorkerPool::discount`]), for its worker's count of calls in a row.
mod run_calls {
    #[cfg(not(brisk_loom))]
    std::thread_local! {
        static EXTRA: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// `calls` more done by the task running on this thread.
    pub(super) fn add(calls: usize) {
        #[cfg(not(brisk_loom))]
        EXTRA.with(|extra| extra.set(extra.get() + calls));
        #[cfg(brisk_loom)]
        let _ = calls;
    }

    /// The calls added since the last look, taken (none under loom, whose
    /// threads share the OS thread's locals).
    pub(super) fn take() -> usize {
        #[cfg(not(brisk_loom))]
        return EXTRA.with(std::cell::Cell::take);
        #[cfg(brisk_loom)]
        0
    }
}

/// What the queue reads of the pool's activity: the workers inside a task,
/// and the monitor's clock.
#[derive(Default)]
pub(crate) struct Pulse {
    /// Threads currently inside a task.
    active: Padded<AtomicUsize>,
    /// Ticks of the monitor since the pool started ([`monitor::TICK`] each).
    tick: AtomicU64,
}

/// Keeps a hot counter on its own cache line so that workers bumping one
/// counter do not invalidate the line submitters read another from.
#[derive(Default)]
#[repr(align(128))]
struct Padded<T>(T);

impl<T> Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A call whose handler waits off the workers, counted against the pool's
/// admission bound until dropped ([`WorkerPool::park`]).
pub(crate) struct Parked(Arc<Shared>);

impl Drop for Parked {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Relaxed);
    }
}

/// State shared by the pool handle and all worker threads.
struct Shared {
    queue: Box<dyn TaskQueue>,
    core: usize,
    max: usize,
    keep_alive: Duration,
    /// Max unfinished tasks: `queue_size + max_threads` for the transfer
    /// queue, unlimited for the blocking queue (which bounds itself).
    submit_limit: usize,
    /// Max unfinished tasks plus calls waiting off the workers (see
    /// [`Parked`]): `queue_size + max_threads`, for either queue.
    admit_limit: usize,
    /// Calls whose handler waits, off the workers ([`Parked`]).
    waiting: AtomicUsize,
    /// A worker keeps a lone caller's rhythm: it waits awake for the next
    /// call after each (`rhythm.rs`), and looks at a lent read side then.
    rhythm: AtomicBool,
    name: String,
    /// The tokio runtime every worker thread enters once, for its life, when
    /// the pool runs a server's calls (a handler may spawn, sleep or do
    /// tokio I/O): entering per task was a thread-local swap in and out
    /// per call.
    runtime: Option<tokio::runtime::Handle>,

    /// Accepted but unfinished tasks (queued + running + being handed over),
    /// a run ([`WorkerPool::submit_run`]) counted as its unfinished calls.
    submitted: Padded<AtomicUsize>,
    /// The calls in `submitted` that a run will start after the one it
    /// runs: they need no thread of their own, so growth leaves them out
    /// (`submitted - run_rest` is the work that needs a thread each).
    /// Lowered before `submitted` is, so a reader in between sees more
    /// work, not less.
    run_rest: Padded<AtomicUsize>,
    /// The monitor's tick when it last started a thread for a stalled queue
    /// (`monitor.rs`).
    grown_at: AtomicU64,
    /// Threads inside a task, and the monitor's tick (shared with the queue).
    pulse: Arc<Pulse>,
    completed: Padded<AtomicU64>,
    /// Live threads, including slots reserved for threads being spawned.
    pool_size: Padded<AtomicUsize>,
    largest: AtomicUsize,
    rejected: AtomicU64,
    shutdown: AtomicBool,
    next_id: AtomicUsize,

    handles: Mutex<Vec<JoinHandle<()>>>,
    /// Every live worker, as the monitor sees it.
    seats: Mutex<Vec<Arc<Seat>>>,
    monitor: Monitor,
    /// The monitor thread, joined by `shutdown`.
    monitor_thread: Mutex<Option<JoinHandle<()>>>,
    /// Signalled whenever a thread gives up its `pool_size` slot.
    exit_lock: Mutex<()>,
    exited: Condvar,
}

impl Shared {
    fn reject(&self, task: Task) -> Rejected {
        self.rejected.fetch_add(1, Relaxed);
        Rejected(task)
    }

    /// Un-counts a task that `submit` had already added to `submitted` and
    /// rejects it. A `shutdown` may be waiting for `submitted` to reach zero
    /// (see [`WorkerPool::shutdown`]), so tell it — only needed once the flag
    /// is set: we decrement before we read the flag and `shutdown` sets the
    /// flag before it reads `submitted` (all `SeqCst`), so if we read `false`
    /// here, `shutdown` sees the decrement.
    fn withdraw(&self, task: Task) -> Rejected {
        let task = self.withdraw_resumed(task);
        self.rejected.fetch_add(1, Relaxed);
        task
    }

    /// [`withdraw`](Self::withdraw) without counting a rejection: a
    /// resumed task refused because the pool shut down.
    fn withdraw_resumed(&self, task: Task) -> Rejected {
        self.uncount(1);
        Rejected(task)
    }

    /// What names this pool to its workers' seats: the address of its
    /// shared state.
    fn id(&self) -> usize {
        self as *const Shared as usize
    }

    /// How many unfinished tasks the bounds admit now, read after a
    /// submitter counted its own: `submit_limit`, and `admit_limit` less
    /// the calls waiting off the workers; none once the pool is shut down
    /// (the re-check that closes the race with `shutdown`).
    fn unfinished_limit(&self) -> usize {
        if self.shutdown.load(SeqCst) {
            return 0;
        }
        self.submit_limit
            .min(self.admit_limit.saturating_sub(self.waiting.load(Relaxed)))
    }

    /// Takes `calls` back out of `submitted` (see [`withdraw`](Self::withdraw)
    /// for why a `shutdown` is told).
    fn uncount(&self, calls: usize) {
        self.submitted.fetch_sub(calls, SeqCst);
        if self.shutdown.load(SeqCst) {
            self.notify_exit();
        }
    }

    /// Whether `shutdown` must keep waiting: a thread holds a slot, or an
    /// accepted task has not finished — possibly one whose submitter has not
    /// yet started the thread that will run it.
    fn busy(&self) -> bool {
        self.pool_size.load(SeqCst) > 0 || self.submitted.load(SeqCst) > 0
    }

    /// The unfinished calls that need a thread each: all but those runs
    /// will start after the one they run (`run_rest`, read first: a run
    /// counts its calls in `submitted` before its rest, so every rest read
    /// has its calls in the `submitted` read after it).
    fn needing_threads(&self) -> usize {
        let rest = self.run_rest.load(SeqCst);
        self.submitted.load(SeqCst).saturating_sub(rest)
    }

    /// Reserves a thread slot if the pool is below `max_threads`.
    fn reserve_thread(&self) -> bool {
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
    fn release_slot(&self) {
        self.pool_size.fetch_sub(1, SeqCst);
        self.notify_exit();
    }

    /// Wakes `shutdown` waiters after `pool_size` (or, on the reject path,
    /// `submitted`) went down.
    fn notify_exit(&self) {
        // Take the lock so a `shutdown` that just checked `busy()` and is
        // about to wait cannot miss this notification.
        let _guard = self.exit_lock.lock();
        self.exited.notify_all();
    }

    /// Starts a worker in a slot already taken with [`reserve_thread`]. On
    /// failure the slot is released and `first` is handed back.
    ///
    /// (An associated function rather than a `self: &Arc<Self>` method
    /// because under loom `Arc` is loom's, which cannot be a receiver.)
    ///
    /// [`reserve_thread`]: Shared::reserve_thread
    fn spawn_worker(
        this: &Arc<Self>,
        first: Option<Task>,
    ) -> Result<(), (Option<Task>, io::Error)> {
        let id = this.next_id.fetch_add(1, Relaxed);
        // `thread::Builder::spawn` drops the closure if the OS refuses the
        // thread; park the first task in a slot so it can be recovered.
        // (Only on the grow path, which is dominated by thread creation.)
        let slot = first.map(|task| Arc::new(Mutex::new(Some(task))));
        let thread_slot = slot.clone();
        let shared = Arc::clone(this);
        let spawned = thread::Builder::new()
            .name(format!("{}-{}", this.name, id))
            .spawn(move || {
                let first = thread_slot.and_then(|slot| slot.lock().take());
                worker_loop(&shared, first);
            });
        match spawned {
            Ok(handle) => {
                let mut handles = this.handles.lock();
                handles.retain(|h| !h.is_finished());
                handles.push(handle);
                Ok(())
            }
            Err(e) => {
                this.release_slot();
                Err((slot.and_then(|slot| slot.lock().take()), e))
            }
        }
    }

    /// Runs `task` on this worker; returns the calls it ran (more than one
    /// for a run, [`WorkerPool::submit_run`]).
    fn run(&self, seat: &Seat, task: Task) -> usize {
        streak::next_task();
        #[cfg(brisk_loom)]
        let _ = seat; // seats stay out of the models (see `worker_loop`)
        #[cfg(not(brisk_loom))]
        if seat.start_task(self.pulse.tick.load(Relaxed)) {
            // Wake-ups stay deferred while this task runs: if it blocks,
            // the monitor sends them.
            self.monitor.nudge();
        }
        self.pulse.active.fetch_add(1, SeqCst);
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| task.run())) {
            tracing::error!(
                pool = %self.name,
                panic = panic_message(payload.as_ref()),
                "worker pool task panicked"
            );
        }
        self.pulse.active.fetch_sub(1, SeqCst);
        #[cfg(not(brisk_loom))]
        seat.end_task();
        self.completed.fetch_add(1, Relaxed);
        self.submitted.fetch_sub(1, SeqCst);
        1 + run_calls::take()
    }

    /// Called after an idle thread above core timed out. Returns `true` if the
    /// thread has given up its slot and must exit.
    fn try_retire(&self) -> bool {
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

    fn begin_shutdown(&self) {
        if !self.shutdown.swap(true, SeqCst) {
            self.queue.close();
            self.monitor.stop();
        }
    }
}

fn worker_loop(shared: &Shared, first: Option<Task>) {
    tracing::debug!(pool = %shared.name, "worker thread started");
    let seat = Arc::new(Seat::new(shared.id()));
    // Under loom nothing defers a wake-up (`wake_soon` wakes at once) and no
    // monitor thread looks at seats, so they stay out of the models: each
    // lock would only multiply the interleavings loom explores. The seat's
    // own hand-off has a model of its own.
    #[cfg(not(brisk_loom))]
    {
        shared.seats.lock().push(seat.clone());
        seat::sit(&seat);
    }
    let retired = {
        // Left before the thread gives up its slot: a pool whose threads
        // are all gone holds nothing of the runtime in them.
        let _runtime = shared.runtime.as_ref().map(|runtime| runtime.enter());
        work(shared, &seat, first)
    };
    #[cfg(not(brisk_loom))]
    {
        // A source asked for and never looked at goes back to its owner.
        seat::release_poll();
        seat.flush();
        seat::stand();
        shared.seats.lock().retain(|s| !Arc::ptr_eq(s, &seat));
    }
    if retired {
        tracing::debug!(pool = %shared.name, "idle worker thread retired");
        shared.notify_exit(); // `try_retire` gave up the slot
    } else {
        tracing::debug!(pool = %shared.name, "worker thread stopped");
        shared.release_slot();
    }
}

/// A worker's tasks until it retires (`true`, its slot already given up) or
/// the pool has drained at shutdown (`false`).
fn work(shared: &Shared, seat: &Seat, first: Option<Task>) -> bool {
    // Calls run since this worker last found the queue empty (a lone
    // caller's pattern is one, `rhythm.rs`).
    let mut run = 0usize;
    let mut rhythm = Rhythm::default();
    if let Some(task) = first {
        run = shared.run(seat, task);
    }
    loop {
        if shared.shutdown.load(SeqCst) {
            // Draining: run whatever is queued, exit once no accepted task is
            // outside a worker (queued, or still inside `submit`).
            if let Some(taken) = shared.queue.poll(Some(Duration::ZERO)) {
                #[cfg(not(brisk_loom))]
                seat::release_poll();
                shared.run(seat, taken.task);
                continue;
            }
            #[cfg(not(brisk_loom))]
            seat.flush();
            let submitted = shared.submitted.load(SeqCst);
            let active = shared.pulse.active.load(SeqCst);
            if submitted <= active {
                return false;
            }
            // Only transient states get here (a task between `submitted += 1`
            // and the queue, or between dequeue and `active += 1`).
            thread::yield_now();
            continue;
        }
        let timed = shared.pool_size.load(SeqCst) > shared.core;
        let timeout = timed.then_some(shared.keep_alive);
        // The next task without waiting; only when there is none do the
        // wake-ups deferred by the tasks just run go out, before waiting.
        let next = match shared.queue.poll(Some(Duration::ZERO)) {
            Some(taken) => {
                // A connection's read side lent for a wait that is not
                // coming: it goes back before a task that may block.
                #[cfg(not(brisk_loom))]
                seat::release_poll();
                Some(taken)
            }
            None => {
                #[cfg(not(brisk_loom))]
                seat.flush();
                streak::broken();
                rhythm.wait(shared, std::mem::take(&mut run), timeout)
            }
        };
        match next {
            Some(taken) => {
                if taken.watch {
                    shared.monitor.nudge();
                }
                run += shared.run(seat, taken.task);
            }
            None => {
                if timed && shared.try_retire() {
                    return true;
                }
            }
        }
    }
}

/// A bounded pool of OS threads with Tomcat's grow-before-queue policy.
///
/// `WorkerPool` is `Send + Sync`; [`submit`](Self::submit) and
/// [`stats`](Self::stats) take `&self`, so share one pool by wrapping it in an
/// `Arc` (it is deliberately not `Clone`: dropping the handle shuts the pool
/// down). Dropping it stops new submissions and lets the threads drain the
/// queue and exit in the background without blocking the dropping thread; call
/// [`shutdown`](Self::shutdown) to wait for that.
///
/// # Example
///
/// ```
/// use rpc_server::pool::{PoolConfig, QueueKind, WorkerPool};
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// let pool = WorkerPool::new(PoolConfig {
///     core_threads: 2,
///     max_threads: 8,
///     queue_size: 1_000,
///     queue: QueueKind::Transfer,
///     ..PoolConfig::default()
/// })?;
///
/// let (tx, rx) = mpsc::channel();
/// if let Err(rejected) = pool.submit(Box::new(move || {
///     tx.send(6 * 7).ok();
/// })) {
///     // Saturated: a server would answer "server busy" here.
///     drop(rejected.into_task());
/// }
/// assert_eq!(rx.recv_timeout(Duration::from_secs(5))?, 42);
///
/// assert!(pool.shutdown(Duration::from_secs(5)));
/// assert!(pool.submit(Box::new(|| {})).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct WorkerPool {
    shared: Arc<Shared>,
    config: PoolConfig,
}

impl WorkerPool {
    /// Validates `config` and starts `core_threads` threads.
    pub fn new(config: PoolConfig) -> Result<WorkerPool, PoolError> {
        WorkerPool::start(config, None)
    }

    /// [`new`](Self::new), its threads inside `runtime` for their whole
    /// life: what a server's pool runs are its calls, whose handlers may
    /// use the runtime.
    pub(crate) fn in_runtime(
        config: PoolConfig,
        runtime: tokio::runtime::Handle,
    ) -> Result<WorkerPool, PoolError> {
        WorkerPool::start(config, Some(runtime))
    }

    fn start(
        config: PoolConfig,
        runtime: Option<tokio::runtime::Handle>,
    ) -> Result<WorkerPool, PoolError> {
        config.validate().map_err(PoolError::InvalidConfig)?;
        let pulse = Arc::new(Pulse::default());
        let (queue, submit_limit): (Box<dyn TaskQueue>, usize) = match config.queue {
            QueueKind::Blocking => (Box::new(BlockingQueue::new(config.queue_size)), usize::MAX),
            QueueKind::Transfer => (
                Box::new(TransferQueue::new(pulse.clone())),
                config.queue_size.saturating_add(config.max_threads),
            ),
        };
        let shared = Arc::new(Shared {
            queue,
            core: config.core_threads,
            max: config.max_threads,
            keep_alive: config.keep_alive,
            submit_limit,
            admit_limit: config.queue_size.saturating_add(config.max_threads),
            waiting: AtomicUsize::new(0),
            rhythm: AtomicBool::new(false),
            name: config.name.clone(),
            runtime,
            submitted: Padded::default(),
            run_rest: Padded::default(),
            grown_at: AtomicU64::new(0),
            pulse,
            completed: Padded::default(),
            pool_size: Padded::default(),
            largest: AtomicUsize::new(0),
            rejected: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            next_id: AtomicUsize::new(1),
            handles: Mutex::new(Vec::with_capacity(config.max_threads.min(1024))),
            seats: Mutex::new(Vec::with_capacity(config.max_threads.min(1024))),
            monitor: Monitor::new(),
            monitor_thread: Mutex::new(None),
            exit_lock: Mutex::new(()),
            exited: Condvar::new(),
        });
        let pool = WorkerPool { shared, config };
        for _ in 0..pool.config.core_threads {
            // Cannot fail: core_threads <= max_threads and nothing else runs yet.
            if !pool.shared.reserve_thread() {
                break;
            }
            if let Err((_, e)) = Shared::spawn_worker(&pool.shared, None) {
                // `pool` is dropped here, which stops the threads already started.
                return Err(PoolError::Spawn(e));
            }
        }
        #[cfg(not(brisk_loom))]
        {
            let shared = Arc::clone(&pool.shared);
            let monitor = thread::Builder::new()
                .name(format!("{}-monitor", pool.config.name))
                .spawn(move || monitor::run(&shared))
                .map_err(PoolError::Spawn)?;
            *pool.shared.monitor_thread.lock() = Some(monitor);
        }
        Ok(pool)
    }

    /// Hands `task` to the pool without ever blocking.
    ///
    /// Applies the grow-before-queue rule described in the [module
    /// docs](self). Returns the task in `Err(Rejected)` if the bound is
    /// reached (queue full with all `max_threads` busy, or, for
    /// [`QueueKind::Transfer`], `queue_size + max_threads` tasks unfinished) or
    /// the pool is shut down.
    pub fn submit(&self, task: Task) -> Result<(), Rejected> {
        self.submit_with(task, true)
    }

    /// [`submit`](Self::submit) for one of a batch: the queue may leave
    /// waking a worker for it to [`wake_idle`](Self::wake_idle), called once
    /// after the batch.
    pub fn submit_quietly(&self, task: Task) -> Result<(), Rejected> {
        self.submit_with(task, false)
    }

    /// [`submit_quietly`](Self::submit_quietly) for every task of a
    /// batch, in order, counted and queued together: one count of the
    /// unfinished tasks and one take of the queue's lock for the batch,
    /// not one each — per call, those were the queue's lock and a
    /// counter the workers write too, both bounced between cores. Accepted
    /// tasks are a prefix of the batch, as submits one after another would
    /// accept them; the rest stay in `tasks`, in order, counted as
    /// rejections, for the caller to answer and drop. Returns how many
    /// were accepted.
    ///
    /// A batch goes in whole only when no task of it would start a thread
    /// (the pool is at `max_threads`, or has a thread for every unfinished
    /// task with the batch counted — its size read after the batch counts,
    /// as a submit reads it, so a worker retiring meanwhile either sees the
    /// batch or is seen gone) and the queue is one the pool bounds
    /// ([`QueueKind::Transfer`]). Otherwise its tasks are placed one by
    /// one, which grows the pool as each submit would; a blocking queue
    /// (which bounds itself) takes them as submits, until the first refused.
    pub(crate) fn submit_batch(&self, tasks: &mut Vec<Task>) -> usize {
        let s = &self.shared;
        let n = tasks.len();
        if n == 0 || !s.queue.takes_batches() {
            return self.submit_one_by_one(tasks);
        }
        // Read before the batch counts (see `Shared::needing_threads`).
        let rest = s.run_rest.load(SeqCst);
        let (accepted, before) = self.admit_batch(n);
        if accepted < n {
            s.rejected.fetch_add((n - accepted) as u64, Relaxed);
        }
        let pool = s.pool_size.load(SeqCst);
        if pool < s.max && (before + accepted).saturating_sub(rest) > pool {
            return self.place_one_by_one(tasks, accepted, before, rest);
        }
        if accepted > 0 {
            s.queue.offer_batch(tasks.drain(..accepted));
        }
        accepted
    }

    /// Counts `n` new tasks in `submitted`, but only as many as the bounds
    /// admit (none once the pool is shut down): the first ones, as `n`
    /// submits one after another would. Returns how many, and the
    /// unfinished tasks before them.
    fn admit_batch(&self, n: usize) -> (usize, usize) {
        let s = &self.shared;
        if s.shutdown.load(SeqCst) {
            return (0, 0);
        }
        let in_flight = s.submitted.fetch_add(n, SeqCst) + n;
        let over = in_flight.saturating_sub(s.unfinished_limit()).min(n);
        if over > 0 {
            s.uncount(over);
        }
        (n - over, in_flight - n)
    }

    /// Places the first `accepted` of `tasks`, counted already after
    /// `before` unfinished ones, one by one as their submits would (a thread
    /// started for those that need one), in order. Should one find no
    /// thread at all to take it (starting one failed), it and the counted
    /// ones after it are withdrawn, refused, and go back to the front of
    /// `tasks`. Returns how many were placed.
    fn place_one_by_one(
        &self,
        tasks: &mut Vec<Task>,
        accepted: usize,
        before: usize,
        rest: usize,
    ) -> usize {
        let s = &self.shared;
        let mut placed = 0;
        let mut refused = Vec::new();
        for (i, task) in tasks.drain(..accepted).enumerate() {
            if !refused.is_empty() {
                refused.push(s.withdraw(task).0);
                continue;
            }
            let needing = (before + i + 1).saturating_sub(rest);
            match self.place(task, needing, false, true) {
                Ok(()) => placed += 1,
                Err(task) => refused.push(s.withdraw(task).0),
            }
        }
        if !refused.is_empty() {
            tasks.splice(0..0, refused);
        }
        placed
    }

    /// [`submit_batch`](Self::submit_batch)'s way for a batch that may grow
    /// the pool, or a queue that bounds itself: each task submitted quietly
    /// in turn, until one is refused; it and those after it stay.
    fn submit_one_by_one(&self, tasks: &mut Vec<Task>) -> usize {
        // Taken from the back, so reversed first (no allocation).
        tasks.reverse();
        let mut accepted = 0;
        while let Some(task) = tasks.pop() {
            match self.submit_quietly(task) {
                Ok(()) => accepted += 1,
                Err(Rejected(task)) => {
                    tasks.push(task);
                    break;
                }
            }
        }
        tasks.reverse();
        // The first refused counted itself; those after it were not tried.
        let untried = tasks.len().saturating_sub(1);
        if untried > 0 {
            self.shared.rejected.fetch_add(untried as u64, Relaxed);
        }
        accepted
    }

    /// Whether tasks submitted quietly wait for a parked worker: the next
    /// [`wake_idle`](Self::wake_idle) would wake one (a futex wake-up and
    /// a context switch), not find one awake or on its way.
    pub(crate) fn needs_wake(&self) -> bool {
        self.shared.queue.needs_wake()
    }

    /// Wakes a worker for tasks submitted quietly, unless one is awake.
    pub fn wake_idle(&self) {
        if self.shared.queue.wake_idle() {
            self.shared.monitor.nudge();
        }
    }

    /// Hands the pool the next step of work it accepted before: a task
    /// that waited (a handler's future woken again, see [`Parked`]), not
    /// new work. Past the bound, which admits new work only, and ahead of
    /// the queued tasks (it is further along than any of them); grows
    /// before queueing as [`submit`](Self::submit) does. Returns the task,
    /// not counted as a rejection, only when the pool is shut down.
    pub(crate) fn resume(&self, task: Task) -> Result<(), Rejected> {
        self.submit_within(task, true, false)
    }

    /// Counts a call whose handler waits off the workers until the
    /// returned [`Parked`] is dropped: new submissions are refused while
    /// unfinished tasks and waiting calls together exceed `queue_size +
    /// max_threads`, as they were when each waiting call held a worker.
    pub(crate) fn park(&self) -> Parked {
        self.shared.waiting.fetch_add(1, Relaxed);
        Parked(Arc::clone(&self.shared))
    }

    /// Submits `task`, which runs `calls` calls one after another on one
    /// worker (a run of requests a worker read itself), as one task of
    /// the queue counted as `calls` against the bound: refused over it as
    /// that many submits would be. The growth rule counts it as one task
    /// (one thread runs it: `Shared::run_rest`), and it wakes no worker (the
    /// caller wakes the pool, [`wake_idle`](Self::wake_idle), or is an
    /// awake worker). While it runs, the task tells the pool of each call
    /// it starts ([`step`](Self::step)) and what it has not started yet
    /// ([`hold_rest`](Self::hold_rest)), so the monitor moves the rest to
    /// the queue if the run goes on past the previous tick, one call
    /// blocking or all of them long (see `seat.rs`), and as each call after
    /// the first starts it counts the one before done
    /// ([`discount`](Self::discount)).
    ///
    /// Refused, the task comes back counted nowhere, not even as a
    /// rejection: its caller submits the calls one by one instead, and
    /// those count.
    pub(crate) fn submit_run(&self, task: Task, calls: usize) -> Result<(), Rejected> {
        let calls = calls.max(1);
        let s = &self.shared;
        // Read before this run counts (see `Shared::needing_threads`).
        let rest = s.run_rest.load(SeqCst);
        let (in_flight, task) = self.admit_many(task, calls).map_err(Rejected)?;
        // Before it can start: its worker may discount the rest at once.
        s.run_rest.fetch_add(calls - 1, SeqCst);
        let needing = in_flight.saturating_sub(rest + calls - 1);
        self.place(task, needing, false, true).map_err(|task| {
            s.run_rest.fetch_sub(calls - 1, SeqCst);
            s.uncount(calls);
            Rejected(task)
        })
    }

    /// Counts `calls` more calls of the running run
    /// ([`submit_run`](Self::submit_run)) done: calls it ran beyond its
    /// first, which the task's own end counts. Never the calls the monitor
    /// took from its rest: those are tasks of their own and count
    /// themselves.
    pub(crate) fn discount(&self, calls: usize) {
        if calls > 0 {
            let rest = self.shared.run_rest.fetch_sub(calls, SeqCst);
            debug_assert!(rest >= calls, "a run discounted more calls than it held");
            self.shared.completed.fetch_add(calls as u64, Relaxed);
            self.shared.submitted.fetch_sub(calls, SeqCst);
            run_calls::add(calls);
        }
    }

    /// Shows the monitor what the running task's run has not started yet
    /// (`None` when the run ends), on the calling worker's seat, and makes
    /// sure the monitor is awake to watch it. Off a worker of this pool
    /// (and under loom) nothing watches a run: its calls run one after
    /// another regardless.
    pub(crate) fn hold_rest(&self, rest: Option<std::sync::Arc<dyn Rest>>) {
        #[cfg(not(brisk_loom))]
        {
            let holds = rest.is_some();
            let tick = self.shared.pulse.tick.load(Relaxed);
            if seat::with_current_of(self.shared.id(), |seat| seat.hold(rest, tick)).is_some()
                && holds
            {
                self.shared.monitor.nudge();
            }
        }
        #[cfg(brisk_loom)]
        let _ = rest;
    }

    /// Marks the start of the next call of a run on the calling worker:
    /// the deferred wake-ups of its worker wait for a call that goes on past
    /// the previous tick, not for a run that does (`Seat::watch`), and the
    /// call starts where the one before it ended (`streak.rs`).
    pub(crate) fn step(&self) {
        // A call of the task before ended: where the next one starts.
        streak::next_task();
        #[cfg(not(brisk_loom))]
        {
            let tick = self.shared.pulse.tick.load(Relaxed);
            seat::with_current_of(self.shared.id(), |seat| seat.step(tick));
        }
    }

    fn submit_with(&self, task: Task, wake: bool) -> Result<(), Rejected> {
        self.submit_within(task, wake, true)
    }

    /// `submit_with`, `bounded` (new work: refused over the limits) or not
    /// (a [`resume`](Self::resume)).
    /// Counts `calls` (at least 1) new calls, for one task, in
    /// `submitted`, unless the pool is shut down or over its limits;
    /// returns the tasks now unfinished, or the task back, un-counted (and
    /// not counted as a rejection: the caller says whether it is one).
    fn admit_many(&self, task: Task, calls: usize) -> Result<(usize, Task), Task> {
        let s = &self.shared;
        // Cheap early-out; the re-check below is the one that matters.
        if s.shutdown.load(SeqCst) {
            return Err(task);
        }
        let in_flight = s.submitted.fetch_add(calls, SeqCst) + calls;
        if in_flight > s.unfinished_limit() {
            s.uncount(calls);
            return Err(task);
        }
        Ok((in_flight, task))
    }

    fn submit_within(&self, task: Task, wake: bool, bounded: bool) -> Result<(), Rejected> {
        let s = &self.shared;
        // Read before this task counts (see `Shared::needing_threads`).
        let rest = s.run_rest.load(SeqCst);
        let (in_flight, task) = if bounded {
            self.admit_many(task, 1).map_err(|task| s.reject(task))?
        } else {
            // Cheap early-out; the re-check below is the one that matters.
            if s.shutdown.load(SeqCst) {
                return Err(Rejected(task));
            }
            let in_flight = s.submitted.fetch_add(1, SeqCst) + 1;
            if s.shutdown.load(SeqCst) {
                return Err(s.withdraw_resumed(task));
            }
            (in_flight, task)
        };
        self.place(task, in_flight.saturating_sub(rest), wake, bounded)
            .map_err(|task| s.withdraw(task))
    }

    /// Places an admitted `task`, `needing` unfinished tasks wanting a
    /// thread each, its own counted (see `Shared::needing_threads`): on a
    /// new thread if the growth rule says so, else in the queue (past its
    /// bound unless `bounded`). Gives the task back, still counted, when
    /// neither took it: the queue full and the pool at `max_threads`, or no
    /// thread left to take it.
    fn place(&self, mut task: Task, needing: usize, wake: bool, bounded: bool) -> Result<(), Task> {
        let s = &self.shared;
        let pool = s.pool_size.load(SeqCst);
        // Rules 1 and 2 enqueue; rule 3 grows (falling back to the queue if a
        // concurrent submitter took the last slot first: rule 4). A run's
        // calls after its first need no thread of their own.
        if pool < s.max && needing > pool && s.reserve_thread() {
            match Shared::spawn_worker(s, Some(task)) {
                Ok(()) => return Ok(()),
                Err((returned, e)) => {
                    tracing::warn!(pool = %s.name, error = %e, "could not start worker thread");
                    // The slot always returns the task when spawning failed.
                    let Some(returned) = returned else {
                        return Ok(());
                    };
                    if s.pool_size.load(SeqCst) == 0 {
                        // Nobody would ever take it from the queue.
                        return Err(returned);
                    }
                    task = returned;
                }
            }
        }

        let offered = if bounded {
            s.queue.offer(task, wake)
        } else {
            Ok(s.queue.offer_past_bound(task))
        };
        match offered {
            Ok(watch) => {
                if watch {
                    s.monitor.nudge();
                }
                Ok(())
            }
            Err(task) => {
                // Queue full (blocking queue only). Last chance, as in
                // `ThreadPoolExecutor`: grow if below max.
                let task = if s.reserve_thread() {
                    match Shared::spawn_worker(s, Some(task)) {
                        Ok(()) => return Ok(()),
                        Err((Some(task), _)) => task,
                        Err((None, _)) => return Ok(()),
                    }
                } else {
                    task
                };
                Err(task)
            }
        }
    }

    /// Boxes `f` and [`submit`](Self::submit)s it.
    pub fn execute<F>(&self, f: F) -> Result<(), Rejected>
    where
        F: FnOnce() + Send + 'static,
    {
        self.submit(Box::new(f))
    }

    /// A snapshot of the pool counters (atomic loads only, no locks).
    pub fn stats(&self) -> PoolStats {
        let s = &self.shared;
        PoolStats {
            pool_size: s.pool_size.load(Relaxed),
            active: s.pulse.active.load(Relaxed),
            queued: s.queue.len(),
            submitted: s.submitted.load(Relaxed),
            waiting: s.waiting.load(Relaxed),
            completed: s.completed.load(Relaxed),
            rejected: s.rejected.load(Relaxed),
            largest_pool_size: s.largest.load(Relaxed),
        }
    }

    /// Tasks submitted and not finished yet (queued and running).
    #[inline]
    pub fn tasks_in_flight(&self) -> usize {
        self.shared.submitted.load(Relaxed)
    }

    /// Whether a worker keeps a lone caller's rhythm: it waits awake for
    /// the next call after each, and then looks at a read side lent to it
    /// (`seat::IdlePoll`).
    #[inline]
    pub(crate) fn in_rhythm(&self) -> bool {
        self.shared.rhythm.load(Relaxed)
    }

    /// Whether a worker whose run ends with nothing queued waits awake for
    /// a while (the transfer queue): only then does it look at a read side
    /// lent to it (`seat::IdlePoll`).
    #[inline]
    pub(crate) fn spins(&self) -> bool {
        self.shared.queue.spins()
    }

    /// Hands `poll` to the worker that waits awake for the next task (a
    /// lone caller's rhythm), which looks at it until its wait ends;
    /// `false` when no worker waits so.
    pub(crate) fn lend_spinner(&self, poll: std::sync::Arc<dyn IdlePoll>) -> bool {
        self.shared.queue.lend_spinner(poll).is_ok()
    }

    /// The configuration the pool was built with.
    pub fn config(&self) -> &PoolConfig {
        &self.config
    }

    /// Whether [`shutdown`](Self::shutdown) has been called (or the pool
    /// dropped).
    pub fn is_shutdown(&self) -> bool {
        self.shared.shutdown.load(SeqCst)
    }

    /// Stops accepting tasks, lets the threads finish everything already
    /// accepted (running, queued, or accepted by a `submit` still racing this
    /// call), and waits up to `timeout` for all of it to finish and all
    /// threads to exit. Returns `true` if they all did (threads are then
    /// joined);
    /// `false` on timeout, in which case they keep draining in the background
    /// and `shutdown` may be called again.
    ///
    /// Calling this from inside a pool task cannot succeed (the calling thread
    /// is still live) and returns `false` after `timeout`.
    pub fn shutdown(&self, timeout: Duration) -> bool {
        let s = &self.shared;
        s.begin_shutdown();
        let deadline = Instant::now().checked_add(timeout);
        let me = thread::current().id();
        loop {
            {
                let mut guard = s.exit_lock.lock();
                while s.busy() {
                    match deadline {
                        None => s.exited.wait(&mut guard),
                        Some(deadline) => {
                            if s.exited.wait_until(&mut guard, deadline).timed_out() {
                                if s.busy() {
                                    return false;
                                }
                                break;
                            }
                        }
                    }
                }
            }
            // The pool was at rest when we looked: every accepted task had
            // finished and every thread had given up its slot, so joining
            // only waits for the last few instructions of each. One thing can
            // still move: a thread that was retiring when shutdown began may
            // take its slot back because it saw a task in flight a moment ago
            // (`try_retire`). It is a live thread with a handle here; it sees
            // the flag, drains and exits, so join it rather than re-check
            // `busy()` — the re-check made `shutdown` return `false`, as if
            // timed out, even with no time limit (found by the loom models).
            // Loop in case a submitter that was accepted just before shutdown
            // started one more thread.
            let handles = std::mem::take(&mut *s.handles.lock());
            if handles.is_empty() {
                if !s.busy() {
                    // The monitor saw the flag (`begin_shutdown` woke it).
                    let monitor = s.monitor_thread.lock().take();
                    if let Some(monitor) = monitor {
                        if monitor.join().is_err() {
                            tracing::error!(pool = %s.name, "pool monitor panicked");
                        }
                    }
                    return true;
                }
                continue; // a slot was taken back after we looked: wait again
            }
            for handle in handles {
                if handle.thread().id() == me {
                    continue;
                }
                if handle.join().is_err() {
                    tracing::error!(pool = %s.name, "worker thread panicked outside a task");
                }
            }
        }
    }
}

impl Drop for WorkerPool {
    /// Stops new submissions; threads drain the queue and exit on their own.
    /// Never blocks.
    fn drop(&mut self) {
        self.shared.begin_shutdown();
    }
}

impl fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerPool")
            .field("config", &self.config)
            .field("stats", &self.stats())
            .field("shutdown", &self.is_shutdown())
            .finish()
    }
}

#[cfg(all(test, not(brisk_loom)))]
mod tests;

#[cfg(all(test, brisk_loom))]
mod loom_tests;
