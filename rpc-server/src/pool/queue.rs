//! [`TaskQueue`]: the queue between submitters and workers, which the two
//! queue kinds (`blocking.rs`, `transfer.rs`) implement, and what a worker
//! or the monitor gets back from it ([`Taken`], [`Rescue`]).
//!
//! The pool's rules (grow before queueing, the bound of the transfer queue)
//! live in the pool; a queue only holds tasks, parks and wakes workers, and
//! tells the pool when queued tasks wait behind a worker that may block.

use std::time::Duration;

use super::{IdlePoll, Task};

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
    /// work the pool accepted before (see [`WorkerPool::resume`](super::WorkerPool::resume)).
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
    /// (see `IDLE_SPIN` in `rhythm.rs`). `None` when none came (or the queue does not
    /// spin: the blocking queue wakes a worker per offer anyway). `yields`
    /// is asked at every turn whether the turn gives the core away (see
    /// [`yield_while`](super::yield_while)); it may look for work of its own meanwhile and
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
    #[cfg(all(test, not(brisk_loom)))]
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
