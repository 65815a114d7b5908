//! [`CancelSignal`]: one call's cancellation — set once, by whoever gives up
//! on the call, and awaited or checked by everything working for it.
//!
//! # Why not tokio-util's `CancellationToken`
//!
//! Every call gets one, on the hottest path there is. A `CancellationToken`
//! is a node of a tree of tokens: its creation builds the node, and each
//! clone and drop of a handle takes the node's mutex. Measured with
//! callgrind on the server's per-call path (echo, direct dispatch), the
//! token cost about 180 instructions per call; this flag and wake-up cost a
//! fraction of that. Calls need no tree: a nested call watches its parent's
//! signal directly (see `CallOptions::cancel` in rpc-client).
//!
//! # Invariants
//!
//! `cancel` sets the flag, then wakes every waiter; a waiter registers (a
//! `Notified` future, which `notify_waiters` reaches from the moment it is
//! created) *before* it reads the flag. So a waiter either sees the flag or
//! is woken: none can miss the cancellation. The flag never goes back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// A call's cancellation; clones share it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use rpc_core::CancelSignal;
///
/// let signal = CancelSignal::new();
/// let watcher = signal.clone();
/// let waiting = tokio::spawn(async move { watcher.cancelled().await });
/// signal.cancel();
/// waiting.await.unwrap();
/// assert!(signal.is_cancelled());
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct CancelSignal(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    cancelled: AtomicBool,
    waiters: Notify,
}

impl CancelSignal {
    /// A signal not cancelled yet.
    pub fn new() -> Self {
        CancelSignal::default()
    }

    /// Cancels: every waiter is woken, every later check sees it. Idempotent.
    pub fn cancel(&self) {
        if !self.0.cancelled.swap(true, Ordering::SeqCst) {
            self.0.waiters.notify_waiters();
        }
    }

    /// True once cancelled.
    #[inline]
    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
    }

    /// Completes once cancelled (at once if it is already).
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
            canceller.await.unwrap();
            for w in waiters {
                tokio::time::timeout(Duration::from_secs(5), w)
                    .await
                    .expect("a waiter missed the cancel")
                    .unwrap();
            }
        }
    }

    #[tokio::test]
    async fn a_cancelled_signal_completes_at_once_and_stays_cancelled() {
        let signal = CancelSignal::new();
        assert!(!signal.is_cancelled());
        signal.cancel();
        signal.cancel();
        signal.cancelled().await;
        assert!(signal.clone().is_cancelled());
    }
}
