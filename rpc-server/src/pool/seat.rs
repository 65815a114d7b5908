//! [`Seat`]: what one worker thread shares with the pool's monitor — when its
//! current task (or its current call of a run) started, the wake-ups its
//! tasks deferred, and the calls of a run it has not started — and
//! [`wake_soon`], how a task defers one; and [`poll_soon`], how a task asks
//! its worker to look at a source of work ([`IdlePoll`]) while it next
//! waits awake.
//!
//! # Why defer a wake-up
//!
//! A pooled call's answer wakes its connection task, which writes it. When
//! the worker goes straight on to the next call of the same read batch,
//! waking the connection for every answer makes it wake, write one answer and
//! park again, call after call: an `eventfd` write, a context switch and a
//! `write` each. Deferred, the wake-up goes out once the worker has no task
//! left (before it parks), once it holds [`MAX_DEFERRED`] of them, or — when
//! the worker is stuck in a long task — from the monitor within two ticks.
//! The connection then finds a whole run of answers at once and writes them
//! with one `write`.
//!
//! # Invariants
//!
//! - A deferred wake-up is sent exactly once: the list is drained under its
//!   lock, by the worker or by the monitor, whichever comes first.
//! - A worker that starts a task while it holds deferred wake-ups makes sure
//!   the monitor is awake ([`Seat::start_task`] says so), so a task that
//!   blocks cannot hold them for longer than two ticks.
//! - Off a worker thread (and under loom, whose threads share the OS
//!   thread's locals), [`wake_soon`] wakes at once.
//!
//! # A run of calls
//!
//! A worker that reads a run of a connection's requests itself (its read
//! side lent, `reply::pool_reads`) submits the run as one task that runs
//! its calls one after another (`WorkerPool::submit_run`), as a connection
//! task runs its batch in direct dispatch: no box, no queue and no worker
//! wrapper per call. A call of the run that blocks must not hold up the
//! calls behind it (the pool's guarantee), so while the run goes on its
//! seat holds the run's rest ([`Seat::hold`], through
//! `WorkerPool::hold_rest`) and the start of its current call
//! ([`Seat::step`]); the monitor takes the rest of a run that began before
//! the previous tick ([`Seat::strand`]) and queues it, call by call, as it
//! sends a stuck worker's deferred wake-ups. That covers a run stuck in one
//! call and a run of calls each shorter than a tick but long together
//! (tens of calls of half a millisecond): its rest would wait on one thread
//! while others idle, as a batch of such calls submitted one by one never
//! did. Each call is started by the run or taken by the monitor, never both
//! (`Rest::take_rest`).

use std::sync::atomic::Ordering::Relaxed;
use std::task::Waker;

use super::sync::{AtomicU64, AtomicUsize, Mutex};
use super::{Rest, Task};

/// `task_tick` of a worker between tasks.
const IDLE: u64 = u64::MAX;

/// Ticks a run keeps its calls to itself ([`Seat::strand`]): one that
/// began before the previous tick has run 1–2 ms, long beside a pipelining
/// caller's run of short calls (tens of calls of a microsecond or two).
const RUN_TICKS: u64 = 2;

/// Deferred wake-ups a worker holds before it sends them anyway: one per
/// connection whose answers it delivered (a connection task is woken once per
/// wait), so a worker serving many connections still wakes each soon.
const MAX_DEFERRED: usize = 8;

/// One worker thread, as the monitor sees it.
pub(crate) struct Seat {
    /// The monitor tick at which the current task started; [`IDLE`] between
    /// tasks.
    task_tick: AtomicU64,
    /// How many wake-ups `deferred` holds, written under its lock and read
    /// without it when a task starts (only this worker adds to it, so its
    /// own reads are never behind; the monitor only lowers it).
    held: AtomicUsize,
    /// Wake-ups deferred by this worker's tasks ([`wake_soon`]).
    deferred: Mutex<Vec<Waker>>,
    /// The pool this worker belongs to (the address of its shared state).
    #[cfg_attr(brisk_loom, allow(dead_code))] // seats stay out of the models
    pool: usize,
    /// The calls of the running task's run not started yet ([`hold_rest`](super::WorkerPool::hold_rest)),
    /// and the monitor tick at which the run showed them.
    rest: Mutex<Option<(std::sync::Arc<dyn Rest>, u64)>>,
}

impl Seat {
    /// The seat of a worker of the pool whose shared state lives at `pool`.
    pub(crate) fn new(pool: usize) -> Self {
        Seat {
            task_tick: AtomicU64::new(IDLE),
            held: AtomicUsize::new(0),
            deferred: Mutex::new(Vec::new()),
            pool,
            rest: Mutex::new(None),
        }
    }

    /// Marks the start of the next call of the running task's run, at
    /// monitor tick `tick`.
    #[cfg_attr(brisk_loom, allow(dead_code))]
    pub(crate) fn step(&self, tick: u64) {
        self.task_tick.store(tick, Relaxed);
    }

    /// The monitor's look at tick `now` (`None`: at shutdown, a run in
    /// progress counts as long): the calls a run that began before the
    /// previous tick has not started, taken — it is stuck in one call, or
    /// its calls are long enough that the rest is better spread over the
    /// workers (see the module docs).
    #[cfg_attr(brisk_loom, allow(dead_code))]
    pub(crate) fn strand(&self, now: Option<u64>) -> Vec<Task> {
        let held = self.rest.lock().clone();
        let Some((rest, since)) = held else {
            return Vec::new();
        };
        if now.is_some_and(|now| since.saturating_add(RUN_TICKS) > now) {
            return Vec::new();
        }
        rest.take_rest()
    }

    /// Holds what the running task's run has not started yet, shown at
    /// monitor tick `tick` (`None` when the run ends), for the monitor.
    #[cfg_attr(brisk_loom, allow(dead_code))]
    pub(crate) fn hold(&self, rest: Option<std::sync::Arc<dyn Rest>>, tick: u64) {
        *self.rest.lock() = rest.map(|rest| (rest, tick));
    }

    /// Whether the running task holds a run's rest.
    #[cfg_attr(brisk_loom, allow(dead_code))]
    pub(crate) fn holds_rest(&self) -> bool {
        self.rest.lock().is_some()
    }

    /// Marks the start of a task at monitor tick `tick`, sending the deferred
    /// wake-ups first if there are many. Returns whether some stay deferred
    /// (the monitor must then be awake to watch them).
    #[cfg_attr(all(brisk_loom, not(test)), allow(dead_code))]
    pub(crate) fn start_task(&self, tick: u64) -> bool {
        // No lock on the way into a task: the count says whether to look.
        let mut held = self.held.load(Relaxed);
        if held >= MAX_DEFERRED {
            self.flush();
            held = 0;
        }
        self.task_tick.store(tick, Relaxed);
        held > 0
    }

    /// Marks the end of a task.
    #[cfg_attr(all(brisk_loom, not(test)), allow(dead_code))]
    pub(crate) fn end_task(&self) {
        self.task_tick.store(IDLE, Relaxed);
    }

    /// Sends every deferred wake-up.
    #[cfg_attr(all(brisk_loom, not(test)), allow(dead_code))]
    pub(crate) fn flush(&self) {
        let mut deferred = self.deferred.lock();
        if !deferred.is_empty() {
            wake_all(&mut deferred, &self.held);
        }
    }

    /// The monitor's look at tick `now`: a worker whose current task started
    /// before the previous tick is stuck in it, so the wake-ups it deferred go
    /// out now. Returns whether it held any.
    #[cfg_attr(brisk_loom, allow(dead_code))]
    pub(crate) fn watch(&self, now: u64) -> bool {
        let started = self.task_tick.load(Relaxed);
        let mut deferred = self.deferred.lock();
        if deferred.is_empty() {
            return false;
        }
        if started != IDLE && started.saturating_add(2) <= now {
            wake_all(&mut deferred, &self.held);
        }
        true
    }

    /// Holds `waker` until the worker's run of tasks ends.
    #[cfg_attr(brisk_loom, allow(dead_code))]
    pub(crate) fn defer(&self, waker: Waker) {
        let mut deferred = self.deferred.lock();
        deferred.push(waker);
        self.held.store(deferred.len(), Relaxed);
    }

    /// Whether it holds deferred wake-ups or a run's rest (each read
    /// under its lock).
    #[cfg_attr(brisk_loom, allow(dead_code))]
    pub(crate) fn has_work(&self) -> bool {
        !self.deferred.lock().is_empty() || self.holds_rest()
    }
}

/// Sends every wake-up in `deferred` (its lock held) and counts it empty.
fn wake_all(deferred: &mut Vec<Waker>, held: &AtomicUsize) {
    deferred.drain(..).for_each(Waker::wake);
    held.store(0, Relaxed);
}

#[cfg(not(brisk_loom))]
std::thread_local! {
    /// The seat of the worker thread this is, if it is one.
    static CURRENT: std::cell::RefCell<Option<std::sync::Arc<Seat>>> =
        const { std::cell::RefCell::new(None) };
}

/// Seats the calling worker thread: [`wake_soon`] on it defers to `seat`.
#[cfg(not(brisk_loom))]
pub(crate) fn sit(seat: &std::sync::Arc<Seat>) {
    CURRENT.with(|current| *current.borrow_mut() = Some(seat.clone()));
}

/// `f` on the calling thread's seat, if it is a worker of the pool whose
/// shared state lives at `pool`.
#[cfg(not(brisk_loom))]
pub(crate) fn with_current_of<R>(pool: usize, f: impl FnOnce(&Seat) -> R) -> Option<R> {
    CURRENT
        .try_with(|current| {
            current
                .borrow()
                .as_deref()
                .filter(|seat| seat.pool == pool)
                .map(f)
        })
        .ok()
        .flatten()
}

/// Unseats the calling thread (a worker that exits).
#[cfg(not(brisk_loom))]
pub(crate) fn stand() {
    let _ = CURRENT.try_with(|current| current.borrow_mut().take());
}

/// Wakes `waker` once the calling worker thread is done with its run of
/// tasks (see the module docs), or at once off a worker thread.
pub(crate) fn wake_soon(waker: Waker) {
    #[cfg(not(brisk_loom))]
    {
        let mut waker = Some(waker);
        let _ = CURRENT.try_with(|current| {
            if let Some(seat) = &*current.borrow() {
                if let Some(waker) = waker.take() {
                    seat.defer(waker);
                }
            }
        });
        if let Some(waker) = waker {
            waker.wake();
        }
    }
    #[cfg(brisk_loom)]
    waker.wake();
}

/// Work a worker may look for itself while it waits awake for its next
/// task: a connection whose last answer it just wrote lends it its socket's
/// read side, and the worker reads the caller's next request instead of the
/// connection's task (see `reply::pool_answers`, "The read side lent").
pub(crate) trait IdlePoll: Send + Sync {
    /// One look. `false`: stop looking (work was submitted, or the
    /// source is gone or taken back); it is then not
    /// [`release`](Self::release)d.
    fn poll(self: std::sync::Arc<Self>) -> bool;
    /// The worker will not look (again): the source goes back to its owner.
    fn release(self: std::sync::Arc<Self>);
}

#[cfg(not(brisk_loom))]
std::thread_local! {
    /// What the calling worker looks at when it next waits awake.
    static NEXT_POLL: std::cell::RefCell<Option<std::sync::Arc<dyn IdlePoll>>> =
        const { std::cell::RefCell::new(None) };
}

/// Asks the calling worker thread to [`IdlePoll::poll`] `poll` while it next
/// waits awake for a task (`Rhythm`), or to release it if it does not. Off
/// a worker thread (and under loom) it is released at once; one that was
/// asked for before is released.
pub(crate) fn poll_soon(poll: std::sync::Arc<dyn IdlePoll>) {
    #[cfg(not(brisk_loom))]
    {
        let seated = CURRENT
            .try_with(|current| current.borrow().is_some())
            .unwrap_or(false);
        let mut poll = Some(poll);
        let mut before = None;
        if seated {
            let _ = NEXT_POLL.try_with(|next| before = next.replace(poll.take()));
        }
        for left in [before, poll].into_iter().flatten() {
            left.release();
        }
    }
    #[cfg(brisk_loom)]
    poll.release();
}

/// What the calling worker was asked to poll, taken.
#[cfg(not(brisk_loom))]
pub(crate) fn take_poll() -> Option<std::sync::Arc<dyn IdlePoll>> {
    NEXT_POLL
        .try_with(|next| next.borrow_mut().take())
        .ok()
        .flatten()
}

/// Releases what the calling worker was asked to poll: it is about to run a
/// task instead (which may block: a lent source must not wait for it).
#[cfg(not(brisk_loom))]
pub(crate) fn release_poll() {
    if let Some(poll) = take_poll() {
        poll.release();
    }
}

#[cfg(all(test, not(brisk_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        (count, waker)
    }

    #[test]
    fn off_a_worker_a_wake_goes_out_at_once() {
        let (count, waker) = counter();
        wake_soon(waker);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn on_a_worker_it_waits_for_the_flush_and_goes_out_once() {
        let seat = Arc::new(Seat::new(0));
        let (count, waker) = counter();
        sit(&seat);
        wake_soon(waker);
        stand();
        assert_eq!(count.0.load(Ordering::SeqCst), 0, "deferred");
        assert!(seat.has_work());
        seat.flush();
        seat.flush();
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "sent exactly once");
    }

    #[test]
    fn the_monitor_sends_what_a_stuck_task_holds() {
        let seat = Arc::new(Seat::new(0));
        let (count, waker) = counter();
        sit(&seat);
        wake_soon(waker);
        stand();
        assert!(seat.start_task(10), "the monitor must watch");
        assert!(seat.watch(11), "held");
        assert_eq!(count.0.load(Ordering::SeqCst), 0, "not a full tick yet");
        assert!(seat.watch(12));
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "stuck for a tick");
        assert!(!seat.watch(13), "nothing held any more");
        seat.end_task();
    }

    #[test]
    fn many_deferred_wakes_go_out_before_the_next_task() {
        let seat = Arc::new(Seat::new(0));
        let (count, _) = counter();
        sit(&seat);
        for _ in 0..MAX_DEFERRED {
            wake_soon(Waker::from(count.clone()));
        }
        stand();
        assert!(!seat.start_task(0), "sent, none held");
        assert_eq!(count.0.load(Ordering::SeqCst), MAX_DEFERRED);
        seat.end_task();
    }
}
