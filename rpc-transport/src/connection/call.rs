//! What a caller holds of one call on a [`Connection`]: how it goes out
//! ([`SendSpec`], [`StreamSpec`]), what [`Connection::start`] did with it
//! ([`Started`], [`WriteWait`]), a stream just opened ([`OpenStream`]),
//! and the call that waits for its answer ([`PendingCall`]), which frees
//! its slot and tells the server with a `Cancel` frame when its caller
//! gives up.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rpc_codec::{Frame, FrameKind, OutFrame};
use rpc_core::stream::{RawStreaming, StreamSink};
use rpc_core::{RpcError, WriteMode};
use tokio::time::Instant;

use super::Connection;

/// How one request goes out: what [`Connection::start`] needs beside the
/// frame (which carries the names, the serializer, the metadata and the body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendSpec {
    /// Return once the frame is queued ([`WriteMode::Async`]) or written
    /// ([`WriteMode::Sync`]).
    pub mode: WriteMode,
    /// When the caller gives up, on the write and on the answer.
    pub deadline: Instant,
    /// The time left until `deadline` when the request is sent: it travels in
    /// the frame (the server's view of the deadline) and is what a timeout
    /// error reports.
    pub timeout: Duration,
}

/// How a stream is opened: what [`Connection::open_stream`] needs beside
/// the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamSpec {
    /// Items of the server's flow the caller takes before it reads any.
    pub window: u32,
    /// Whether the caller sends a flow of its own.
    pub client_streams: bool,
    /// The whole stream's deadline, from now (`None`: none).
    pub timeout: Option<Duration>,
}

/// A stream just opened.
#[derive(Debug)]
pub struct OpenStream {
    /// The server's items.
    pub items: RawStreaming,
    /// Where the caller's items go (client and bidirectional streams).
    pub sink: Option<StreamSink>,
}

/// What [`Connection::start`] did with a request.
#[derive(Debug)]
pub enum Started {
    /// Registered and queued for writing: await the call's response.
    Sent(PendingCall),
    /// Registered; the write still has to wait (for room in the write queue, or
    /// for the write itself in [`WriteMode::Sync`]): await the [`WriteWait`] first.
    Waiting(PendingCall, WriteWait),
}

/// The waiting half of a send; resolves once the request is queued (async
/// write mode) or written (sync), or with the write error or timeout.
pub struct WriteWait(pub(super) Pin<Box<dyn Future<Output = Result<(), RpcError>> + Send>>);

impl std::fmt::Debug for WriteWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WriteWait")
    }
}

impl Future for WriteWait {
    type Output = Result<(), RpcError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

/// A request that has been sent and waits for its response.
///
/// Dropping it before its answer (the caller gave up, lost a `select!`) and
/// timing out both remove its pending slot, so a late response is
/// recognised as stale and dropped, and tell the server with a `Cancel`
/// frame, so it stops the call (or discards its answer) instead of running
/// it for nobody.
#[derive(Debug)]
pub struct PendingCall {
    pub(super) conn: Arc<Connection>,
    pub(super) id: u64,
    pub(super) timeout: Duration,
    pub(super) service: Cow<'static, str>,
    pub(super) method: Cow<'static, str>,
    pub(super) answered: bool,
}

impl PendingCall {
    /// The request id on its connection.
    pub fn request_id(&self) -> u64 {
        self.id
    }

    /// Waits for the response frame until the call's deadline (enforced by the
    /// connection's deadline sweeper: one timer per connection, not per call).
    pub async fn response(self) -> Result<Frame, RpcError> {
        self.outcome(false).await
    }

    /// [`response`](Self::response); `armed`: the slot holds the waker of
    /// the poll this future is first polled in (see [`Connection::call`]),
    /// so that poll waits without looking.
    pub(super) async fn outcome(mut self, mut armed: bool) -> Result<Frame, RpcError> {
        let outcome = std::future::poll_fn(|cx| {
            if std::mem::take(&mut armed) {
                return Poll::Pending;
            }
            self.conn.shared.pending.poll(self.id, cx)
        })
        .await;
        // Collected (or never there): the slot is free.
        self.answered = true;
        match outcome {
            Some(Err(RpcError::Timeout { .. })) => Err({
                self.send_cancel();
                RpcError::Timeout {
                    service: self.service.to_string(),
                    method: self.method.to_string(),
                    timeout: self.timeout,
                }
            }),
            Some(outcome) => outcome,
            None => {
                let shared = &self.conn.shared;
                Err(shared.close.error(&shared.peer))
            }
        }
    }
}

impl PendingCall {
    /// Tells the server this call is given up. Without waiting: a full write
    /// queue or a closed connection drops the cancel (the server's deadline
    /// still ends the call).
    fn send_cancel(&self) {
        let _ = self
            .conn
            .writer
            .try_send(&OutFrame::control(FrameKind::Cancel, self.id));
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        // Collected by `response`; otherwise the caller gave up on it: free
        // the slot and tell the server.
        if !self.answered {
            let was_waiting = self.conn.shared.pending.remove(self.id);
            // An answer that arrived but was not collected needs no cancel.
            if was_waiting && !self.conn.shared.close.is_closed() {
                self.send_cancel();
            }
        }
    }
}
