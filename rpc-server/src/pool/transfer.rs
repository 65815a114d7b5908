//! [`TransferQueue`]: the `QueueKind::Transfer` task queue, modelled on Java's
//! `LinkedTransferQueue` as Motan uses it for its server executor: an offered
//! task goes to a worker already awake if there is one, to a parked worker
//! otherwise, and the queue decides *which* worker and *when* one is woken.
//!
//! # Why wake-ups are lazy
//!
//! On a small machine the cost of a pool is its wake-ups, not its queue: a
//! context switch and a futex call per woken thread, against a microsecond
//! or two for a short handler. Waking a worker for every task (a channel),
//! or passing the wake-up on to the next parked worker whenever more tasks
//! are queued (this queue's earlier rule), put up to 16 threads in turn on 2
//! cores for one read batch, ~0.7 context switches per call (BENCHMARKS.md).
//! So:
//!
//! * **An offer wakes a worker only when none is awake**: no worker inside a
//!   task (the pool's `active` count) and none woken and on its way
//!   (`waking`) or spinning. A worker that is running a task takes the next one itself
//!   when it is done, without a wake-up. The connection task offers a read
//!   batch's calls *quietly*, all at once under one lock
//!   ([`TaskQueue::offer_batch`]), and wakes once after
//!   ([`TaskQueue::wake_idle`]), so a batch costs one wake-up and one take
//!   of the lock, not one per call.
//! * **A stalled queue is rescued by the monitor.** A worker that is awake
//!   may be blocked in its handler; then nobody takes the tasks behind it.
//!   Each task is stamped with the monitor's tick when offered, and every
//!   tick the monitor ([`TaskQueue::rescue`], see `monitor/`) wakes one more
//!   worker while the oldest queued task has waited a full tick. It is nudged
//!   awake only when an offer (or `wake_idle`) left tasks to a worker inside a
//!   task, with none woken for them — with one call at a time it sleeps. A blocking
//!   handler therefore delays the calls queued behind it by one to two ticks
//!   (1–2 ms) and stalls nothing beyond that; a run of blocking handlers wakes
//!   one more worker per tick, up to every parked one.
//! * **A lone task's worker waits awake for the next.** With one call at a time
//!   there is no batch to share a wake-up, so the worker that ran the pool's
//!   only task waits awake for up to `IDLE_SPIN` ([`TaskQueue::spin`]),
//!   yielding the core at every turn;
//!   an offer meanwhile sees it on its way and wakes nobody. One worker
//!   spins at a time.
//! * **Most recently parked first (LIFO).** The worker woken is the one that
//!   parked last, whose cache is warm; workers parked long stay parked and
//!   retire after `keep_alive`.
//!
//! Every decision is taken under the one lock, and a worker leaves `active`
//! before it takes that lock to look for its next task, so an offer that sees
//! a worker active is always followed by that worker looking at the queue: no
//! task is left with no worker on its way except behind a worker that is
//! blocked, which is what the monitor is for. `close` wakes every parked
//! worker; tasks offered after `close` (accepted before shutdown became
//! visible) are still handed out.
//!
//! Why it is *unbounded* here and bounded elsewhere: Motan bounds the
//! *executor* rather than the transfer queue: it keeps a count of
//! submitted-but-unfinished tasks and rejects once it would exceed
//! `queue_size + max_threads`. The pool already maintains that counter for the
//! Tomcat grow-before-queue rule, so the bound costs nothing extra; see
//! `WorkerPool::submit` in the parent module.
//!
//! # Under loom
//!
//! The queue is written against `pool::sync`, like the blocking queue, so the
//! loom models check this very code: the hand-off, the lazy wake-ups, the
//! monitor's rescue and the timed waits of retiring workers.

use super::sync::{Arc, AtomicBool, AtomicUsize, Condvar, Mutex};
use super::{Pulse, Rescue, Taken, Task, TaskQueue};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// An unbounded hand-off queue (bounded by the pool's submitted counter, not
/// here) that wakes a worker only when none is awake, the most recently
/// parked first.
pub(crate) struct TransferQueue {
    state: Mutex<State>,
    /// The pool's `active` count and the monitor's tick.
    pulse: Arc<Pulse>,
    /// Tasks queued, readable without the lock (stats).
    len: AtomicUsize,
    /// `State::lent` may hold something: read at every turn of a spin
    /// without the lock.
    lent_hint: AtomicBool,
}

struct State {
    /// Tasks, each with the monitor tick at which it was offered.
    tasks: VecDeque<(Task, u64)>,
    /// Parked workers, most recently parked last (woken first).
    parked: Vec<Arc<Condvar>>,
    /// Workers woken by an offer that have not taken the lock back yet.
    waking: usize,
    /// A worker waits for the next task awake ([`TaskQueue::spin`]): it is
    /// on its way like a woken one, and no second worker spins beside it.
    spinning: bool,
    /// A source of work lent to the spinning worker (a connection's read
    /// side, `seat::IdlePoll`), not picked up yet; released when the spin
    /// ends without it.
    lent: Option<std::sync::Arc<dyn super::IdlePoll>>,
    closed: bool,
}

impl State {
    /// Whether a worker is on its way to the queue without a task — woken
    /// by an offer, or spinning — and will take the oldest one.
    fn on_its_way(&self) -> bool {
        self.waking > 0 || self.spinning
    }

    /// Wakes the most recently parked worker, if any.
    fn wake_one(&mut self) {
        if let Some(worker) = self.parked.pop() {
            self.waking += 1;
            worker.notify_one();
        }
    }
}

impl TransferQueue {
    pub(crate) fn new(pulse: Arc<Pulse>) -> Self {
        TransferQueue {
            state: Mutex::new(State {
                tasks: VecDeque::new(),
                parked: Vec::new(),
                waking: 0,
                spinning: false,
                lent: None,
                closed: false,
            }),
            pulse,
            len: AtomicUsize::new(0),
            lent_hint: AtomicBool::new(false),
        }
    }

    /// Wakes a parked worker if tasks are queued and no worker is awake to
    /// take them (see the module docs). Returns whether the queued tasks now
    /// wait for a worker that is inside a task (which may block), with none
    /// on its way: the monitor must watch them.
    fn wake_if_idle(&self, st: &mut State) -> bool {
        if st.tasks.is_empty() || st.on_its_way() {
            return false;
        }
        if self.pulse.active.load(Ordering::SeqCst) == 0 {
            st.wake_one();
        }
        st.waking == 0
    }

    /// The oldest task, for a worker that is about to run it. `waited`: the
    /// worker parked or spun for it, so offers meanwhile may have counted on
    /// it and woken nobody; then [`Taken::watch`] says whether what it
    /// leaves queued needs the monitor. A worker that finds a task without
    /// waiting was counted by nobody: an offer that found it inside a task
    /// asked for the monitor itself.
    fn take(&self, st: &mut State, waited: bool) -> Option<Taken> {
        let (task, _) = st.tasks.pop_front()?;
        self.len.store(st.tasks.len(), Ordering::Relaxed);
        let watch = waited && !st.tasks.is_empty() && !st.on_its_way();
        Some(Taken { task, watch })
    }
}

impl TaskQueue for TransferQueue {
    fn offer(&self, task: Task, wake: bool) -> Result<bool, Task> {
        let tick = self.pulse.tick.load(Ordering::Relaxed);
        let mut st = self.state.lock();
        st.tasks.push_back((task, tick));
        self.len.store(st.tasks.len(), Ordering::Relaxed);
        Ok(wake && self.wake_if_idle(&mut st))
    }

    fn takes_batches(&self) -> bool {
        true
    }

    fn offer_batch(&self, tasks: std::vec::Drain<'_, Task>) {
        let tick = self.pulse.tick.load(Ordering::Relaxed);
        let mut st = self.state.lock();
        st.tasks.extend(tasks.map(|task| (task, tick)));
        self.len.store(st.tasks.len(), Ordering::Relaxed);
    }

    /// At the front: the next step of a call already under way. It takes
    /// the tick of the task it goes ahead of, so that the monitor, which
    /// looks at the front, still sees how long the queue has waited. (The
    /// transfer queue has no bound of its own: the pool counts.)
    fn offer_past_bound(&self, task: Task) -> bool {
        let mut st = self.state.lock();
        let tick = match st.tasks.front() {
            Some((_, oldest)) => *oldest,
            None => self.pulse.tick.load(Ordering::Relaxed),
        };
        st.tasks.push_front((task, tick));
        self.len.store(st.tasks.len(), Ordering::Relaxed);
        self.wake_if_idle(&mut st)
    }

    fn wake_idle(&self) -> bool {
        let mut st = self.state.lock();
        self.wake_if_idle(&mut st)
    }

    fn needs_wake(&self) -> bool {
        // A worker inside a task takes the queue next: no lock then.
        if self.pulse.active.load(Ordering::SeqCst) > 0 || self.len.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let st = self.state.lock();
        !st.tasks.is_empty() && !st.on_its_way() && !st.parked.is_empty()
    }

    fn rescue(&self, now: u64) -> Rescue {
        let mut st = self.state.lock();
        let Some(&(_, offered)) = st.tasks.front() else {
            return Rescue::Empty;
        };
        // Offered before the previous tick: it has waited a full tick.
        if offered.saturating_add(2) <= now && !st.on_its_way() {
            if st.parked.is_empty() {
                return Rescue::Stalled;
            }
            st.wake_one();
        }
        Rescue::Queued
    }

    fn is_empty_locked(&self) -> bool {
        self.state.lock().tasks.is_empty()
    }

    fn poll(&self, timeout: Option<Duration>) -> Option<Taken> {
        let mut st = self.state.lock();
        if let Some(taken) = self.take(&mut st, false) {
            return Some(taken);
        }
        if st.closed || timeout.is_some_and(|t| t.is_zero()) {
            return None;
        }
        // Read the clock only to wait: most polls find a task, or must not
        // wait. A timeout too large to express as an `Instant` means "no
        // limit".
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut me: Option<Arc<Condvar>> = None;
        loop {
            let cv = me.get_or_insert_with(|| Arc::new(Condvar::new())).clone();
            st.parked.push(cv.clone());
            let timed_out = match deadline {
                Some(deadline) => cv.wait_until(&mut st, deadline).timed_out(),
                None => {
                    cv.wait(&mut st);
                    false
                }
            };
            // Still listed: nobody woke us (time-out or spurious wake-up).
            // Not listed: an offer, the monitor or `close` popped us and
            // counted us in `waking`.
            match st.parked.iter().position(|p| Arc::ptr_eq(p, &cv)) {
                Some(i) => {
                    st.parked.remove(i);
                }
                None => st.waking -= 1,
            }
            if let Some(taken) = self.take(&mut st, true) {
                return Some(taken);
            }
            if timed_out || st.closed {
                return None;
            }
        }
    }

    fn spin(&self, limit: Duration, yields: &mut dyn FnMut() -> bool) -> Option<Taken> {
        {
            let mut st = self.state.lock();
            if let Some(taken) = self.take(&mut st, false) {
                return Some(taken);
            }
            if st.closed || st.spinning {
                return None;
            }
            st.spinning = true;
        }
        // An offer made now sees `spinning` and wakes nobody: this worker
        // takes its task after the loop, under the lock, whenever the loop
        // ends. `len` is only a hint to end it early.
        #[cfg(not(brisk_loom))]
        {
            let start = Instant::now();
            while self.len.load(Ordering::Relaxed) == 0 && start.elapsed() < limit {
                if yields() {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        #[cfg(brisk_loom)]
        {
            let _ = (limit, yields);
            super::sync::thread::yield_now();
        }
        let mut st = self.state.lock();
        st.spinning = false;
        let left = st.lent.take();
        self.lent_hint.store(false, Ordering::Relaxed);
        let taken = self.take(&mut st, true);
        drop(st);
        if let Some(left) = left {
            left.release();
        }
        taken
    }

    fn lend_spinner(
        &self,
        poll: std::sync::Arc<dyn super::IdlePoll>,
    ) -> Result<(), std::sync::Arc<dyn super::IdlePoll>> {
        let mut st = self.state.lock();
        if !st.spinning || st.closed || st.lent.is_some() {
            return Err(poll);
        }
        st.lent = Some(poll);
        self.lent_hint.store(true, Ordering::Relaxed);
        Ok(())
    }

    #[cfg(all(test, not(brisk_loom)))]
    fn parked(&self) -> usize {
        self.state.lock().parked.len()
    }

    fn spins(&self) -> bool {
        true
    }

    fn take_lent(&self) -> Option<std::sync::Arc<dyn super::IdlePoll>> {
        // Asked at every turn of a spin: the lock only when there is one.
        if !self.lent_hint.load(Ordering::Relaxed) {
            return None;
        }
        self.lent_hint.store(false, Ordering::Relaxed);
        self.state.lock().lent.take()
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        while !st.parked.is_empty() {
            st.wake_one();
        }
    }
}

#[cfg(all(test, not(brisk_loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::sync::Arc;

    #[test]
    fn fifo_and_len() {
        let q = TransferQueue::new(Arc::new(Pulse::default()));
        let (tx, rx) = mpsc::channel();
        for i in 0..3 {
            let tx = tx.clone();
            assert!(q
                .offer(
                    Box::new(move || {
                        tx.send(i).ok();
                    }),
                    true,
                )
                .is_ok());
        }
        assert_eq!(q.len(), 3);
        while let Some(t) = q.poll(Some(Duration::ZERO)) {
            t.task.run();
        }
        assert_eq!(q.len(), 0);
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![0, 1, 2]);
    }

    /// A fresh queue and a thread spinning on it for up to `limit`, once it
    /// spins.
    fn spinning(limit: Duration) -> (Arc<TransferQueue>, std::thread::JoinHandle<Option<Taken>>) {
        let q = Arc::new(TransferQueue::new(Arc::new(Pulse::default())));
        let q2 = Arc::clone(&q);
        let spinner = std::thread::spawn(move || q2.spin(limit, &mut || true));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !q.state.lock().spinning {
            assert!(Instant::now() < deadline, "the worker never spun");
            std::thread::yield_now();
        }
        (q, spinner)
    }

    #[test]
    fn an_offer_to_a_spinning_worker_wakes_nobody_and_it_takes_the_task() {
        let (q, spinner) = spinning(Duration::from_secs(10));
        // On its way: no wake-up, and no call for the monitor either.
        assert!(matches!(q.offer(Box::new(|| {}), true), Ok(false)));
        let taken = spinner.join().unwrap().expect("the spinner takes the task");
        assert!(!taken.watch, "nothing is left behind it");
        assert!(!q.state.lock().spinning);
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn a_spinning_worker_that_leaves_tasks_behind_says_so() {
        let (q, spinner) = spinning(Duration::from_secs(10));
        let (tx, rx) = mpsc::channel();
        {
            // Two offers before the spinner looks: both woke nobody.
            let mut st = q.state.lock();
            for i in 0..2 {
                let tx = tx.clone();
                st.tasks
                    .push_back((Box::new(move || tx.send(i).unwrap()), 0));
            }
            q.len.store(2, Ordering::Relaxed);
        }
        let first = spinner.join().unwrap().expect("the spinner takes a task");
        assert!(first.watch, "a task is left with nobody on its way to it");
        first.task.run();
        let second = q.poll(Some(Duration::ZERO)).expect("the second task");
        assert!(!second.watch);
        second.task.run();
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![0, 1]);
    }

    #[test]
    fn one_worker_spins_at_a_time_and_a_spin_ends_empty_handed() {
        let (q, spinner) = spinning(Duration::from_millis(200));
        assert!(
            q.spin(Duration::from_secs(10), &mut || true).is_none(),
            "a second spinner"
        );
        assert!(spinner.join().unwrap().is_none());
        assert!(!q.state.lock().spinning);
    }

    /// A thread parked in `q`'s `poll`, once it is.
    fn parked(q: &Arc<TransferQueue>) -> std::thread::JoinHandle<Option<Taken>> {
        let q2 = Arc::clone(q);
        let worker = std::thread::spawn(move || q2.poll(Some(Duration::from_secs(10))));
        let deadline = Instant::now() + Duration::from_secs(10);
        while q.state.lock().parked.is_empty() {
            assert!(Instant::now() < deadline, "the worker never parked");
            std::thread::yield_now();
        }
        worker
    }

    #[test]
    fn a_quiet_offer_needs_a_wake_only_while_every_worker_is_parked() {
        let pulse = Arc::new(Pulse::default());
        let q = Arc::new(TransferQueue::new(pulse.clone()));
        assert!(!q.needs_wake(), "nothing queued, nobody to wake");
        let worker = parked(&q);
        assert!(!q.needs_wake(), "a parked worker, nothing queued");
        assert!(matches!(q.offer(Box::new(|| {}), false), Ok(false)));
        assert!(q.needs_wake(), "queued quietly, the only worker parked");
        // A worker inside a task takes the queue next: no wake-up needed.
        pulse.active.store(1, Ordering::SeqCst);
        assert!(!q.needs_wake());
        pulse.active.store(0, Ordering::SeqCst);
        assert!(q.needs_wake());
        q.wake_idle();
        assert!(!q.needs_wake(), "the woken worker is on its way");
        let taken = worker.join().unwrap().expect("the woken worker takes it");
        taken.task.run();
        assert!(!q.needs_wake());
    }

    #[test]
    fn a_quiet_offer_to_a_spinning_worker_needs_no_wake() {
        let (q, spinner) = spinning(Duration::from_secs(10));
        assert!(matches!(q.offer(Box::new(|| {}), false), Ok(false)));
        // Spinning (nobody parked), or it took the task already.
        assert!(!q.needs_wake());
        assert!(spinner.join().unwrap().is_some());
    }

    #[test]
    fn poll_times_out_when_empty() {
        let q = TransferQueue::new(Arc::new(Pulse::default()));
        assert!(q.poll(Some(Duration::from_millis(5))).is_none());
    }

    #[test]
    fn huge_timeout_means_no_limit() {
        let q = Arc::new(TransferQueue::new(Arc::new(Pulse::default())));
        let (tx, rx) = mpsc::channel();
        let q2 = Arc::clone(&q);
        let h = std::thread::spawn(move || {
            tx.send(q2.poll(Some(Duration::MAX)).is_some()).ok();
        });
        assert!(q.offer(Box::new(|| {}), true).is_ok());
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(true));
        h.join().unwrap();
    }

    #[test]
    fn close_wakes_parked_pollers() {
        let q = Arc::new(TransferQueue::new(Arc::new(Pulse::default())));
        let (tx, rx) = mpsc::channel();
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let q = Arc::clone(&q);
                let tx = tx.clone();
                std::thread::spawn(move || {
                    // One timed, two untimed pollers: all must be released.
                    let timeout = (i == 0).then(|| Duration::from_secs(600));
                    let got = q.poll(timeout).is_some();
                    tx.send(got).ok();
                })
            })
            .collect();
        q.close();
        for _ in 0..3 {
            assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(false));
        }
        for h in handles {
            h.join().unwrap();
        }
        // Still usable after close: queued tasks are drained, never lost.
        assert!(q.offer(Box::new(|| {}), true).is_ok());
        assert!(q.poll(None).is_some());
        assert!(q.poll(None).is_none());
    }
}
