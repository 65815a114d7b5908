//! [`CancelSignal`]: how one call ends — answered, or given up — decided
//! once, by whoever gets there first, and awaited or checked by everything
//! working for the call.
//!
//! # Invariants
//!
//! - A call ends exactly once: [`finish`](CancelSignal::finish) (its answer
//!   goes out) and [`cancel`](CancelSignal::cancel) (its deadline passed, its
//!   caller gave up, its connection closed) race for one compare-and-swap,
//!   and only the winner acts. So a server answers a call once even when its
//!   handler finishes on a worker thread in the very moment its deadline is
//!   answered on the connection task — without a lock or a table of ids.
//! - `cancel` wakes every waiter after it wins; a waiter registers (a
//!   `Notified` future, which `notify_waiters` reaches from the moment it is
//!   created) *before* it reads the state. So no waiter misses a
//!   cancellation. A finished call's waiters are not woken: nothing was
//!   cancelled.
//!
//! # Why not tokio-util's `CancellationToken`
//!
//! Every call gets one, on the hottest path there is. A `CancellationToken`
//! is a node of a tree of tokens, and each clone and drop of a handle takes
//! the node's mutex: measured with callgrind on the server's per-call path
//! (echo, direct dispatch), about 180 instructions per call. Calls need no
//! tree — a nested call watches its parent's signal directly (see
//! `CallOptions::cancel` in rpc-client) — but they do need the claim above.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

const RUNNING: u8 = 0;
const CANCELLED: u8 = 1;
const FINISHED: u8 = 2;

/// A call's end: answered or cancelled, once; clones share it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use rpc_core::CancelSignal;
///
/// let signal = CancelSignal::new();
/// let watcher = signal.clone();
/// let waiting = tokio::spawn(async move { watcher.cancelled().await });
/// assert!(signal.cancel(), "the first to end the call");
/// assert!(!signal.finish(), "too late to answer");
/// waiting.await.unwrap();
/// assert!(signal.is_cancelled());
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct CancelSignal(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    state: AtomicU8,
    waiters: Notify,
}

impl CancelSignal {
    /// A call still running.
    pub fn new() -> Self {
        CancelSignal::default()
    }

    /// Ends the call as given up and wakes every waiter; true when this
    /// ended it (false: it had ended already, answered or cancelled).
    pub fn cancel(&self) -> bool {
        let won = self
            .0
            .state
            .compare_exchange(RUNNING, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if won {
            self.0.waiters.notify_waiters();
        }
        won
    }

    /// Ends the call as answered; true when this ended it — the answer may
    /// go out. False: it was cancelled first, and its answer is to be
    /// discarded (the caller was answered or does not want one).
    #[inline]
    pub fn finish(&self) -> bool {
        self.0
            .state
            .compare_exchange(RUNNING, FINISHED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// True once cancelled.
    #[inline]
    pub fn is_cancelled(&self) -> bool {
        self.0.state.load(Ordering::Acquire) == CANCELLED
    }

    /// True until the call ends, either way.
    #[inline]
    pub fn is_running(&self) -> bool {
        self.0.state.load(Ordering::Acquire) == RUNNING
    }

    /// Completes once the call is cancelled (at once if it is already);
    /// never, for a call that was answered.
    pub async fn cancelled(&self) {
        let notified = self.0.waiters.notified();
        // Registered from here on (`notify_waiters` reaches a `Notified` as
        // soon as it exists): a cancel after the check below wakes it.
        if self.is_cancelled() {
            return;
        }
        notified.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn no_waiter_misses_a_cancel_racing_with_it() {
        for _ in 0..500 {
            let signal = CancelSignal::new();
            let waiters: Vec<_> = (0..4)
                .map(|_| {
                    let s = signal.clone();
                    tokio::spawn(async move { s.cancelled().await })
                })
                .collect();
            let canceller = {
                let s = signal.clone();
                tokio::spawn(async move { s.cancel() })
            };
            assert!(canceller.await.unwrap());
            for w in waiters {
                tokio::time::timeout(Duration::from_secs(5), w)
                    .await
                    .expect("a waiter missed the cancel")
                    .unwrap();
            }
        }
    }

    #[test]
    fn finish_and_cancel_racing_end_the_call_once() {
        for _ in 0..2000 {
            let signal = CancelSignal::new();
            let other = signal.clone();
            let finisher = std::thread::spawn(move || other.finish());
            let cancelled = signal.cancel();
            let finished = finisher.join().unwrap();
            assert!(cancelled ^ finished, "exactly one ends the call");
            assert!(!signal.is_running());
            assert_eq!(signal.is_cancelled(), cancelled);
        }
    }

    #[tokio::test]
    async fn a_cancelled_signal_completes_at_once_and_stays_cancelled() {
        let signal = CancelSignal::new();
        assert!(signal.is_running());
        assert!(signal.cancel());
        assert!(!signal.cancel(), "once");
        signal.cancelled().await;
        assert!(signal.clone().is_cancelled());
    }
}
