//! [`FrameWriter`]: a connection's outgoing bytes and the one task that writes them.
//!
//! # Shape
//!
//! Callers encode their frame **themselves**, straight into the connection's
//! write buffer (a `BytesMut` behind a mutex), and the writer task swaps the
//! whole buffer out and writes it with one `write`. Under load that is one
//! syscall for every frame queued while the previous write ran; with a single
//! caller it is one syscall per call.
//!
//! Encoding on the caller's side, rather than handing an `OutFrame` to the task
//! through a channel, is what profiling asked for: the channel cost a node write
//! and read per frame, the frame (a dozen words) was moved twice, and the body —
//! serialized a moment before by the same caller, still in its cache — was copied
//! later by another task. Now queueing a frame is one uncontended lock, one copy
//! of the bytes, and a wake-up of the writer only when it sleeps on an empty
//! buffer.
//!
//! # Coalescing
//!
//! The writer is woken by the first frame into an empty buffer, and tokio runs a
//! woken task right after its waker yields — before any other caller woken in
//! the same tick had a chance to queue. So the writer yields once before taking
//! the buffer, letting every runnable caller append first (measured: ~1 write per
//! call without it). With a single caller there is nothing to wait for: after 8
//! yields in a row that gathered nothing more, the yield is skipped, except on
//! every 8th batch, which probes whether callers have become concurrent.
//!
//! # A caller alone writes through
//!
//! The client's only call in flight writes its frame to the socket itself
//! while the writer task is parked on an empty buffer (`through.rs`): one
//! wake-up fewer per call, and the task still writes whatever is left.
//!
//! # Bounds and acknowledgements
//!
//! The buffer holds at most `write_queue_capacity` frames and `16 ×
//! max_batch_bytes` bytes (one frame larger than that is taken alone); a
//! caller that finds it full gets [`Offer::Full`] back and waits with
//! [`FrameWriter::send`] until the writer has taken the buffer, so a stalled
//! peer pushes back on its callers instead of growing memory. A `WriteMode::Sync` caller attaches a [`WriteAck`],
//! completed once the write holding its frame has finished, or with its error.
//!
//! # What never left
//!
//! The buffer also lists the request ids of the requests in it. A frame still
//! in the buffer when the connection ends was never handed to the socket, so
//! the server cannot have run it: [`FrameWriter::stop_unsent`] stops the writer
//! and returns those ids, and the connection fails their calls with
//! `RpcError::NotSent` (retried by default) rather than `ConnectionClosed`
//! (which may have run). Once the writer task has taken a batch, its frames
//! count as sent, even if the write then fails part-way.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};

use bytes::BytesMut;
use parking_lot::Mutex;
use rpc_codec::{FrameKind, OutFrame};
use rpc_core::RpcError;
use tokio::io::AsyncWrite;
use tokio::sync::{oneshot, Notify};

use crate::{CloseSignal, TransportConfig};

/// Completed once the frame it travels with has been written (or failed to be).
pub type WriteAck = oneshot::Sender<Result<(), RpcError>>;

/// What [`FrameWriter::offer`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Encoded into the write buffer; the writer will write it.
    Queued,
    /// The buffer is at its bound (frames or bytes): nothing was queued.
    Full,
}

/// The frames waiting to be written, encoded.
#[derive(Debug)]
struct Queue {
    buf: BytesMut,
    /// Frames in `buf`, against the bound.
    frames: usize,
    /// Acknowledgements of the `WriteMode::Sync` frames in `buf`.
    acks: Vec<WriteAck>,
    /// Request ids of the requests in `buf` (what never left, if the
    /// connection ends now).
    ids: Vec<u64>,
    /// The writer task, parked on an empty buffer.
    writer: Option<Waker>,
    /// Every [`FrameWriter`] handle is gone: write what is queued, then stop.
    handles_gone: bool,
    /// The writer task has ended; nothing queued now would ever be written.
    stopped: bool,
    /// A caller is writing its frame through (the writer task waits).
    busy: bool,
    /// What a caller's write-through left unwritten: the writer task writes
    /// it before `buf`.
    carry: BytesMut,
    /// The bytes a write-through left in the stream's own buffer (TLS)
    /// still need a flush, which the writer task does.
    flush_owed: bool,
    /// The buffer a caller writing through encodes into (kept for reuse).
    through_buf: BytesMut,
}

impl Queue {
    /// Whether the writer task has something to write.
    fn has_work(&self) -> bool {
        self.frames > 0 || !self.carry.is_empty() || self.flush_owed
    }
}

/// The socket's write half, shared by the writer task and a caller writing
/// through; only the holder of the write turn (see the module docs) locks it.
struct Sink(Mutex<Pin<Box<dyn AsyncWrite + Send>>>);

impl Sink {
    fn lock(&self) -> parking_lot::MutexGuard<'_, Pin<Box<dyn AsyncWrite + Send>>> {
        self.0.lock()
    }

    /// Writes all of `buf`, waiting for the socket as often as it is full
    /// (the writer task's writes). The lock is held for one `poll_write` at
    /// a time: no caller writes through meanwhile (the task is not parked),
    /// so it is never contended for long.
    async fn write_all(&self, buf: &[u8]) -> std::io::Result<()> {
        let mut written = 0;
        while written < buf.len() {
            let n = poll_fn(|cx| self.lock().as_mut().poll_write(cx, &buf[written..])).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            written += n;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sink")
    }
}

/// What the handles and the writer task share.
#[derive(Debug)]
struct Shared {
    queue: Mutex<Queue>,
    capacity: usize,
    /// Bytes the buffer may hold: `16 × max_batch_bytes` (4 MiB by default,
    /// room for 100 calls of 10 KiB in flight with margin).
    high_water: usize,
    max_frame: usize,
    /// `Queue::frames`, readable without the lock: how many frames are
    /// gathering for the next write (see [`FrameWriter::queued_frames`]).
    queued: AtomicUsize,
    /// Frames written through since the task last took a batch or the
    /// connection last read a frame: they count as gathering for
    /// [`FrameWriter::queued_frames`] (see the module docs).
    through: AtomicUsize,
    /// Callers waiting for room, and where they wait.
    waiters: AtomicUsize,
    space: Notify,
    close: Arc<CloseSignal>,
    peer: Arc<str>,
    sink: Sink,
}

/// How a frame is offered: within the buffer's bounds or past them, and
/// whether its caller is alone on its client (and may write through).
#[derive(Debug, Clone, Copy)]
struct Terms {
    bounded: bool,
    alone: bool,
}

impl Terms {
    const BOUNDED: Terms = Terms {
        bounded: true,
        alone: false,
    };
}

impl Shared {
    /// Encodes `frame` into the buffer if it has room (and queues `ack` with it).
    fn offer(&self, frame: &OutFrame, ack: &mut Option<WriteAck>) -> Result<Offer, RpcError> {
        self.offer_within(frame, ack, Terms::BOUNDED)
    }

    /// [`offer`](Self::offer) on `terms`: past the buffer's bounds when not
    /// `bounded`; written through by the caller when `alone` and the writer
    /// task is parked on an empty buffer.
    fn offer_within(
        &self,
        frame: &OutFrame,
        ack: &mut Option<WriteAck>,
        terms: Terms,
    ) -> Result<Offer, RpcError> {
        let writer = {
            let mut q = self.queue.lock();
            if q.stopped {
                drop(q);
                return Err(self.closed_error());
            }
            // The writer task parked (its waker is left there only while it
            // waits) with nothing to write and nobody else writing (`busy`
            // and work pending also leave it parked): the turn is free.
            if terms.alone && ack.is_none() && q.writer.is_some() && !q.busy && !q.has_work() {
                q.busy = true;
                let buf = std::mem::take(&mut q.through_buf);
                drop(q);
                return self.write_through(frame, buf);
            }
            let bounded = terms.bounded;
            // Full at `capacity` frames, or at the byte high-water mark (a
            // frame larger than that alone is still taken into an empty buffer).
            if bounded
                && (q.frames >= self.capacity
                    || (q.frames > 0 && q.buf.len() + frame.encoded_len() > self.high_water))
            {
                // A full buffer gathers nothing more: no call should choose
                // this connection to join its batch (reset when it is taken).
                self.queued.store(usize::MAX, Ordering::Relaxed);
                return Ok(Offer::Full);
            }
            frame.encode(&mut q.buf, self.max_frame)?;
            q.frames += 1;
            if frame.kind == FrameKind::Request {
                q.ids.push(frame.request_id);
            }
            self.queued.store(q.frames, Ordering::Relaxed);
            if let Some(ack) = ack.take() {
                q.acks.push(ack);
            }
            q.writer.take()
        };
        // Outside the lock: the writer runs as soon as it is woken.
        if let Some(writer) = writer {
            writer.wake();
        }
        Ok(Offer::Queued)
    }

    /// Why a frame offered now cannot be queued: it never leaves, so the
    /// error says it was not sent.
    fn closed_error(&self) -> RpcError {
        self.close.not_sent_error(&self.peer, || {
            if self.close.is_closed() {
                format!("the connection closed ({})", self.close.reason())
            } else if let Some(reason) = self.close.write_error() {
                format!("an earlier write on the connection failed ({reason})")
            } else {
                "the connection's writer stopped".to_owned()
            }
        })
    }

    /// The error of a frame that was queued but never written.
    fn unsent_error(&self) -> RpcError {
        self.close.not_sent_error(&self.peer, || {
            format!(
                "the connection closed before the frame was written ({})",
                self.close.reason()
            )
        })
    }
}

/// Tells the writer task when the last handle is dropped.
#[derive(Debug)]
struct Handle(Arc<Shared>);

impl Drop for Handle {
    fn drop(&mut self) {
        let writer = {
            let mut q = self.0.queue.lock();
            q.handles_gone = true;
            q.writer.take()
        };
        if let Some(writer) = writer {
            writer.wake();
        }
    }
}

/// Handle to a connection's write buffer and writer task. Cheap to clone.
#[derive(Debug, Clone)]
pub struct FrameWriter {
    handle: Arc<Handle>,
}

impl FrameWriter {
    /// Spawns the writer task for `io`. It stops when `close` fires, when every
    /// handle is dropped (after writing what is queued), or on a write error
    /// (which it records in `close`).
    /// `capacity` is the most frames the buffer holds before callers wait.
    pub fn spawn<W>(
        io: W,
        config: &TransportConfig,
        capacity: usize,
        close: Arc<CloseSignal>,
        peer: Arc<str>,
    ) -> FrameWriter
    where
        W: AsyncWrite + Send + 'static,
    {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                buf: BytesMut::new(),
                frames: 0,
                acks: Vec::new(),
                ids: Vec::new(),
                writer: None,
                handles_gone: false,
                stopped: false,
                busy: false,
                carry: BytesMut::new(),
                flush_owed: false,
                through_buf: BytesMut::new(),
            }),
            capacity: capacity.max(1),
            high_water: 16 * config.max_batch_bytes.max(1),
            max_frame: config.max_frame_size,
            queued: AtomicUsize::new(0),
            through: AtomicUsize::new(0),
            waiters: AtomicUsize::new(0),
            space: Notify::new(),
            close,
            peer,
            sink: Sink(Mutex::new(Box::pin(io))),
        });
        let task = WriterTask {
            shared: shared.clone(),
            spare: BytesMut::new(),
            carry: BytesMut::new(),
            acks: Vec::new(),
            single_streak: 0,
            batches: 0,
        };
        tokio::spawn(task.run());
        FrameWriter {
            handle: Arc::new(Handle(shared)),
        }
    }

    fn shared(&self) -> &Shared {
        &self.handle.0
    }

    /// Queues `frame` if the buffer has room now; [`Offer::Full`] otherwise, so
    /// the caller can wait (with [`send`](Self::send)) without having paid for
    /// a timer on the common path. The frame is encoded here, by reference.
    pub fn offer(&self, frame: &OutFrame) -> Result<Offer, RpcError> {
        self.shared().offer(frame, &mut None)
    }

    /// [`offer`](Self::offer) by a caller whose call is the only one in
    /// flight on its client (on any of its connections, see
    /// [`CallsInFlight`](crate::CallsInFlight)): with the writer task parked on an empty
    /// buffer, the caller writes `frame` to the socket itself instead of
    /// waking the task (see the module docs).
    pub fn offer_alone(&self, frame: &OutFrame) -> Result<Offer, RpcError> {
        let terms = Terms {
            bounded: true,
            alone: true,
        };
        self.shared().offer_within(frame, &mut None, terms)
    }

    /// Queues `frame`, waiting for room in the buffer; `ack` (if any) is
    /// completed once the frame is written.
    pub async fn send(&self, frame: &OutFrame, ack: Option<WriteAck>) -> Result<(), RpcError> {
        let shared = self.shared();
        let mut ack = ack;
        loop {
            // Register before trying, so that a drain in between wakes us.
            let space = shared.space.notified();
            tokio::pin!(space);
            space.as_mut().enable();
            shared.waiters.fetch_add(1, Ordering::SeqCst);
            let offered = shared.offer(frame, &mut ack);
            if !matches!(offered, Ok(Offer::Full)) {
                shared.waiters.fetch_sub(1, Ordering::SeqCst);
                return offered.map(|_| ());
            }
            space.await;
            shared.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Queues `frame` now, past the buffer's bounds if need be: for the
    /// frames of streams, which are bounded by their credit instead (a data
    /// frame is only sent with credit in hand, a control frame answers data),
    /// and must not be lost to a full buffer — a lost credit grant would
    /// stall its stream for good.
    pub fn push(&self, frame: &OutFrame) -> Result<(), RpcError> {
        self.push_as(frame, false)
    }

    /// [`push`](Self::push) by a caller whose stream is the only call in
    /// flight on its client (it may write through, as with
    /// [`offer_alone`](Self::offer_alone)).
    pub fn push_alone(&self, frame: &OutFrame) -> Result<(), RpcError> {
        self.push_as(frame, true)
    }

    fn push_as(&self, frame: &OutFrame, alone: bool) -> Result<(), RpcError> {
        let terms = Terms {
            bounded: false,
            alone,
        };
        self.shared()
            .offer_within(frame, &mut None, terms)
            .map(|_| ())
    }

    /// Queues `frame` if there is room now (heartbeats, best-effort frames).
    pub fn try_send(&self, frame: &OutFrame) -> Result<(), RpcError> {
        match self.offer(frame)? {
            Offer::Queued => Ok(()),
            Offer::Full => Err(RpcError::Write {
                peer: self.shared().peer.to_string(),
                reason: "write queue full".into(),
            }),
        }
    }

    /// Frames queued and not yet taken by the writer task, plus those
    /// written through since the task's last batch or the connection's last
    /// read: a batch that is still gathering (a relaxed read, for heuristics
    /// such as choosing a connection whose next write a call can join).
    /// `usize::MAX` once the buffer has turned a frame away as full, until
    /// the writer takes it.
    pub fn queued_frames(&self) -> usize {
        let shared = self.shared();
        match shared.queued.load(Ordering::Relaxed) {
            usize::MAX => usize::MAX,
            queued => queued + shared.through.load(Ordering::Relaxed),
        }
    }

    /// The connection read a frame: calls made from here on answer what
    /// came back, so frames written through before it no longer count as a
    /// batch gathering (see the module docs).
    #[inline]
    pub fn note_read(&self) {
        let through = &self.shared().through;
        if through.load(Ordering::Relaxed) != 0 {
            through.swap(0, Ordering::Relaxed);
        }
    }

    /// Stops the writer for good and returns the request ids of the
    /// requests queued and not yet taken by a write: they never left, and
    /// never will. Their `WriteMode::Sync` callers get `NotSent` too.
    pub fn stop_unsent(&self) -> Vec<u64> {
        let shared = self.shared();
        let (ids, acks) = {
            let mut q = shared.queue.lock();
            q.stopped = true;
            q.buf = BytesMut::new();
            // A write-through's remainder will never be written either.
            q.carry = BytesMut::new();
            q.frames = 0;
            shared.queued.store(0, Ordering::Relaxed);
            (std::mem::take(&mut q.ids), std::mem::take(&mut q.acks))
        };
        shared.space.notify_waiters();
        for ack in acks {
            let _ = ack.send(Err(shared.unsent_error()));
        }
        ids
    }

    /// The connection's close signal.
    pub fn close_signal(&self) -> &Arc<CloseSignal> {
        &self.shared().close
    }

    /// The remote address this writer writes to.
    pub fn peer(&self) -> &str {
        &self.shared().peer
    }
}

struct WriterTask {
    shared: Arc<Shared>,
    /// The buffer being written; swapped with the queue's after each write.
    spare: BytesMut,
    /// A write-through's remainder, written before `spare`.
    carry: BytesMut,
    /// Acknowledgements of the frames in `spare`.
    acks: Vec<WriteAck>,
    /// Yields in a row after which the batch still held a single frame.
    single_streak: u32,
    /// Batches written, for the periodic coalescing probe.
    batches: u32,
}

impl WriterTask {
    async fn run(mut self) {
        let close = self.shared.close.clone();
        // The write loop is polled first; the close waiter only when the loop
        // has to wait, and then cheaply (see `ClosedWatch`).
        tokio::select! {
            biased;
            result = self.write_loop() => {
                match result {
                    Ok(()) => {
                        let sink = &self.shared.sink;
                        let _ = poll_fn(|cx| sink.lock().as_mut().poll_shutdown(cx)).await;
                        close.close("connection finished: every handle was dropped");
                    }
                    // Keep the connection open for reading: answers to calls the
                    // peer already handled may still be in the receive buffer.
                    Err(reason) => close.fail_writes(reason),
                }
            }
            _ = close.watch() => {}
        }
        // Whatever is still queued will never be written. Its request ids
        // stay listed for `stop_unsent`, so their calls learn they never left.
        let queued = {
            let mut q = self.shared.queue.lock();
            q.stopped = true;
            q.buf = BytesMut::new();
            // A write-through's remainder will never be written either.
            q.carry = BytesMut::new();
            q.frames = 0;
            self.shared.queued.store(0, Ordering::Relaxed);
            std::mem::take(&mut q.acks)
        };
        self.shared.space.notify_waiters();
        for ack in queued {
            let _ = ack.send(Err(self.shared.unsent_error()));
        }
        // The batch being written when the connection ended may have reached
        // the server.
        let reason = format!(
            "connection closed while the frame was being written: {}",
            close.reason()
        );
        for ack in self.acks.drain(..) {
            let _ = ack.send(Err(RpcError::Write {
                peer: self.shared.peer.to_string(),
                reason: reason.clone(),
            }));
        }
    }

    /// Takes the queued bytes into `spare` once there are some; false when every
    /// handle is gone and nothing is left to write.
    async fn take_batch(&mut self) -> bool {
        let shared = self.shared.clone();
        let work = poll_fn(|cx| {
            let mut q = shared.queue.lock();
            // While a caller writes through, its frame goes first: wait.
            if !q.busy {
                if q.has_work() {
                    return Poll::Ready(Some(q.frames));
                }
                if q.handles_gone {
                    return Poll::Ready(None);
                }
            }
            match &mut q.writer {
                Some(w) if w.will_wake(cx.waker()) => {}
                slot => *slot = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
        .await;
        let Some(frames) = work else {
            return false;
        };
        self.batches = self.batches.wrapping_add(1);
        let yielded = frames == 1 && (self.single_streak < 8 || self.batches % 8 == 0);
        if yielded {
            tokio::task::yield_now().await;
        }
        let frames = {
            let mut q = self.shared.queue.lock();
            std::mem::swap(&mut q.carry, &mut self.carry);
            // The flush owed is the one after this batch's write.
            q.flush_owed = false;
            std::mem::swap(&mut q.buf, &mut self.spare);
            std::mem::swap(&mut q.acks, &mut self.acks);
            // Taken for writing: from here on these frames count as sent.
            q.ids.clear();
            self.shared.queued.store(0, Ordering::Relaxed);
            self.shared.through.store(0, Ordering::Relaxed);
            std::mem::take(&mut q.frames)
        };
        // The batch is taken: its slots are free while it is written.
        if self.shared.waiters.load(Ordering::SeqCst) > 0 {
            self.shared.space.notify_waiters();
        }
        if frames > 1 {
            self.single_streak = 0;
        } else if yielded {
            self.single_streak = self.single_streak.saturating_add(1);
        }
        true
    }

    /// Writes batches until every handle is gone (Ok) or a write fails (Err).
    async fn write_loop(&mut self) -> Result<(), String> {
        while self.take_batch().await {
            // The flush matters under TLS: rustls may still hold the end of
            // the batch when the socket was full, and would keep it until the
            // next write (a plain socket's flush does nothing).
            let sink = &self.shared.sink;
            let written = match sink.write_all(&self.carry).await {
                Ok(()) => sink.write_all(&self.spare).await,
                Err(e) => Err(e),
            };
            let written = match written {
                Ok(()) => poll_fn(|cx| sink.lock().as_mut().poll_flush(cx)).await,
                Err(e) => Err(e),
            };
            if let Err(e) = written {
                let reason = format!("write failed: {e}");
                for ack in self.acks.drain(..) {
                    let _ = ack.send(Err(RpcError::Write {
                        peer: self.shared.peer.to_string(),
                        reason: reason.clone(),
                    }));
                }
                return Err(reason);
            }
            for ack in self.acks.drain(..) {
                let _ = ack.send(Ok(()));
            }
            // Do not keep a huge buffer around after a burst of large frames.
            if self.spare.capacity() > self.shared.high_water {
                self.spare = BytesMut::new();
            } else {
                self.spare.clear();
            }
            self.carry = BytesMut::new();
        }
        Ok(())
    }
}

mod through;

#[cfg(test)]
mod tests;
