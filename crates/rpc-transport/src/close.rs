//! [`CloseSignal`]: how the tasks of one connection agree that it is over.
//!
//! A connection is three tasks (reader, writer, heartbeat) plus its callers. The
//! first one to see a failure records *why* and cancels the token; the others
//! stop, and every pending call is failed with that reason. The first reason wins,
//! so a caller reads "reset by peer", not a follow-on "channel closed".

use std::sync::OnceLock;

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

    /// The error pending calls get: "connection to PEER closed: REASON".
    pub fn error(&self, peer: &str) -> RpcError {
        RpcError::ConnectionClosed {
            peer: peer.to_owned(),
            reason: self.reason().to_owned(),
        }
    }
}
