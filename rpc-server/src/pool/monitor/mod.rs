//! The pool's monitor: one thread that, every [`TICK`] while the pool has
//! work, rescues a queue stalled behind blocked workers and sends the
//! wake-ups a stuck worker deferred — Go's `sysmon`, for a thread pool.
//!
//! # Why a monitor
//!
//! The transfer queue wakes a worker only when none is awake, and workers
//! defer the wake-ups of their answers until their run of tasks ends
//! (`transfer.rs`, `seat.rs`): on two cores that is what keeps a pooled call
//! from costing a context switch of its own. Both rest on the awake worker
//! coming back soon. A handler that blocks breaks that, and no code on the
//! call path can tell in advance; a clock can tell afterwards. So every tick
//! the monitor
//!
//! - wakes one more parked worker when the oldest queued task has waited a
//!   full tick (`TaskQueue::rescue`), or starts one when none is parked
//!   and the pool may grow, and
//! - sends the deferred wake-ups of a worker whose current task started
//!   before the previous tick (`Seat::watch`), and queues the calls a run
//!   that began so has not started (`Seat::strand`: it is stuck in one
//!   call, or its calls are long together), growing the pool for them as
//!   a submit would.
//!
//! A blocking handler thus holds up the calls queued behind it, and answers
//! its worker finished earlier, for one to two ticks (1–2 ms), not for as
//! long as it blocks.
//!
//! # Cost
//!
//! While the pool has work the monitor wakes once per tick (a thousand times
//! a second, against hundreds of thousands of calls). After [`QUIET_TICKS`]
//! ticks with nothing queued and nothing deferred it sleeps until it is
//! nudged: by a submit that left its task to a worker inside a task, with
//! none woken for it, or by a worker that starts a task holding deferred
//! wake-ups. A call that finds a parked worker woken for it never nudges, so
//! with one call at a time the monitor sleeps.
//!
//! # Sleeping without missing work
//!
//! The monitor sets `asleep` and then looks for work under the queue's and
//! the seats' locks; a submitter publishes its task under the queue's lock and
//! then reads `asleep`, and notifies under the monitor's lock, which the
//! monitor holds from before it sets `asleep` until it waits. Either the
//! monitor sees the task or the submitter sees it asleep, and then its
//! notification cannot fall between the look and the wait.
//!
//! Under loom the thread is not started (loom has no clock); the models call
//! [`Shared::watch`](super::Shared) themselves where a tick may pass.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::Duration;

// The handle, reached by its own path (`monitor::bell::Monitor`): the
// shared state holds it, and the loop here reads the shared state.
pub(in crate::pool) mod bell;

use super::shared::Shared;
use super::sync::Arc;
use super::{Rescue, Task};

/// How often the monitor looks while the pool has work.
#[cfg_attr(brisk_loom, allow(dead_code))]
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// Ticks with nothing to watch before the monitor sleeps.
#[cfg_attr(brisk_loom, allow(dead_code))]
const QUIET_TICKS: u32 = 10;

impl Shared {
    /// One tick of the monitor (see the module docs). Returns whether there
    /// was anything to watch: tasks queued, wake-ups deferred or a run's
    /// rest held.
    #[cfg_attr(all(brisk_loom, not(test)), allow(dead_code))]
    pub(crate) fn watch(this: &Arc<Self>) -> bool {
        let now = this.pulse.tick.fetch_add(1, Relaxed) + 1;
        let rescue = this.queue.rescue(now);
        // A thread started for a stalled queue is neither parked nor on its
        // way until it polls: the next start waits a tick longer.
        if rescue == Rescue::Stalled && this.grown_at.load(Relaxed).saturating_add(2) <= now {
            this.grown_at.store(now, Relaxed);
            Shared::grow_for_queue(this);
        }
        let mut busy = rescue != Rescue::Empty;
        let mut stranded = Vec::new();
        for seat in this.seats.lock().iter() {
            busy |= seat.watch(now) | seat.holds_rest();
            stranded.extend(seat.strand(Some(now)));
        }
        Shared::requeue(this, stranded);
        busy
    }

    /// Queues `stranded`, the calls a stuck run had not started (already
    /// counted in `submitted`), ahead of what is queued, growing the pool
    /// for them as a submit would (a thread started for one runs it first;
    /// the queued ones keep their order).
    fn requeue(this: &Arc<Self>, stranded: Vec<Task>) {
        if stranded.is_empty() {
            return;
        }
        // Tasks of their own now: each needs a thread.
        this.run_rest.fetch_sub(stranded.len(), SeqCst);
        for task in stranded.into_iter().rev() {
            let mut task = task;
            let pool = this.pool_size.load(SeqCst);
            if !this.shutdown.load(SeqCst)
                && pool < this.max
                && this.needing_threads() > pool
                && this.reserve_thread()
            {
                match Shared::spawn_worker(this, Some(task)) {
                    Ok(()) | Err((None, _)) => continue,
                    Err((Some(returned), e)) => {
                        tracing::warn!(pool = %this.name, error = %e, "could not start worker thread");
                        task = returned;
                    }
                }
            }
            this.queue.offer_past_bound(task);
        }
    }

    /// Starts a thread for the queue's oldest task, which has waited a full
    /// tick with no worker parked or on its way (see the module docs): a
    /// submit grows the pool before it queues, but counts read while a run
    /// changed them may say a thread was free. One thread every other tick
    /// at most, and not past `max_threads`.
    fn grow_for_queue(this: &Arc<Self>) {
        if this.shutdown.load(SeqCst) || !this.reserve_thread() {
            return;
        }
        if let Err((_, e)) = Shared::spawn_worker(this, None) {
            tracing::warn!(pool = %this.name, error = %e, "could not start worker thread");
        }
    }

    /// Whether anything may need the monitor: a task queued, a wake-up
    /// deferred or a run's rest held (each read under its own lock; see the
    /// module docs).
    #[cfg(not(brisk_loom))]
    fn has_work(&self) -> bool {
        !self.queue.is_empty_locked() || self.seats.lock().iter().any(|seat| seat.has_work())
    }

    /// At shutdown, every tick until the workers are gone: the rest of
    /// every run in progress goes to the draining queue, so a call stuck
    /// for good holds up nothing but itself.
    #[cfg(not(brisk_loom))]
    fn strand_all(this: &Arc<Self>) {
        let mut stranded = Vec::new();
        for seat in this.seats.lock().iter() {
            stranded.extend(seat.strand(None));
        }
        Shared::requeue(this, stranded);
    }
}

/// The monitor thread's loop, until the pool shuts down.
#[cfg(not(brisk_loom))]
pub(crate) fn run(shared: &Arc<Shared>) {
    let monitor = &shared.monitor;
    let mut quiet = 0;
    loop {
        {
            let mut guard = monitor.lock.lock();
            if shared.shutdown.load(SeqCst) {
                drop(guard);
                // Draining: what runs in progress have not started goes to
                // the queue, every tick until the last worker is gone (a
                // draining worker may take a run from the queue after this).
                Shared::strand_all(shared);
                if shared.pool_size.load(SeqCst) == 0 {
                    break;
                }
                std::thread::sleep(TICK);
                continue;
            }
            if quiet >= QUIET_TICKS {
                monitor.asleep.store(true, SeqCst);
                if !shared.has_work() && !shared.shutdown.load(SeqCst) {
                    monitor.wake.wait(&mut guard);
                }
                monitor.asleep.store(false, SeqCst);
                quiet = 0;
                continue;
            }
            let _ = monitor
                .wake
                .wait_until(&mut guard, std::time::Instant::now() + TICK);
        }
        if Shared::watch(shared) {
            quiet = 0;
        } else {
            quiet += 1;
        }
    }
}
