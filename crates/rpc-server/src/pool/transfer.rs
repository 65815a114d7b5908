//! [`TransferQueue`]: the `QueueKind::Transfer` task queue, modelled on Java's
//! `LinkedTransferQueue` as Motan uses it for its server executor.
//!
//! It is a lock-free `crossbeam_channel::unbounded` channel: `offer` never
//! blocks and never takes a lock, and a worker parked in `poll` is handed the
//! task directly by the channel's own wake-up machinery. That makes it the
//! cheaper queue under contention, and the default.
//!
//! Why it is *unbounded* here and bounded elsewhere: a lock-free linked queue
//! cannot cheaply enforce a capacity (that needs a shared counter checked on
//! every push — precisely the contention we want to avoid inside the queue).
//! Motan therefore bounds the *executor* instead: it keeps a count of
//! submitted-but-unfinished tasks and rejects once it would exceed
//! `queue_size + max_threads`. The pool already maintains that counter for the
//! Tomcat grow-before-queue rule, so the bound costs nothing extra; see
//! `WorkerPool::submit` in the parent module.
//!
//! Waking parked workers on shutdown: a crossbeam receiver only wakes on a
//! message or on disconnection, and the queue must keep its own `Sender` alive
//! for late (already accepted) submissions. So the queue owns a second,
//! message-less "close" channel; [`TaskQueue::close`] drops its only sender,
//! which disconnects it and wakes every worker that is parked in a `select!`
//! over both channels. The select is only used on the slow (parking) path; the
//! fast path is a single `try_recv`.
//!
//! # Under loom
//!
//! crossbeam-channel is not loom-aware: its lock-free list, its waker and its
//! timers run on real atomics and real parking that loom cannot see, so a
//! model that used it would explore nothing inside it and could deadlock for
//! real. Under `--cfg brisk_loom` this module therefore swaps in a stand-in with the
//! same contract — unbounded, FIFO, `offer` never fails, a non-blocking fast
//! path, a parked `poll` woken by an offer or by `close`, tasks offered after
//! `close` still delivered — built as the mutex-and-condvar
//! [`BlockingQueue`](super::blocking::BlockingQueue) with an unreachable
//! capacity, i.e. on the loom primitives of `pool::sync`.
//!
//! So what the loom models check for [`QueueKind::Transfer`](super::QueueKind)
//! is the *pool protocol* around this queue: that the pool's submitted counter
//! bounds it, and the retire and shutdown races against it. The lock-free
//! hand-off itself is not model-checked here; crossbeam-channel's internals
//! are trusted to crossbeam's own tests, and the real channel is exercised by
//! the ordinary unit and integration tests.

use super::{Task, TaskQueue};
#[cfg(not(brisk_loom))]
use crossbeam_channel::{select, Receiver, Sender};
#[cfg(not(brisk_loom))]
use parking_lot::Mutex;
use std::time::Duration;
#[cfg(not(brisk_loom))]
use std::time::Instant;

/// An unbounded lock-free hand-off queue (bounded by the pool's submitted
/// counter, not here).
#[cfg(not(brisk_loom))]
pub(crate) struct TransferQueue {
    tx: Sender<Task>,
    rx: Receiver<Task>,
    /// Dropped (set to `None`) by `close`; only touched at shutdown.
    close_tx: Mutex<Option<Sender<()>>>,
    close_rx: Receiver<()>,
}

#[cfg(not(brisk_loom))]
impl TransferQueue {
    pub(crate) fn new() -> Self {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (close_tx, close_rx) = crossbeam_channel::bounded(0);
        TransferQueue {
            tx,
            rx,
            close_tx: Mutex::new(Some(close_tx)),
            close_rx,
        }
    }
}

#[cfg(not(brisk_loom))]
impl TaskQueue for TransferQueue {
    fn offer(&self, task: Task) -> Result<(), Task> {
        // Cannot fail while `self.rx` is alive, but give the task back rather
        // than drop it if it somehow does.
        self.tx.send(task).map_err(|e| e.into_inner())
    }

    fn poll(&self, timeout: Option<Duration>) -> Option<Task> {
        if let Ok(task) = self.rx.try_recv() {
            return Some(task);
        }
        // A timeout too large to express as an `Instant` means "no limit".
        let deadline = match timeout {
            Some(t) if t.is_zero() => return None,
            Some(t) => Instant::now().checked_add(t),
            None => None,
        };
        match deadline {
            Some(deadline) => select! {
                recv(self.rx) -> task => task.ok(),
                recv(self.close_rx) -> _ => self.rx.try_recv().ok(),
                recv(crossbeam_channel::at(deadline)) -> _ => self.rx.try_recv().ok(),
            },
            None => select! {
                recv(self.rx) -> task => task.ok(),
                recv(self.close_rx) -> _ => self.rx.try_recv().ok(),
            },
        }
    }

    fn len(&self) -> usize {
        self.rx.len()
    }

    fn close(&self) {
        drop(self.close_tx.lock().take());
    }
}

/// The loom stand-in for the crossbeam-based queue (see the [module
/// docs](self)): a [`BlockingQueue`](super::blocking::BlockingQueue) that is
/// never full.
#[cfg(brisk_loom)]
pub(crate) struct TransferQueue(super::blocking::BlockingQueue);

#[cfg(brisk_loom)]
impl TransferQueue {
    pub(crate) fn new() -> Self {
        TransferQueue(super::blocking::BlockingQueue::new(usize::MAX))
    }
}

#[cfg(brisk_loom)]
impl TaskQueue for TransferQueue {
    fn offer(&self, task: Task) -> Result<(), Task> {
        self.0.offer(task)
    }

    fn poll(&self, timeout: Option<Duration>) -> Option<Task> {
        self.0.poll(timeout)
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn close(&self) {
        self.0.close()
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
