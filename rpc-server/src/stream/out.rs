//! [`StreamOut`]: where a server connection's streams put their frames.
//!
//! A connection task owns its socket and writes every frame itself (see
//! `reply::outbox`). A stream's handler runs on that task, but the sink it
//! sends into may go anywhere — a handler may hand it to a task or thread
//! of its own. This is the hand-over between them: frames queued under one
//! short (and, from the connection's own task, uncontended) lock, and the
//! ids of the streams that ended, with the connection task woken when it
//! waits. Nothing here is bounded by a count because everything is bounded
//! by credit: a data frame is queued only with a unit of credit in hand,
//! and every control frame answers data or opens or ends a stream.

use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use parking_lot::Mutex;
use rpc_codec::{FrameKind, OutFrame};
use rpc_core::stream::StreamPeer;
use rpc_core::{Code, Status};

/// One connection's queue of stream frames.
#[derive(Default)]
pub(crate) struct StreamOut {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    frames: Vec<OutFrame>,
    /// Streams whose run ended: the connection forgets them.
    ended: Vec<u64>,
    /// The connection task, when it waits for news.
    waker: Option<Waker>,
    /// The connection is gone: frames are dropped.
    closed: bool,
}

impl StreamOut {
    /// Queues one frame for the connection to write.
    pub fn push_frame(&self, frame: OutFrame) -> Result<(), Status> {
        let waker = {
            let mut st = self.state.lock();
            if st.closed {
                return Err(Status::new(
                    Code::Cancelled,
                    "the stream's connection is closed",
                ));
            }
            st.frames.push(frame);
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Stream `id`'s run has ended (after queueing its last frame).
    pub fn ended(&self, id: u64) {
        let waker = {
            let mut st = self.state.lock();
            st.ended.push(id);
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Ready when frames or ends are waiting; otherwise `cx` is woken by the next.
    pub fn poll_news(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.state.lock();
        if !st.frames.is_empty() || !st.ended.is_empty() {
            return Poll::Ready(());
        }
        if !st.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            st.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Moves the waiting frames and ended ids out (the vectors trade places).
    pub fn take(&self, frames: &mut Vec<OutFrame>, ended: &mut Vec<u64>) {
        let mut st = self.state.lock();
        std::mem::swap(&mut st.frames, frames);
        std::mem::swap(&mut st.ended, ended);
    }

    /// The connection is gone: later frames are dropped, senders fail.
    pub fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        st.frames.clear();
        st.waker = None;
    }
}

impl StreamPeer for StreamOut {
    fn send_item(&self, id: u64, serializer: u8, body: Bytes) -> Result<(), Status> {
        self.push_frame(OutFrame::stream_data(id, serializer, body))
    }

    fn send_end(&self, id: u64, serializer: u8, end: Result<(), Status>) {
        let _ = self.push_frame(OutFrame::stream_end(id, serializer, &end));
    }

    fn send_credit(&self, id: u64, n: u32) {
        let _ = self.push_frame(OutFrame::credit(id, n));
    }

    fn receiver_gone(&self, id: u64, early: bool) {
        // The handler stopped reading its caller's items: the caller may
        // stop sending them (the call itself goes on).
        if early {
            let _ = self.push_frame(OutFrame::control(FrameKind::Cancel, id));
        }
    }
}
