//! [`StopState`]: how far the server is in stopping, and the means to wait for it.
//!
//! A server is [`Running`](StopLevel::Running), then (graceful shutdown)
//! [`Stopping`](StopLevel::Stopping) — no new calls, the ones in flight
//! finish — and finally [`Forced`](StopLevel::Forced): everything closes now.
//! The level only rises.
//!
//! # Why an atomic and wait-able signals side by side
//!
//! The level is one atomic, read with one load: a connection task checks it
//! once per batch of frames, because a waiter in a `select!` is only noticed
//! when polled, after the frame read beside it has already been served, and
//! polling a waiter takes a lock each time. The waiters ([`stopping`] and
//! [`forced`]) are for tasks that park: the accept loops, the HTTP
//! connections, a connection task once it has registered its waker (see its
//! `StopWatch`). Both raise the atomic *before* they wake anyone, so a task
//! woken by a waiter always reads the new level.
//!
//! [`stopping`]: StopState::stopping
//! [`forced`]: StopState::forced

use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

/// How far the server is in stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum StopLevel {
    /// Serving.
    Running = 0,
    /// Graceful shutdown: new calls are refused, calls in flight finish.
    Stopping = 1,
    /// Closing everything now.
    Forced = 2,
}

/// The server's stop level, shared by every task of the server.
pub(crate) struct StopState {
    /// A [`StopLevel`] as `u8`; only ever raised.
    level: AtomicU8,
    /// Cancelled on [`StopLevel::Stopping`] (and so on `Forced` too).
    stopping: CancellationToken,
    /// Cancelled on [`StopLevel::Forced`].
    forced: CancellationToken,
}

impl StopState {
    pub fn new() -> Self {
        StopState {
            level: AtomicU8::new(StopLevel::Running as u8),
            stopping: CancellationToken::new(),
            forced: CancellationToken::new(),
        }
    }

    /// Starts a graceful shutdown: new calls are answered `ShuttingDown`.
    pub fn stop_gracefully(&self) {
        self.level
            .fetch_max(StopLevel::Stopping as u8, Ordering::SeqCst);
        self.stopping.cancel();
    }

    /// Closes every connection now; no call read after this is served.
    pub fn stop_now(&self) {
        self.level.store(StopLevel::Forced as u8, Ordering::SeqCst);
        self.stopping.cancel();
        self.forced.cancel();
    }

    /// The level now: one atomic load.
    #[inline]
    pub fn level(&self) -> StopLevel {
        match self.level.load(Ordering::Acquire) {
            0 => StopLevel::Running,
            1 => StopLevel::Stopping,
            _ => StopLevel::Forced,
        }
    }

    /// Completes once the server is stopping (gracefully or not).
    pub fn stopping(&self) -> WaitForCancellationFuture<'_> {
        self.stopping.cancelled()
    }

    /// Completes once the server is forced down.
    pub fn forced(&self) -> WaitForCancellationFuture<'_> {
        self.forced.cancelled()
    }

    /// [`forced`](Self::forced) for a task of its own: borrows nothing.
    pub fn forced_owned(&self) -> impl Future<Output = ()> + Send + 'static {
        self.forced.clone().cancelled_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[test]
    fn the_level_only_rises_and_the_waiters_follow_it() {
        let stop = StopState::new();
        assert_eq!(stop.level(), StopLevel::Running);
        assert!(stop.stopping().now_or_never().is_none());

        stop.stop_gracefully();
        assert_eq!(stop.level(), StopLevel::Stopping);
        assert!(stop.stopping().now_or_never().is_some());
        assert!(stop.forced().now_or_never().is_none());

        stop.stop_now();
        assert_eq!(stop.level(), StopLevel::Forced);
        assert!(stop.forced().now_or_never().is_some());
        assert!(stop.forced_owned().now_or_never().is_some());

        stop.stop_gracefully();
        assert_eq!(stop.level(), StopLevel::Forced, "never lowered");
    }

    #[test]
    fn a_forced_stop_also_ends_a_wait_for_a_graceful_one() {
        let stop = StopState::new();
        stop.stop_now();
        assert!(stop.stopping().now_or_never().is_some());
    }
}
