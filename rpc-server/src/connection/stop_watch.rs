//! [`StopWatch`]: what ends or changes a connection's serving loop from
//! outside its task — the server's stop level and the connection's eviction
//! notice — as one `select!` branch that takes no lock once it is
//! registered.
//!
//! (Everything else that ends the loop — the socket, the idle timeout, bad
//! input — happens on the task itself, which then leaves the loop at once:
//! nothing needs a waiter for it.)
//!
//! # Why not one `select!` branch per waiter
//!
//! `select!` polls every branch each time the read has to wait, and polling
//! tokio's `Notified` (`EvictionNotice::notified`) or a `CancellationToken`
//! waiter takes a lock each time: at one call in flight that is once per call,
//! for waiters that almost never fire. The watch polls them once, to register
//! the task's waker (again only if the waker changes, or when it swaps the
//! server's waiter), and otherwise reads what they wait for from the atomics
//! their senders set *before* notifying: [`EvictionNotice::is_fired`] and
//! [`StopState::level`].
//!
//! # Two small waiters
//!
//! They live in every connection's future, idle ones included, so they are
//! the smallest that do: tokio's bare `Notified` for the eviction notice (it
//! completes on any fire after it is made, even unpolled; the flag is
//! checked here, not by the waiter), and one server waiter, for `stopping`
//! until the loop is stopping and for `forced` afterwards (a forced stop
//! cancels `stopping` too, so a loop not yet stopping hears of it as well).
//!
//! The serving loop also asks the watch directly, once per batch
//! ([`StopWatch::server_stop`], [`StopWatch::evicted`]): a waiter in the
//! `select!` loses the race against a frame read beside it, and a shutdown
//! must be noticed before that frame is served.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::sync::futures::Notified;
use tokio_util::sync::WaitForCancellationFuture;

use crate::admission::EvictionNotice;
use crate::stop::{StopLevel, StopState};

/// What ends or changes a connection's serving loop from outside its task.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Stop {
    /// Graceful shutdown: answer new requests `ShuttingDown`.
    Stopping,
    /// The server is going down now.
    Forced,
    /// The admission table evicted this connection: wind down as when
    /// `Stopping`, answering `TooManyConnections`.
    Evicted,
}

/// The server's stop level and the connection's eviction notice, with their
/// waiters pinned by the serving loop and polled only to register its waker.
pub(super) struct StopWatch<'w, 's> {
    pub evict: Pin<&'w mut Notified<'s>>,
    /// The server's `stopping` waiter, replaced by its `forced` one once the
    /// loop is stopping.
    pub server_waiter: Pin<&'w mut WaitForCancellationFuture<'s>>,
    pub eviction: &'s EvictionNotice,
    pub server: &'s StopState,
    /// The waker the waiters hold.
    pub registered: Option<Waker>,
    /// `server_waiter` waits for `forced`.
    pub waits_for_forced: bool,
}

impl StopWatch<'_, '_> {
    /// Ready with what happened; otherwise the task's waker is registered
    /// with the waiters that still matter (once per waker, and again when
    /// the server's waiter is swapped for `forced`) and `Pending`. Once
    /// `stopping`, only a forced stop is news.
    #[inline]
    pub fn poll_stop(&mut self, cx: &mut Context<'_>, stopping: bool) -> Poll<Stop> {
        if let Some(event) = self.check(stopping) {
            return Poll::Ready(event);
        }
        if stopping && !self.waits_for_forced {
            self.server_waiter.set(self.server.forced());
            self.waits_for_forced = true;
            self.registered = None;
        }
        if !self
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            // A waiter that completes here has had its flag set first, so the
            // check below returns and it is never polled again (the serving
            // loop ends, or stops polling `evict` once stopping).
            let _ = self.server_waiter.as_mut().poll(cx);
            if !stopping {
                let _ = self.evict.as_mut().poll(cx);
            }
            self.registered = Some(cx.waker().clone());
            if let Some(event) = self.check(stopping) {
                return Poll::Ready(event);
            }
        }
        Poll::Pending
    }

    #[inline]
    fn check(&self, stopping: bool) -> Option<Stop> {
        self.server_stop(stopping)
            .or_else(|| self.evicted(stopping).then_some(Stop::Evicted))
    }

    /// Whether this connection has been evicted, as news for a loop that is
    /// `stopping` (already winding down: no news) or not.
    #[inline]
    pub fn evicted(&self, stopping: bool) -> bool {
        !stopping && self.eviction.is_fired()
    }

    /// The server's stop level, as news for a loop that is `stopping` or not.
    #[inline]
    pub fn server_stop(&self, stopping: bool) -> Option<Stop> {
        match self.server.level() {
            StopLevel::Running => None,
            StopLevel::Stopping if stopping => None,
            StopLevel::Stopping => Some(Stop::Stopping),
            StopLevel::Forced => Some(Stop::Forced),
        }
    }
}

#[cfg(test)]
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

    fn poll(watch: &mut StopWatch<'_, '_>, waker: &Waker, stopping: bool) -> Poll<Stop> {
        watch.poll_stop(&mut Context::from_waker(waker), stopping)
    }

    /// Runs `test` with a watch over a fresh eviction notice and server, as
    /// the serving loop sets it up, and a waker that counts its wake-ups.
    fn with_watch(
        test: impl FnOnce(
            &mut StopWatch<'_, '_>,
            &EvictionNotice,
            &StopState,
            &Waker,
            &dyn Fn() -> usize,
        ),
    ) {
        let eviction = EvictionNotice::default();
        let server = StopState::new();
        let evict = eviction.notified();
        let server_waiter = server.stopping();
        tokio::pin!(evict, server_waiter);
        let mut watch = StopWatch {
            evict,
            server_waiter,
            eviction: &eviction,
            server: &server,
            registered: None,
            waits_for_forced: false,
        };
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        test(&mut watch, &eviction, &server, &waker, &|| {
            count.0.load(Ordering::SeqCst)
        });
    }

    /// Evicted (so stopping, with the server still running), then the server
    /// is forced down: the parked loop is woken for it and told so.
    #[test]
    fn a_forced_stop_after_an_eviction_wakes_the_loop() {
        with_watch(|watch, eviction, server, waker, woken| {
            assert_eq!(poll(watch, waker, false), Poll::Pending);
            eviction.fire();
            assert_eq!(woken(), 1, "woken by the eviction");
            assert_eq!(poll(watch, waker, false), Poll::Ready(Stop::Evicted));
            // Winding down now: a graceful stop is no news, a forced one is.
            assert_eq!(poll(watch, waker, true), Poll::Pending);
            server.stop_gracefully();
            assert_eq!(woken(), 1, "no wake-up: only `forced` is waited for");
            assert_eq!(poll(watch, waker, true), Poll::Pending);
            server.stop_now();
            assert_eq!(woken(), 2, "woken by the forced stop");
            assert_eq!(poll(watch, waker, true), Poll::Ready(Stop::Forced));
        });
    }

    /// A loop not stopping yet hears of a graceful stop, and later of a
    /// forced one through the swapped waiter.
    #[test]
    fn a_graceful_then_a_forced_stop_each_wake_the_loop() {
        with_watch(|watch, _, server, waker, woken| {
            assert_eq!(poll(watch, waker, false), Poll::Pending);
            server.stop_gracefully();
            assert_eq!(woken(), 1, "woken by the stop");
            assert_eq!(poll(watch, waker, false), Poll::Ready(Stop::Stopping));
            assert_eq!(poll(watch, waker, true), Poll::Pending);
            server.stop_now();
            assert_eq!(woken(), 2, "woken by the force");
            assert_eq!(poll(watch, waker, true), Poll::Ready(Stop::Forced));
        });
    }
}
