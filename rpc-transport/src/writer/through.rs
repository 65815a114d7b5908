//! A caller alone writes its frame through: the writer task is not woken.
//!
//! When the caller's call is the only one in flight on the client, on any
//! of its connections ([`FrameWriter::offer_alone`],
//! [`FrameWriter::push_alone`]; the count is `CallsInFlight`) there is no
//! batch to gather, and handing the frame to the writer task costs a wake-up
//! of that task — on a multi-threaded runtime often on the other thread, a
//! futex and a context switch per call. So when the writer task is parked on
//! an empty buffer, such a caller writes its frame to the socket itself
//! (non-blocking writes until the socket stops taking bytes, then a flush,
//! on its own thread, while it still holds the bytes in its cache). The
//! socket is shared behind a mutex that only one writer ever holds at a
//! time: a caller writes through only while the task is parked
//! with nothing queued, and marks the socket busy meanwhile, so the task
//! waits and frames queued by others go out after it, in order. Whatever the
//! socket does not take at once (it is full, or the write failed) is left
//! for the task, which writes it before anything queued later and meets any
//! error itself.
//!
//! A frame written through still counts as the start of a gathering batch
//! ([`FrameWriter::queued_frames`]) until the connection reads a frame
//! ([`FrameWriter::note_read`]): calls made together before any answer came
//! back — a burst — then join that connection's next write, as they would
//! have joined the batch had the first frame been queued.
//!
//! Only frames without a [`WriteAck`](super::WriteAck) are written through:
//! a `WriteMode::Sync` caller waits for its write anyway.

use std::task::{Context, Poll, Waker};

use bytes::{Buf, BytesMut};
use rpc_codec::{FrameKind, OutFrame};
use rpc_core::RpcError;
use std::sync::atomic::Ordering;

#[cfg(doc)]
use super::FrameWriter;
use super::{Offer, Shared};

impl Shared {
    /// Writes `frame` to the socket on the caller's thread, holding the
    /// write turn (`busy`); what the socket does not take now is left to the
    /// writer task (see the module docs).
    pub(super) fn write_through(
        &self,
        frame: &OutFrame,
        mut buf: BytesMut,
    ) -> Result<Offer, RpcError> {
        let encoded = frame.encode(&mut buf, self.max_frame);
        let mut written = 0;
        let mut flushed = false;
        if encoded.is_ok() {
            self.through.fetch_add(1, Ordering::Relaxed);
            // A no-op waker: if the socket is not ready the writer task takes
            // over, and its own poll registers its own waker.
            let mut cx = Context::from_waker(Waker::noop());
            let mut sink = self.sink.lock();
            while written < buf.len() {
                match sink.as_mut().poll_write(&mut cx, &buf[written..]) {
                    Poll::Ready(Ok(n)) if n > 0 => written += n,
                    // Full, failed or closed: the task meets it itself.
                    _ => break,
                }
            }
            flushed = written == buf.len()
                && matches!(sink.as_mut().poll_flush(&mut cx), Poll::Ready(Ok(())));
        }
        let (writer, stopped) = {
            let mut q = self.queue.lock();
            q.busy = false;
            let stopped = q.stopped;
            if encoded.is_err() || written == buf.len() || stopped {
                // Out, or never to go: the buffer is kept for the next one,
                // and a flush still owed is the task's.
                q.flush_owed |= encoded.is_ok() && !flushed && !stopped;
                buf.clear();
                if buf.capacity() <= self.high_water {
                    q.through_buf = buf;
                }
            } else {
                if written == 0 && frame.kind == FrameKind::Request {
                    // Not a byte of it left: if the connection ends now,
                    // its call was never sent.
                    q.ids.push(frame.request_id);
                }
                buf.advance(written);
                q.carry = buf;
            }
            // Frames queued meanwhile, a remainder or a flush: the task's turn.
            let writer = if q.has_work() { q.writer.take() } else { None };
            (writer, stopped)
        };
        if let Some(writer) = writer {
            writer.wake();
        }
        encoded?;
        if written == 0 && stopped {
            // The writer stopped before a byte of it left: never sent, and
            // the caller learns so now (its call may be retried).
            return Err(self.closed_error());
        }
        Ok(Offer::Queued)
    }
}
