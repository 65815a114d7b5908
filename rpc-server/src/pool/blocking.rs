//! [`BlockingQueue`]: the `QueueKind::Blocking` task queue, modelled on Java's
//! `LinkedBlockingQueue`.
//!
//! It is the plain, obviously-correct choice: one `parking_lot::Mutex` around a
//! `VecDeque` plus a `Condvar` that parked workers wait on. The bound is the
//! number of *queued* tasks (`queue_size`), exactly like a capacity-limited
//! `LinkedBlockingQueue`; running tasks do not count against it.
//!
//! Every offer and poll takes the one lock, so under heavy contention it scales
//! worse than the lock-free [`TransferQueue`](super::transfer::TransferQueue);
//! it is kept because it is simple, fair (strict FIFO for new work), and
//! gives an exact bound on queued new work, which some deployments prefer.

use super::sync::{AtomicUsize, Condvar, Mutex};
use super::{Rescue, Taken, Task, TaskQueue};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A bounded FIFO of tasks guarded by a mutex, with a condvar for parked
/// workers.
pub(crate) struct BlockingQueue {
    state: Mutex<State>,
    not_empty: Condvar,
    capacity: usize,
    /// Mirror of `state.tasks.len()`, written under the lock, so that
    /// [`TaskQueue::len`] (used by pool statistics) never takes the lock.
    len: AtomicUsize,
}

struct State {
    tasks: VecDeque<Task>,
    /// Set by [`TaskQueue::close`]; once set, polls stop waiting as soon as the
    /// queue is empty. Checked under the lock, so a close can never be missed
    /// by a worker that is just about to park.
    closed: bool,
}

impl BlockingQueue {
    /// A queue that holds at most `capacity` waiting tasks.
    pub(crate) fn new(capacity: usize) -> Self {
        BlockingQueue {
            state: Mutex::new(State {
                tasks: VecDeque::new(),
                closed: false,
            }),
            not_empty: Condvar::new(),
            capacity,
            len: AtomicUsize::new(0),
        }
    }

    /// After a task was queued under the lock `state` holds: the length
    /// mirrored, a worker woken.
    fn queued(&self, state: impl std::ops::Deref<Target = State>) {
        self.len.store(state.tasks.len(), Ordering::Relaxed);
        drop(state);
        // The task is visible under the lock before we notify, and waiters
        // re-check the deque under the same lock, so no wake-up is lost.
        self.not_empty.notify_one();
    }

    fn pop(&self, state: &mut State) -> Option<Task> {
        let task = state.tasks.pop_front()?;
        self.len.store(state.tasks.len(), Ordering::Relaxed);
        Some(task)
    }
}

impl TaskQueue for BlockingQueue {
    /// Every offer wakes a parked worker (`LinkedBlockingQueue`'s
    /// semantics), so `wake` changes nothing here and nothing needs rescue.
    fn offer(&self, task: Task, _wake: bool) -> Result<bool, Task> {
        let mut state = self.state.lock();
        if state.tasks.len() >= self.capacity {
            return Err(task);
        }
        state.tasks.push_back(task);
        self.queued(state);
        Ok(false)
    }

    /// At the front: the next step of a call already under way.
    fn offer_past_bound(&self, task: Task) -> bool {
        let mut state = self.state.lock();
        state.tasks.push_front(task);
        self.queued(state);
        false
    }

    fn wake_idle(&self) -> bool {
        false
    }

    fn rescue(&self, _now: u64) -> Rescue {
        Rescue::Empty
    }

    fn is_empty_locked(&self) -> bool {
        self.state.lock().tasks.is_empty()
    }

    fn poll(&self, timeout: Option<Duration>) -> Option<Taken> {
        let mut state = self.state.lock();
        if let Some(task) = self.pop(&mut state) {
            return Some(task.into());
        }
        // `None` deadline = wait without a time limit (also used when the
        // timeout is too large to represent as an `Instant`).
        let deadline = match timeout {
            Some(t) if t.is_zero() => return None,
            Some(t) => Instant::now().checked_add(t),
            None => None,
        };
        loop {
            if state.closed {
                return None;
            }
            match deadline {
                None => self.not_empty.wait(&mut state),
                Some(deadline) => {
                    if self.not_empty.wait_until(&mut state, deadline).timed_out() {
                        return self.pop(&mut state).map(Taken::from);
                    }
                }
            }
            if let Some(task) = self.pop(&mut state) {
                return Some(task.into());
            }
        }
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    fn close(&self) {
        self.state.lock().closed = true;
        self.not_empty.notify_all();
    }
}

#[cfg(all(test, not(brisk_loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::sync::Arc;

    #[test]
    fn fifo_and_bound() {
        let q = BlockingQueue::new(2);
        let (tx, rx) = mpsc::channel();
        for i in 0..2 {
            let tx = tx.clone();
            assert!(q
                .offer(
                    Box::new(move || {
                        tx.send(i).ok();
                    }),
                    true
                )
                .is_ok());
        }
        assert_eq!(q.len(), 2);
        assert!(q.offer(Box::new(|| {}), true).is_err());
        while let Some(t) = q.poll(Some(Duration::ZERO)) {
            t.task.run();
        }
        assert_eq!(q.len(), 0);
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![0, 1]);
    }

    #[test]
    fn poll_times_out_when_empty() {
        let q = BlockingQueue::new(1);
        assert!(q.poll(Some(Duration::from_millis(5))).is_none());
    }

    #[test]
    fn huge_timeout_means_no_limit() {
        let q = Arc::new(BlockingQueue::new(1));
        let (tx, rx) = mpsc::channel();
        let q2 = Arc::clone(&q);
        let h = std::thread::spawn(move || {
            tx.send(q2.poll(Some(Duration::MAX)).is_some()).ok();
        });
        q.close();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(false));
        h.join().unwrap();
    }

    #[test]
    fn close_wakes_parked_poller() {
        let q = Arc::new(BlockingQueue::new(1));
        let (tx, rx) = mpsc::channel();
        let q2 = Arc::clone(&q);
        let h = std::thread::spawn(move || {
            let got = q2.poll(None).is_some();
            tx.send(got).ok();
        });
        // Whether the poller has parked yet or not, close must release it.
        q.close();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(false));
        h.join().unwrap();
    }

    #[test]
    fn offer_wakes_parked_poller() {
        let q = Arc::new(BlockingQueue::new(1));
        let (tx, rx) = mpsc::channel();
        let q2 = Arc::clone(&q);
        let h = std::thread::spawn(move || {
            if let Some(t) = q2.poll(None) {
                t.task.run();
            }
        });
        assert!(q
            .offer(
                Box::new(move || {
                    tx.send(7).ok();
                }),
                true
            )
            .is_ok());
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(7));
        h.join().unwrap();
    }
}
