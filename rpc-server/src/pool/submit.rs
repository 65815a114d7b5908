//! How work enters the pool: [`WorkerPool`]'s submits — one task, a
//! quiet one of a batch, a batch together, a run of calls, a resumed
//! task — and the rule they all end in (`place`): grow before queueing,
//! refuse over the bound.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};

#[cfg(not(brisk_loom))]
use super::seat;
use super::shared::{Parked, Shared};
use super::sync::Arc;
use super::worker::run_calls;
use super::{streak, Rejected, Rest, Task, WorkerPool};

impl WorkerPool {
    /// Hands `task` to the pool without ever blocking.
    ///
    /// Applies the grow-before-queue rule described in the [module
    /// docs](super). Returns the task in `Err(Rejected)` if the bound is
    /// reached (queue full with all `max_threads` busy, or, for
    /// [`QueueKind::Transfer`](super::QueueKind::Transfer), `queue_size + max_threads` tasks unfinished) or
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
    /// ([`QueueKind::Transfer`](super::QueueKind::Transfer)). Otherwise its tasks are placed one by
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
}
