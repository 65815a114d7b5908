//! [`StopWatch`]: everything that ends or changes a connection's serving loop
//! other than its socket — its close signal, the server's stop level and its
//! eviction notice — as one `select!` branch that takes no lock once it is
//! registered.
//!
//! # Why not one `select!` branch per waiter
//!
//! `select!` polls every branch each time the read has to wait, and polling
//! tokio's `Notified` (`CloseSignal::notified`) or a `CancellationToken`
//! waiter takes a lock each time: at one call in flight that is once per call,
//! for waiters that almost never fire. The watch polls them once, to register
//! the task's waker (again only if the waker changes), and otherwise reads
//! what they wait for from the atomics their senders set *before* notifying:
//! `CloseSignal::is_closed` (of the connection and of its eviction notice) and
//! [`StopState::level`].
//!
//! The serving loop also asks the watch directly, once per batch
//! ([`StopWatch::server_stop`], [`StopWatch::evicted`]): a waiter in the
//! `select!` loses the race against a frame read beside it, and a shutdown
//! must be noticed before that frame is served.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use rpc_transport::CloseSignal;
use tokio::sync::futures::Notified;
use tokio_util::sync::WaitForCancellationFuture;

use crate::stop::{StopLevel, StopState};

/// What ends or changes a connection's serving loop, other than its socket.
pub(super) enum Stop {
    /// The connection's close signal fired (idle timeout, a write error...).
    Closed,
    /// Graceful shutdown: answer new requests `ShuttingDown`.
    Stopping,
    /// The server is going down now.
    Forced,
    /// The admission table evicted this connection: wind down as when
    /// `Stopping`, answering `TooManyConnections`.
    Evicted,
}

/// The connection's close signal, the server's stop level and the
/// connection's eviction notice, with their waiters pinned by the serving
/// loop and polled only to register its waker.
///
/// Three waiters, the smallest that do: tokio's bare `Notified` for the two
/// close signals (their flags are checked here, not by the waiter), and one
/// for the server, waiting for `stopping` until the loop is stopping and
/// for `forced` afterwards (a forced stop cancels `stopping` too). They live
/// in every connection's future, idle ones included.
pub(super) struct StopWatch<'w, 's> {
    pub closed: Pin<&'w mut Notified<'s>>,
    pub evict: Pin<&'w mut Notified<'s>>,
    /// The server's `stopping` waiter, replaced by its `forced` one once the
    /// loop is stopping.
    pub server_waiter: Pin<&'w mut WaitForCancellationFuture<'s>>,
    pub close: &'s CloseSignal,
    pub eviction: &'s CloseSignal,
    pub server: &'s StopState,
    /// The waker the waiters hold.
    pub registered: Option<Waker>,
    /// `server_waiter` waits for `forced`.
    pub waits_for_forced: bool,
}

impl StopWatch<'_, '_> {
    /// Ready with what happened; otherwise the task's waker is registered
    /// with every waiter (once per waker) and `Pending`.
    #[inline]
    pub fn poll_stop(&mut self, cx: &mut Context<'_>, stopping: bool) -> Poll<Stop> {
        if let Some(event) = self.check(stopping) {
            return Poll::Ready(event);
        }
        if stopping && !self.waits_for_forced {
            // Once stopping, only a forced stop is news from the server.
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
            let _ = self.closed.as_mut().poll(cx);
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
        if self.close.is_closed() {
            return Some(Stop::Closed);
        }
        self.server_stop(stopping)
            .or_else(|| self.evicted(stopping).then_some(Stop::Evicted))
    }

    /// Whether this connection has been evicted, as news for a loop that is
    /// `stopping` (already winding down: no news) or not.
    #[inline]
    pub fn evicted(&self, stopping: bool) -> bool {
        !stopping && self.eviction.is_closed()
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
