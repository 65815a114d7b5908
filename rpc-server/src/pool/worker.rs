//! A worker thread's life: started in a slot the pool reserved
//! ([`Shared::spawn_worker`]), it runs its first task, then takes tasks
//! from the queue back to back, waits awake for a lone caller's next call
//! (`rhythm.rs`), parks, and retires above `core_threads` once idle for
//! `keep_alive` — or drains the queue and stops at shutdown.
//!
//! The wake-ups a worker's tasks defer (`seat.rs`) go out only when it
//! finds the queue empty, so a run of tasks costs one of each.

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::Duration;

use super::rhythm::Rhythm;
#[cfg(not(brisk_loom))]
use super::seat;
use super::seat::Seat;
use super::shared::Shared;
use super::streak;
use super::sync::thread;
use super::sync::{Arc, Mutex};
use super::Task;
use crate::panic::panic_message;

/// The calls the running task counted done beyond itself
/// ([`WorkerPool::discount`](super::WorkerPool::discount)), for its worker's count of calls in a row.
pub(super) mod run_calls {
    #[cfg(not(brisk_loom))]
    std::thread_local! {
        static EXTRA: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// `calls` more done by the task running on this thread.
    pub(in crate::pool) fn add(calls: usize) {
        #[cfg(not(brisk_loom))]
        EXTRA.with(|extra| extra.set(extra.get() + calls));
        #[cfg(brisk_loom)]
        let _ = calls;
    }

    /// The calls added since the last look, taken (none under loom, whose
    /// threads share the OS thread's locals).
    pub(in crate::pool) fn take() -> usize {
        #[cfg(not(brisk_loom))]
        return EXTRA.with(std::cell::Cell::take);
        #[cfg(brisk_loom)]
        0
    }
}

impl Shared {
    /// Starts a worker in a slot already taken with [`reserve_thread`]. On
    /// failure the slot is released and `first` is handed back.
    ///
    /// (An associated function rather than a `self: &Arc<Self>` method
    /// because under loom `Arc` is loom's, which cannot be a receiver.)
    ///
    /// [`reserve_thread`]: Shared::reserve_thread
    pub(super) fn spawn_worker(
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
    /// for a run, [`WorkerPool::submit_run`](super::WorkerPool::submit_run)).
    pub(super) fn run(&self, seat: &Seat, task: Task) -> usize {
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
