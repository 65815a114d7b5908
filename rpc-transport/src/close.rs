//! [`CloseSignal`]: how the tasks of one connection agree that it is over.
//!
//! A connection is three tasks (reader, writer, heartbeat) plus its callers. The
//! first one to see a failure records *why* and cancels the token; the others
//! stop, and every pending call is failed with that reason. The first reason wins,
//! so a caller reads "reset by peer", not a follow-on "channel closed".
//!
//! Most closes are a [`RpcError::ConnectionClosed`] with the reason. A close the
//! server explained — a connection-level error answer such as
//! `TooManyConnections` — keeps that typed error instead ([`CloseSignal::close_with`]),
//! and every call failed by the close, or started on the closed connection,
//! gets it. Reason and error are set together, once: the first close wins both.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};

use rpc_core::RpcError;
use tokio::sync::Notify;

/// Shared "this connection is closed, and why".
///
/// `is_closed` is a single atomic load (the reason cell doubles as the flag): it
/// is checked on every call, so it must not take a lock the way a
/// `CancellationToken` does.
#[derive(Debug, Default)]
pub struct CloseSignal {
    closed: OnceLock<Closed>,
    /// Set when writing failed while reading may still deliver answers.
    write_error: OnceLock<String>,
    notify: Notify,
}

/// Why a connection closed, as recorded by the first close.
#[derive(Debug)]
struct Closed {
    reason: String,
    /// The error calls get instead of `ConnectionClosed`, when the close was
    /// an error the server sent.
    error: Option<RpcError>,
}

impl CloseSignal {
    /// An open signal.
    pub fn new() -> Self {
        CloseSignal::default()
    }

    /// Marks the connection closed with `reason` (the first reason is kept).
    pub fn close(&self, reason: impl Into<String>) {
        self.close_as(reason.into(), None);
    }

    /// Marks the connection closed because of `error` (an error the peer sent
    /// for the whole connection): calls failed by this close get `error`
    /// itself, not `ConnectionClosed`. The first close wins, as with
    /// [`close`](Self::close).
    pub fn close_with(&self, error: RpcError) {
        self.close_as(error.to_string(), Some(error));
    }

    fn close_as(&self, reason: String, error: Option<RpcError>) {
        let _ = self.closed.set(Closed { reason, error });
        self.notify.notify_waiters();
    }

    /// Records that writing failed, without closing: answers already on their way
    /// can still be read (a server that drained and closed leaves them in our
    /// receive buffer). The reader closes the connection when the stream ends.
    pub fn fail_writes(&self, reason: impl Into<String>) {
        let _ = self.write_error.set(reason.into());
    }

    /// Why writing failed, if it did.
    pub fn write_error(&self) -> Option<&str> {
        self.write_error.get().map(String::as_str)
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        self.closed.get().is_some()
    }

    /// Why it closed ("open" while it is not).
    pub fn reason(&self) -> &str {
        self.closed.get().map_or("open", |c| c.reason.as_str())
    }

    /// Completes when the connection is closed.
    pub async fn closed(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Register first, then check: a close in between still wakes us.
            notified.as_mut().enable();
            if self.is_closed() {
                return;
            }
            notified.await;
        }
    }

    /// [`closed`](Self::closed) for a hot `select!` loop: see [`ClosedWatch`].
    pub fn watch(&self) -> ClosedWatch<'_> {
        ClosedWatch {
            signal: self,
            waiter: Box::pin(self.closed()),
            registered: None,
        }
    }

    /// The error pending calls get: the error the peer sent, when the close
    /// was [`close_with`](Self::close_with); otherwise "connection to PEER
    /// closed: REASON".
    pub fn error(&self, peer: &str) -> RpcError {
        self.typed_error()
            .unwrap_or_else(|| RpcError::ConnectionClosed {
                peer: peer.to_owned(),
                reason: self.reason().to_owned(),
            })
    }

    /// The error of a request that never left on this connection: the error
    /// the peer closed it with, when it sent one, else `NotSent` with `why`.
    pub fn not_sent_error(&self, peer: &str, why: impl FnOnce() -> String) -> RpcError {
        self.typed_error().unwrap_or_else(|| RpcError::NotSent {
            peer: peer.to_owned(),
            reason: why(),
        })
    }

    /// The error the connection was closed with by [`close_with`](Self::close_with), if any.
    pub fn typed_error(&self) -> Option<RpcError> {
        self.closed.get().and_then(|c| c.error.clone())
    }
}

/// Completes when the connection closes, like [`CloseSignal::closed`], but
/// cheap to poll again and again.
///
/// A connection task `select!`s on its close signal every time its read or
/// write has to wait, which at one call in flight is once per call; polling
/// tokio's `Notified` takes the `Notify`'s lock each time. This polls the
/// waiter only to register the task's waker (again only if the waker
/// changes) and otherwise reads the flag `close` sets before it notifies.
pub struct ClosedWatch<'a> {
    signal: &'a CloseSignal,
    waiter: Pin<Box<dyn Future<Output = ()> + Send + Sync + 'a>>,
    /// The waker the waiter holds.
    registered: Option<Waker>,
}

impl Future for ClosedWatch<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if this.signal.is_closed() {
            return Poll::Ready(());
        }
        if this
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            return Poll::Pending;
        }
        if this.waiter.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        this.registered = Some(cx.waker().clone());
        Poll::Pending
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

    #[test]
    fn a_watch_is_woken_by_close_and_then_ready() {
        let signal = CloseSignal::new();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut watch = signal.watch();
        for _ in 0..3 {
            assert!(Pin::new(&mut watch).poll(&mut cx).is_pending());
        }
        signal.close("done");
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken once");
        assert!(Pin::new(&mut watch).poll(&mut cx).is_ready());
        assert_eq!(signal.reason(), "done");
    }

    #[test]
    fn a_watch_follows_a_new_waker() {
        let signal = CloseSignal::new();
        let first = Arc::new(Count(AtomicUsize::new(0)));
        let second = Arc::new(Count(AtomicUsize::new(0)));
        let mut watch = signal.watch();
        let w1 = Waker::from(first.clone());
        assert!(Pin::new(&mut watch)
            .poll(&mut Context::from_waker(&w1))
            .is_pending());
        let w2 = Waker::from(second.clone());
        assert!(Pin::new(&mut watch)
            .poll(&mut Context::from_waker(&w2))
            .is_pending());
        signal.close("done");
        assert_eq!(
            second.0.load(Ordering::SeqCst),
            1,
            "the latest waker is woken"
        );
    }

    #[test]
    fn a_close_with_an_error_hands_out_that_error_and_the_first_close_wins() {
        let too_many = RpcError::TooManyConnections {
            limit: "max_connections".into(),
            max: 3,
            evicted: false,
        };
        let signal = CloseSignal::new();
        signal.close_with(too_many.clone());
        signal.close("a later close");
        assert!(signal.is_closed());
        assert_eq!(signal.error("peer"), too_many);
        assert!(signal.reason().contains("max_connections = 3"));

        let plain = CloseSignal::new();
        plain.close("reset by peer");
        plain.close_with(too_many);
        assert!(matches!(
            plain.error("peer"),
            RpcError::ConnectionClosed { reason, .. } if reason == "reset by peer"
        ));
    }

    #[test]
    fn a_watch_on_a_closed_signal_is_ready_at_once() {
        let signal = CloseSignal::new();
        signal.close("early");
        let waker = Waker::noop();
        assert!(Pin::new(&mut signal.watch())
            .poll(&mut Context::from_waker(waker))
            .is_ready());
    }
}
