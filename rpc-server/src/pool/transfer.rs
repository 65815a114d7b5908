//! [`TransferQueue`]: the `QueueKind::Transfer` task queue, modelled on Java's
//! `LinkedTransferQueue` as Motan uses it for its server executor: an offered
//! task goes to a parked worker if there is one, and the queue decides *which*
//! worker and *how many* are woken.
//!
//! # Why not a lock-free channel
//!
//! A channel that wakes a parked worker on every offer (oldest first) makes
//! wake-ups the cost: at 100 calls in flight the pool grows to its maximum
//! (Tomcat's rule, 8 × CPUs) and one read batch of 40 requests wakes 16
//! threads on 2 cores — context switches and the waker's mutex dominate, not
//! the queue (the measurements are in BENCHMARKS.md).
//!
//! This queue is a `VecDeque` under one mutex, with two rules for wake-ups:
//!
//! * **One worker on its way at a time.** An offer wakes a parked worker only
//!   if none is already woken and not yet running (`waking == 0`). A worker
//!   that takes a task and sees more queued passes the wake-up on to the next.
//!   A burst of offers thus wakes workers one after another, as fast as the
//!   queue needs them — a worker that finishes its task quickly takes the next
//!   one itself and nobody else is woken — while tasks never wait behind a busy
//!   worker when another is parked: the chain always reaches it.
//! * **Most recently parked first (LIFO).** The worker woken is the one that
//!   parked last, whose cache is warm; workers parked long stay parked and
//!   retire after `keep_alive`.
//!
//! Every decision is taken under the one lock, so the invariant "tasks queued
//! and workers parked ⇒ a worker is on its way" holds after every critical
//! section: no wake-up is lost. `close` wakes every parked worker; tasks
//! offered after `close` (accepted before shutdown became visible) are still
//! handed out.
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
//! loom models check this very code: the hand-off, the wake-up chain and the
//! timed waits of retiring workers.

use super::sync::{Arc, AtomicUsize, Condvar, Mutex};
use super::{Task, TaskQueue};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// An unbounded hand-off queue (bounded by the pool's submitted counter, not
/// here) that wakes the most recently parked worker, and only one at a time.
pub(crate) struct TransferQueue {
    state: Mutex<State>,
    /// Tasks queued, readable without the lock (stats).
    len: AtomicUsize,
}

struct State {
    tasks: VecDeque<Task>,
    /// Parked workers, most recently parked last (woken first).
    parked: Vec<Arc<Condvar>>,
    /// Workers woken by an offer that have not taken the lock back yet.
    waking: usize,
    closed: bool,
}

impl State {
    /// Wakes the most recently parked worker, if any.
    fn wake_one(&mut self) {
        if let Some(worker) = self.parked.pop() {
            self.waking += 1;
            worker.notify_one();
        }
    }
}

impl TransferQueue {
    pub(crate) fn new() -> Self {
        TransferQueue {
            state: Mutex::new(State {
                tasks: VecDeque::new(),
                parked: Vec::new(),
                waking: 0,
                closed: false,
            }),
            len: AtomicUsize::new(0),
        }
    }
}

impl TaskQueue for TransferQueue {
    fn offer(&self, task: Task) -> Result<(), Task> {
        let mut st = self.state.lock();
        st.tasks.push_back(task);
        self.len.store(st.tasks.len(), Ordering::Relaxed);
        // One worker on its way is enough: when it takes a task and more are
        // queued, it wakes the next (see `poll`). A burst of offers therefore
        // wakes workers one after another as the queue needs them, instead of
        // every parked thread at once.
        if st.waking == 0 {
            st.wake_one();
        }
        Ok(())
    }

    fn poll(&self, timeout: Option<Duration>) -> Option<Task> {
        // A timeout too large to express as an `Instant` means "no limit".
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut st = self.state.lock();
        let mut me: Option<Arc<Condvar>> = None;
        loop {
            if let Some(task) = st.tasks.pop_front() {
                self.len.store(st.tasks.len(), Ordering::Relaxed);
                // More work and nobody on the way for it: pass the wake-up on.
                if !st.tasks.is_empty() && st.waking == 0 {
                    st.wake_one();
                }
                return Some(task);
            }
            if st.closed || timeout.is_some_and(|t| t.is_zero()) {
                return None;
            }
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
            // Not listed: an offer or `close` popped us and counted us in
            // `waking`.
            match st.parked.iter().position(|p| Arc::ptr_eq(p, &cv)) {
                Some(i) => {
                    st.parked.remove(i);
                }
                None => st.waking -= 1,
            }
            if timed_out && st.tasks.is_empty() {
                return None;
            }
        }
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
        let q = TransferQueue::new();
        let (tx, rx) = mpsc::channel();
        for i in 0..3 {
            let tx = tx.clone();
            assert!(q
                .offer(Box::new(move || {
                    tx.send(i).ok();
                }))
                .is_ok());
        }
        assert_eq!(q.len(), 3);
        while let Some(t) = q.poll(Some(Duration::ZERO)) {
            t();
        }
        assert_eq!(q.len(), 0);
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![0, 1, 2]);
    }

    #[test]
    fn poll_times_out_when_empty() {
        let q = TransferQueue::new();
        assert!(q.poll(Some(Duration::from_millis(5))).is_none());
    }

    #[test]
    fn huge_timeout_means_no_limit() {
        let q = Arc::new(TransferQueue::new());
        let (tx, rx) = mpsc::channel();
        let q2 = Arc::clone(&q);
        let h = std::thread::spawn(move || {
            tx.send(q2.poll(Some(Duration::MAX)).is_some()).ok();
        });
        assert!(q.offer(Box::new(|| {})).is_ok());
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(true));
        h.join().unwrap();
    }

    #[test]
    fn close_wakes_parked_pollers() {
        let q = Arc::new(TransferQueue::new());
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
        assert!(q.offer(Box::new(|| {})).is_ok());
        assert!(q.poll(None).is_some());
        assert!(q.poll(None).is_none());
    }
}
