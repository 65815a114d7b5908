//! [`CloseSignal`]: how the tasks of one connection agree that it is over.
//!
//! A connection is three tasks (reader, writer, heartbeat) plus its callers. The
//! first one to see a failure records *why* and cancels the token; the others
//! stop, and every pending call is failed with that reason. The first reason wins,
//! so a caller reads "reset by peer", not a follow-on "channel closed".

use std::sync::OnceLock;

use rpc_core::RpcError;
use tokio_util::sync::CancellationToken;

/// Shared "this connection is closed, and why".
#[derive(Debug, Default)]
pub struct CloseSignal {
    token: CancellationToken,
    reason: OnceLock<String>,
}

impl CloseSignal {
    /// An open signal.
    pub fn new() -> Self {
        CloseSignal::default()
    }

    /// Marks the connection closed with `reason` (the first reason is kept).
    pub fn close(&self, reason: impl Into<String>) {
        let _ = self.reason.set(reason.into());
        self.token.cancel();
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Why it closed ("open" while it is not).
    pub fn reason(&self) -> &str {
        self.reason.get().map(String::as_str).unwrap_or("open")
    }

    /// Completes when the connection is closed.
    pub async fn closed(&self) {
        self.token.cancelled().await
    }

    /// The error pending calls get: "connection to PEER closed: REASON".
    pub fn error(&self, peer: &str) -> RpcError {
        RpcError::ConnectionClosed {
            peer: peer.to_owned(),
            reason: self.reason().to_owned(),
        }
    }
}
