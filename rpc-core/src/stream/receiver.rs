//! [`RawStreaming`]: the receiving end of one flow, as a `Stream` of
//! serialized items.
//!
//! It reads its [`Inbox`] and gives credit back through its
//! [`StreamPeer`] as it goes. It ends at the flow's end, at its error
//! (yielded once, after every item sent before it), at its deadline
//! (`DeadlineExceeded`) or when told to stop waiting (`Cancelled`; in both
//! cases the sender is told to stop). Dropped before the end, it tells the
//! sender to stop.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use futures_core::Stream;

use super::{Inbox, StreamPeer};
use crate::{Code, Status};

/// A flow's items as they arrive: `Ok` items in order, then at most one
/// `Err` (the sender's error, a broken connection, the deadline).
pub struct RawStreaming {
    id: u64,
    inbox: Arc<Inbox>,
    peer: Arc<dyn StreamPeer>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Ends the stream `Cancelled` when it completes (a parent call's cancellation).
    until: Option<Pin<Box<dyn Future<Output = ()> + Send + Sync>>>,
    done: bool,
    /// Whatever must live as long as the stream (a pooled connection's lease).
    _hold: Option<Box<dyn Send + Sync>>,
}

impl std::fmt::Debug for RawStreaming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawStreaming")
            .field("id", &self.id)
            .field("queued", &self.inbox.buffered())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl RawStreaming {
    /// The reader of stream `id`'s flow in `inbox`; credit goes back through `peer`.
    pub fn new(id: u64, inbox: Arc<Inbox>, peer: Arc<dyn StreamPeer>) -> Self {
        RawStreaming {
            id,
            inbox,
            peer,
            deadline: None,
            until: None,
            done: false,
            _hold: None,
        }
    }

    /// Ends the stream with `DeadlineExceeded` at `deadline` (none: no end but the flow's).
    pub fn with_deadline(mut self, deadline: Option<Instant>) -> Self {
        self.deadline = deadline
            .map(|at| Box::pin(tokio::time::sleep_until(tokio::time::Instant::from_std(at))));
        self
    }

    /// Ends the stream `Cancelled` (and tells the sender to stop) once
    /// `cancelled` completes — a parent call's cancellation, say.
    pub fn until(mut self, cancelled: impl Future<Output = ()> + Send + Sync + 'static) -> Self {
        self.until = Some(Box::pin(cancelled));
        self
    }

    /// Keeps `hold` alive as long as the stream.
    pub fn hold(mut self, hold: impl Send + Sync + 'static) -> Self {
        self._hold = Some(Box::new(hold));
        self
    }

    /// The stream's id on its connection.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Items that arrived and were not read yet (never more than the window).
    pub fn queued(&self) -> usize {
        self.inbox.buffered()
    }

    /// Whether the stream has yielded its last item.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

impl Stream for RawStreaming {
    type Item = Result<Bytes, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        match this.inbox.poll_next(cx) {
            Poll::Ready(next) => {
                if next.grant > 0 {
                    this.peer.send_credit(this.id, next.grant);
                }
                if !matches!(next.item, Some(Ok(_))) {
                    this.done = true;
                    this.peer.receiver_gone(this.id, false);
                }
                Poll::Ready(next.item)
            }
            Poll::Pending => {
                let expired = this
                    .deadline
                    .as_mut()
                    .is_some_and(|d| d.as_mut().poll(cx).is_ready());
                let cancelled = !expired
                    && this
                        .until
                        .as_mut()
                        .is_some_and(|u| u.as_mut().poll(cx).is_ready());
                if !expired && !cancelled {
                    return Poll::Pending;
                }
                this.done = true;
                this.inbox.close();
                this.peer.receiver_gone(this.id, true);
                Poll::Ready(Some(Err(match expired {
                    true => Status::new(Code::DeadlineExceeded, "the stream's deadline passed"),
                    false => Status::new(
                        Code::Cancelled,
                        "the call this stream was made for was cancelled",
                    ),
                })))
            }
        }
    }
}

impl Drop for RawStreaming {
    fn drop(&mut self) {
        if !self.done {
            self.inbox.close();
            self.peer.receiver_gone(self.id, true);
        }
    }
}
