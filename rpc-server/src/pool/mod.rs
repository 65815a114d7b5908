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
//! monitor thread (`monitor/`) looks every millisecond while there is work
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
//!   seats' locks, with `asleep` set first (see `monitor/`).
//!
//! # Structure
//!
//! - `job.rs`: what the pool runs ([`Job`], [`Task`]) and a run's rest.
//! - `submit.rs`: how work enters — every submit, and the growth rule.
//! - `queue.rs`: the queue trait; `transfer.rs` and `blocking.rs` the kinds.
//! - `shared.rs`: the counters and slots the handle, workers and monitor
//!   share; `worker.rs`: a worker thread's loop.
//! - `seat.rs`: a worker as the monitor sees it, its deferred wake-ups and
//!   lent polls; `monitor/`: the tick that rescues stalled queues (its
//!   handle, `bell.rs`, is what the shared state holds);
//!   `rhythm.rs`: a lone caller's awake wait; `streak.rs`: the clock of
//!   calls run back to back.
//! - `config.rs`, `stats.rs`: the knobs and the counters' snapshot;
//!   `sync.rs`: std or loom primitives; `tests.rs`, `loom_tests.rs`.
//!
//! # Model checking
//!
//! These claims are checked with [loom](https://docs.rs/loom), as tokio
//! checks its own primitives: `sync.rs` lets the pool's own files (this
//! module, `submit.rs`, `shared.rs`, `worker.rs`, `monitor/`, `blocking.rs`
//! and `transfer.rs`) run on loom's primitives under
//! `RUSTFLAGS="--cfg brisk_loom"`, and `loom_tests.rs` explores every
//! interleaving of small models (exactly-once, the bound, wake-ups, a quiet
//! batch, the monitor's rescue, deferred wake-ups, retiring, submit racing
//! shutdown, a run racing shutdown) up to a preemption bound. Run them with
//! `.ci/loom`. They found the two `shutdown` races now fixed there: it could
//! return `true` before an accepted task had run, and `false` with no time
//! limit.

mod blocking;
mod config;
mod job;
mod monitor;
mod queue;
mod rhythm;
mod seat;
mod shared;
mod stats;
pub(crate) mod streak;
mod submit;
mod sync;
mod transfer;
mod worker;

pub use config::{PoolConfig, PoolError, QueueKind, Rejected};
pub(crate) use job::Rest;
pub use job::{Job, Task};
pub(crate) use queue::{Rescue, Taken, TaskQueue};
pub(crate) use rhythm::yield_while;
pub(crate) use seat::{poll_soon, wake_soon, IdlePoll};
pub(crate) use shared::{Parked, Pulse};
pub use stats::PoolStats;

use blocking::BlockingQueue;
use monitor::bell::Monitor;
use shared::{Padded, Shared};
use std::fmt;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};
use sync::thread;
use sync::{Arc, Condvar, Mutex};
use sync::{AtomicBool, AtomicU64, AtomicUsize};
use transfer::TransferQueue;

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
