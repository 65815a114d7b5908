//! [`CloseSignal`]: how the tasks of one connection agree that it is over.
//!
//! A connection is three tasks (reader, writer, heartbeat) plus its callers. The
//! first one to see a failure records *why* and cancels the token; the others
//! stop, and every pending call is failed with that reason. The first reason wins,
//! so a caller reads "reset by peer", not a follow-on "channel closed".

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
    reason: OnceLock<String>,
    /// Set when writing failed while reading may still deliver answers.
    write_error: OnceLock<String>,
    notify: Notify,
}

impl CloseSignal {
    /// An open signal.
    pub fn new() -> Self {
        CloseSignal::default()
    }

    /// Marks the connection closed with `reason` (the first reason is kept).
    pub fn close(&self, reason: impl Into<String>) {
        let _ = self.reason.set(reason.into());
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
        self.reason.get().is_some()
    }

    /// Why it closed ("open" while it is not).
    pub fn reason(&self) -> &str {
        self.reason.get().map(String::as_str).unwrap_or("open")
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

    /// The error pending calls get: "connection to PEER closed: REASON".
    pub fn error(&self, peer: &str) -> RpcError {
        RpcError::ConnectionClosed {
            peer: peer.to_owned(),
            reason: self.reason().to_owned(),
        }
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
    fn a_watch_on_a_closed_signal_is_ready_at_once() {
        let signal = CloseSignal::new();
        signal.close("early");
        let waker = Waker::noop();
        assert!(Pin::new(&mut signal.watch())
            .poll(&mut Context::from_waker(waker))
            .is_ready());
    }
}
