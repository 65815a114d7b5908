//! [`CancelSignal`]: how one call ends — answered, or given up — decided
//! once, by whoever gets there first, and awaited or checked by everything
//! working for the call.
//!
//! # Invariants
//!
//! - A call ends exactly once: [`finish`](CancelSignal::finish) (its answer
//!   goes out) and [`give_up`](CancelSignal::give_up) (its deadline passed,
//!   its caller gave up, its connection closed: the server answers or drops
//!   it itself) race for one compare-and-swap, and only the winner acts. So
//!   a server answers a call once even when its handler finishes on a worker
//!   thread in the very moment its deadline is answered on the connection
//!   task — without a lock or a table of ids.
//! - [`cancel`](CancelSignal::cancel) only *signals*: it wakes the waiters,
//!   but the call's answer may still go out. So a handler (or a user's own
//!   context on the client side) that cancels its signal to stop the work it
//!   started cannot leave its caller without an answer.
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
//!
//! # The allocation kept for the next call
//!
//! Most calls end with nobody holding their signal but the server. So the
//! last handle dropped keeps the allocation, reset to running, among the
//! [`Spares`] of its thread, and the next
//! [`CancelSignal::new`] takes it: a connection task that answers its calls
//! at once allocates no signal after the first, and a pooled call's signal
//! — made by the connection task, dropped last by its worker — reaches a
//! thread that makes signals (the connection's, or another's) in a batch,
//! instead of going through the allocator's slow cross-thread path. When
//! the spares are full, the signal is freed as before.
//!
//! Only the last handle may do this — [`Arc::get_mut`], after which nothing
//! else can reach the signal, so nothing can see its reset. No waiter is
//! registered then (a waiter borrows a handle), short of a `cancelled()`
//! future polled and then leaked with `mem::forget`: the reused signal's
//! next cancellation wakes that leaked task once, spuriously, as a waker may
//! be woken anyway.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

use crate::spares::Spares;

/// Running, nobody cancelled it.
const RUNNING: u8 = 0;
/// Running, cancelled by someone: waiters woken, the answer may still go out.
const CANCELLED: u8 = 1;
/// Ended: given up (deadline, caller, connection); answers are dropped.
const GIVEN_UP: u8 = 2;
/// Ended: answered.
const FINISHED: u8 = 3;

/// A call's end: answered or cancelled, once; clones share it.
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
/// assert!(signal.finish(), "a cancelled call may still be answered");
/// assert!(!signal.give_up(), "but it ended already");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct CancelSignal(Arc<Inner>);

thread_local! {
    /// This thread's ended signals, reset to running (see the module docs).
    static STOCK: RefCell<Vec<Arc<Inner>>> = const { RefCell::new(Vec::new()) };
}

/// Ended signals' allocations, for the next [`CancelSignal::new`].
static SPARES: Spares<Arc<Inner>> = Spares::new(&STOCK);

impl Default for CancelSignal {
    fn default() -> Self {
        CancelSignal(SPARES.take().unwrap_or_default())
    }
}

impl Drop for CancelSignal {
    /// The last handle keeps the allocation for a next call.
    fn drop(&mut self) {
        // Another handle lives (the usual first drop of two): one load.
        if Arc::strong_count(&self.0) != 1 {
            return;
        }
        let Some(inner) = Arc::get_mut(&mut self.0) else {
            return;
        };
        // Nothing else reaches it (see the module docs on waiters).
        *inner.state.get_mut() = RUNNING;
        SPARES.keep(self.0.clone());
    }
}

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

    /// Signals cancellation: every waiter is woken and later checks see it.
    /// The call goes on until it ends (its answer may still go out).
    pub fn cancel(&self) {
        let st = &self.0.state;
        if st
            .compare_exchange(RUNNING, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.0.waiters.notify_waiters();
        }
    }

    /// Ends the call unanswered — what a server does at the call's deadline,
    /// at its caller's `Cancel`, when its connection closes — and wakes every
    /// waiter; true when this ended it (false: it had ended already). A later
    /// [`finish`](Self::finish) fails: the handler's answer is discarded.
    pub fn give_up(&self) -> bool {
        let st = &self.0.state;
        let mut current = st.load(Ordering::Acquire);
        loop {
            if current >= GIVEN_UP {
                return false;
            }
            match st.compare_exchange(current, GIVEN_UP, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    // Woken even if cancelled before: `given_up` waits on.
                    self.0.waiters.notify_waiters();
                    return true;
                }
                Err(now) => current = now,
            }
        }
    }

    /// Ends the call as answered; true when this ended it — the answer may
    /// go out. False: the call was given up first, and its answer is to be
    /// discarded (the caller was answered or does not want one).
    #[inline]
    pub fn finish(&self) -> bool {
        let st = &self.0.state;
        st.compare_exchange(RUNNING, FINISHED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
            || st
                .compare_exchange(CANCELLED, FINISHED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }

    /// True once cancelled or given up.
    #[inline]
    pub fn is_cancelled(&self) -> bool {
        matches!(self.0.state.load(Ordering::Acquire), CANCELLED | GIVEN_UP)
    }

    /// True until the call ends, answered or given up.
    #[inline]
    pub fn is_running(&self) -> bool {
        self.0.state.load(Ordering::Acquire) < GIVEN_UP
    }

    /// Completes once the call is cancelled or given up (at once if it is
    /// already); never, for a call answered without either — so work spawned
    /// with a copy of the context should also stop on its own.
    pub async fn cancelled(&self) {
        self.wait_for(|state| matches!(state, CANCELLED | GIVEN_UP))
            .await
    }

    /// Completes once the call is given up — its answer would be discarded,
    /// so the work for it may be dropped; a plain [`cancel`](Self::cancel)
    /// does not complete it.
    pub async fn given_up(&self) {
        self.wait_for(|state| state == GIVEN_UP).await
    }

    async fn wait_for(&self, done: impl Fn(u8) -> bool) {
        loop {
            let notified = self.0.waiters.notified();
            // Registered from here on (`notify_waiters` reaches a `Notified`
            // as soon as it exists): a change after the check below wakes it.
            if done(self.0.state.load(Ordering::Acquire)) {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::time::Duration;

    /// This thread's stock of spare signals set to `n` fresh ones, so that
    /// a test's few `new`s neither empty it (which would take a batch from
    /// the depot other tests share) nor fill it (which would hand one in).
    fn fresh_stock(n: usize) {
        STOCK.with(|stock| {
            let mut stock = stock.borrow_mut();
            stock.clear();
            stock.extend((0..n).map(|_| Arc::default()));
        });
    }

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
                tokio::spawn(async move { s.give_up() })
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
    fn finish_and_give_up_racing_end_the_call_once() {
        for round in 0..2000 {
            let signal = CancelSignal::new();
            if round % 2 == 1 {
                // A plain cancel first changes nothing about who ends it.
                signal.cancel();
            }
            let other = signal.clone();
            let finisher = std::thread::spawn(move || other.finish());
            let gave_up = signal.give_up();
            let finished = finisher.join().unwrap();
            assert!(gave_up ^ finished, "exactly one ends the call");
            assert!(!signal.is_running());
        }
    }

    #[tokio::test]
    async fn given_up_waits_past_a_plain_cancel() {
        let signal = CancelSignal::new();
        let watcher = signal.clone();
        let waiting = tokio::spawn(async move { watcher.given_up().await });
        signal.cancel();
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a plain cancel is not the end");
        assert!(signal.give_up());
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken when given up")
            .unwrap();
    }

    #[test]
    fn a_cancelled_call_can_still_be_answered_once() {
        let signal = CancelSignal::new();
        signal.cancel();
        assert!(signal.is_cancelled() && signal.is_running());
        assert!(signal.finish());
        assert!(!signal.finish(), "once");
        assert!(!signal.give_up());
    }

    #[test]
    fn an_ended_signal_s_allocation_serves_the_thread_s_next_call_as_new() {
        fresh_stock(8);
        for end in [CancelSignal::give_up, CancelSignal::finish] {
            let signal = CancelSignal::new();
            signal.cancel();
            assert!(end(&signal));
            let kept = Arc::as_ptr(&signal.0);
            drop(signal);
            let next = CancelSignal::new();
            assert_eq!(Arc::as_ptr(&next.0), kept, "the last handle kept it");
            assert!(
                next.is_running() && !next.is_cancelled(),
                "reset to running"
            );
            assert!(next.give_up(), "and it ends once again");
            assert!(!next.finish());
        }
    }

    #[test]
    fn a_signal_another_handle_holds_is_never_reused() {
        fresh_stock(8);
        let signal = CancelSignal::new();
        let other = signal.clone();
        let shared = Arc::as_ptr(&signal.0);
        assert!(signal.give_up());
        drop(signal);
        let next = CancelSignal::new();
        assert_ne!(Arc::as_ptr(&next.0), shared, "still held by `other`");
        assert!(!other.is_running(), "`other` still sees its call ended");
        assert!(next.is_running());
        // `other`'s drop is the last: it keeps the allocation.
        drop(other);
        let after = CancelSignal::new();
        assert_eq!(Arc::as_ptr(&after.0), shared, "kept by the last drop");
        assert!(after.is_running());
        // Both kept; the last dropped is the first taken.
        let kept_first = Arc::as_ptr(&next.0);
        let kept_last = Arc::as_ptr(&after.0);
        drop(next);
        drop(after);
        let again = CancelSignal::new();
        assert_eq!(Arc::as_ptr(&again.0), kept_last, "the last drop first");
        let then = CancelSignal::new();
        assert_eq!(Arc::as_ptr(&then.0), kept_first, "then the one before");
        assert!(again.is_running() && then.is_running());
    }

    #[test]
    fn a_signal_whose_last_handle_another_thread_drops_is_kept_there() {
        let made_here = CancelSignal::new();
        let ptr = Arc::as_ptr(&made_here.0) as usize;
        let reused_there = std::thread::spawn(move || {
            assert!(made_here.finish());
            drop(made_here);
            let next = CancelSignal::new();
            (Arc::as_ptr(&next.0) as usize, next.is_running())
        })
        .join()
        .unwrap();
        assert_eq!(
            reused_there,
            (ptr, true),
            "kept by the dropping thread, reset"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reused_signal_waits_and_wakes_as_a_new_one() {
        fresh_stock(8);
        let first = CancelSignal::new();
        let watcher = first.clone();
        let waited = tokio::spawn(async move { watcher.cancelled().await });
        assert!(first.give_up());
        tokio::time::timeout(Duration::from_secs(5), waited)
            .await
            .expect("woken")
            .unwrap();
        let kept = Arc::as_ptr(&first.0);
        drop(first);
        for round in 0..100 {
            let signal = CancelSignal::new();
            if round == 0 {
                assert_eq!(Arc::as_ptr(&signal.0), kept, "the ended signal, reused");
            }
            assert!(signal.is_running());
            // A waiter registered (polled once, pending) before the give-up.
            let mut waiting = Box::pin(signal.given_up());
            let waker = std::task::Waker::noop();
            let mut cx = std::task::Context::from_waker(waker);
            assert!(
                waiting.as_mut().poll(&mut cx).is_pending(),
                "a new call is not given up"
            );
            let giver = signal.clone();
            let gave_up = tokio::spawn(async move { giver.give_up() });
            assert!(gave_up.await.unwrap());
            tokio::time::timeout(Duration::from_secs(5), waiting)
                .await
                .expect("woken when given up");
        }
    }

    #[tokio::test]
    async fn a_cancelled_signal_completes_at_once_and_stays_cancelled() {
        let signal = CancelSignal::new();
        assert!(signal.is_running());
        signal.cancel();
        signal.cancel();
        signal.cancelled().await;
        assert!(signal.clone().is_cancelled());
        assert!(signal.give_up(), "cancelled, not ended");
        assert!(!signal.give_up(), "once");
        signal.cancelled().await;
    }
}
