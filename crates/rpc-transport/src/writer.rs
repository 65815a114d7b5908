//! [`FrameWriter`]: the one task that writes a connection's frames.
//!
//! Every frame for a connection — requests, responses, pings — goes through a
//! bounded queue to a single writer task. The task takes the first queued frame,
//! then keeps taking whatever else is already queued (without waiting) until the
//! queue is empty or the batch reaches `max_batch_bytes`, encodes the lot into one
//! buffer and issues one `write`. Under load that is one syscall for many calls;
//! with a single caller it is one syscall per call with no added delay beyond one
//! scheduler pass (the writer yields once before draining, so that callers woken
//! in the same tick can queue their frames into the same batch).
//!
//! A `WriteMode::Sync` caller attaches a [`WriteAck`]; it is completed after the
//! batch holding its frame has been written, or with the write error. The queue is
//! bounded (`write_queue_capacity`), so a stalled peer pushes back on its callers
//! instead of growing memory.

use std::sync::Arc;

use bytes::BytesMut;
use rpc_codec::OutFrame;
use rpc_core::RpcError;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use tokio::sync::{mpsc, oneshot, Notify};
use tracing::debug;

use crate::{CloseSignal, TransportConfig};

/// Completed once the frame it travels with has been written (or failed to be).
pub type WriteAck = oneshot::Sender<Result<(), RpcError>>;

/// A frame queued for writing, with an optional write acknowledgement.
#[derive(Debug)]
pub struct Outbound {
    frame: OutFrame,
    ack: Option<WriteAck>,
}

impl Outbound {
    /// A frame nobody waits on.
    pub fn frame(frame: OutFrame) -> Self {
        Outbound { frame, ack: None }
    }

    /// The same, with `ack` completed once it is written (`WriteMode::Sync`).
    pub fn with_ack(self, ack: WriteAck) -> Self {
        Outbound {
            ack: Some(ack),
            ..self
        }
    }
}

/// The bound of a writer's queue, kept beside an unbounded channel.
///
/// tokio's bounded channel takes a lock to hand each permit back; this keeps
/// the same bound with one atomic add per frame and one subtraction per batch.
/// Senders that find the queue full wait on `space`, which the writer signals
/// after a drain whenever someone is waiting.
#[derive(Debug)]
struct Bound {
    queued: AtomicUsize,
    capacity: usize,
    waiters: AtomicUsize,
    space: Notify,
}

impl Bound {
    /// Takes a slot if one is free now.
    fn try_take(&self) -> bool {
        if self.queued.fetch_add(1, Ordering::SeqCst) < self.capacity {
            return true;
        }
        self.queued.fetch_sub(1, Ordering::SeqCst);
        false
    }

    /// Takes a slot, waiting for the writer to drain when the queue is full.
    async fn take(&self) {
        while !self.try_take() {
            self.waiters.fetch_add(1, Ordering::SeqCst);
            let notified = self.space.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Re-check after registering: a drain in between has notified us.
            if self.queued.load(Ordering::SeqCst) >= self.capacity {
                notified.await;
            }
            self.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Gives back `n` slots after a drain.
    fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        self.queued.fetch_sub(n, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.space.notify_waiters();
        }
    }
}

/// Handle to a connection's writer task. Cheap to clone.
#[derive(Debug, Clone)]
pub struct FrameWriter {
    tx: mpsc::UnboundedSender<Outbound>,
    bound: Arc<Bound>,
    close: Arc<CloseSignal>,
    peer: Arc<str>,
}

impl FrameWriter {
    /// Spawns the writer task for `io`. It stops when `close` fires, when every
    /// handle is dropped (after writing what is queued), or on a write error
    /// (which it records in `close`).
    pub fn spawn<W>(
        io: W,
        config: &TransportConfig,
        close: Arc<CloseSignal>,
        peer: Arc<str>,
    ) -> FrameWriter
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::spawn_counted(io, config, close, peer, None)
    }

    /// Like [`spawn`](Self::spawn), also counting every byte written into `counters`.
    pub fn spawn_counted<W>(
        io: W,
        config: &TransportConfig,
        close: Arc<CloseSignal>,
        peer: Arc<str>,
        counters: Option<Arc<crate::IoCounters>>,
    ) -> FrameWriter
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        let bound = Arc::new(Bound {
            queued: AtomicUsize::new(0),
            capacity: config.write_queue_capacity.max(1),
            waiters: AtomicUsize::new(0),
            space: Notify::new(),
        });
        let task = WriterTask {
            io,
            rx,
            bound: bound.clone(),
            taken: 0,
            single_streak: 0,
            batches: 0,
            buf: BytesMut::with_capacity(8 * 1024),
            acks: Vec::new(),
            max_batch: config.max_batch_bytes,
            max_frame: config.max_frame_size,
            close: close.clone(),
            peer: peer.clone(),
            counters,
        };
        tokio::spawn(task.run());
        FrameWriter {
            tx,
            bound,
            close,
            peer,
        }
    }

    /// Queues a frame, waiting for room in the queue.
    pub async fn send(&self, item: Outbound) -> Result<(), RpcError> {
        if self.tx.is_closed() {
            return Err(self.closed_error());
        }
        self.bound.take().await;
        self.push(item)
    }

    /// Queues a frame if there is room in the queue now; hands it back when the
    /// queue is full, so the caller can wait (with [`send`](Self::send)) without
    /// having paid for a timer on the common path.
    // Handing the frame back by value is the point (it was moved in).
    #[allow(clippy::result_large_err)]
    pub fn offer(&self, item: Outbound) -> Result<Result<(), RpcError>, Outbound> {
        if self.bound.try_take() {
            Ok(self.push(item))
        } else {
            Err(item)
        }
    }

    /// Queues a frame if there is room now (heartbeats, best-effort frames).
    pub fn try_send(&self, item: Outbound) -> Result<(), RpcError> {
        if !self.bound.try_take() {
            return Err(RpcError::Write {
                peer: self.peer.to_string(),
                reason: "write queue full".into(),
            });
        }
        self.push(item)
    }

    fn push(&self, item: Outbound) -> Result<(), RpcError> {
        self.tx.send(item).map_err(|_| {
            self.bound.release(1);
            self.closed_error()
        })
    }

    /// The connection's close signal.
    pub fn close_signal(&self) -> &Arc<CloseSignal> {
        &self.close
    }

    /// The remote address this writer writes to.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    fn closed_error(&self) -> RpcError {
        if self.close.is_closed() {
            self.close.error(&self.peer)
        } else if let Some(reason) = self.close.write_error() {
            RpcError::Write {
                peer: self.peer.to_string(),
                reason: reason.to_owned(),
            }
        } else {
            RpcError::ConnectionClosed {
                peer: self.peer.to_string(),
                reason: "writer stopped".into(),
            }
        }
    }
}

struct WriterTask<W> {
    io: W,
    rx: mpsc::UnboundedReceiver<Outbound>,
    bound: Arc<Bound>,
    /// Frames taken off the queue since the last release of their slots.
    taken: usize,
    /// Yields in a row after which the batch still held a single frame.
    single_streak: u32,
    /// Batches written, for the periodic coalescing probe.
    batches: u32,
    buf: BytesMut,
    acks: Vec<WriteAck>,
    max_batch: usize,
    max_frame: usize,
    close: Arc<CloseSignal>,
    peer: Arc<str>,
    counters: Option<Arc<crate::IoCounters>>,
}

impl<W: AsyncWrite + Unpin> WriterTask<W> {
    async fn run(mut self) {
        let close = self.close.clone();
        // The write loop is polled first; the close waiter (whose poll takes a
        // lock) only when the loop has to wait.
        tokio::select! {
            biased;
            result = self.write_loop() => {
                match result {
                    Ok(()) => {
                        let _ = self.io.shutdown().await;
                        close.close("connection finished: every handle was dropped");
                    }
                    // Keep the connection open for reading: answers to calls the
                    // peer already handled may still be in the receive buffer.
                    Err(reason) => close.fail_writes(reason),
                }
            }
            _ = close.closed() => {}
        }
        // Whatever is still queued will never be written.
        self.rx.close();
        let peer = self.peer.clone();
        let err = || RpcError::Write {
            peer: peer.to_string(),
            reason: format!(
                "connection closed before the frame was written: {}",
                close.reason()
            ),
        };
        for ack in self.acks.drain(..) {
            let _ = ack.send(Err(err()));
        }
        while let Ok(item) = self.rx.try_recv() {
            if let Some(ack) = item.ack {
                let _ = ack.send(Err(err()));
            }
        }
    }

    /// Writes batches until every sender is gone (Ok) or a write fails (Err).
    async fn write_loop(&mut self) -> Result<(), String> {
        while let Some(first) = self.rx.recv().await {
            self.push(first);
            // The first send woke us, and tokio runs a woken task right after its
            // waker yields — before any other caller had a chance to queue. One
            // yield lets every runnable caller enqueue first, so the drain below
            // finds a batch instead of a single frame (measured: ~1 write per call
            // without it). With a single caller it costs one scheduler pass.
            // With a single caller there is nothing to wait for: after 8 yields in
            // a row that gathered nothing, the yield is skipped, except on every
            // 8th batch, which probes whether callers have become concurrent.
            self.batches = self.batches.wrapping_add(1);
            let yielded = self.rx.is_empty() && (self.single_streak < 8 || self.batches % 8 == 0);
            if yielded {
                tokio::task::yield_now().await;
            }
            while self.buf.len() < self.max_batch {
                match self.rx.try_recv() {
                    Ok(item) => self.push(item),
                    Err(_) => break,
                }
            }
            // The batch is encoded: its queue slots are free while we write.
            let frames = std::mem::take(&mut self.taken);
            if frames > 1 {
                self.single_streak = 0;
            } else if yielded {
                self.single_streak = self.single_streak.saturating_add(1);
            }
            self.bound.release(frames);
            if !self.buf.is_empty() {
                if let Err(e) = self.io.write_all(&self.buf).await {
                    let reason = format!("write failed: {e}");
                    for ack in self.acks.drain(..) {
                        let _ = ack.send(Err(RpcError::Write {
                            peer: self.peer.to_string(),
                            reason: reason.clone(),
                        }));
                    }
                    return Err(reason);
                }
                if let Some(c) = &self.counters {
                    c.add_out(self.buf.len() as u64);
                }
            }
            for ack in self.acks.drain(..) {
                let _ = ack.send(Ok(()));
            }
            // Do not keep a huge batch buffer around after a burst of large frames.
            if self.buf.capacity() > 4 * self.max_batch {
                self.buf = BytesMut::with_capacity(8 * 1024);
            } else {
                self.buf.clear();
            }
        }
        Ok(())
    }

    fn push(&mut self, item: Outbound) {
        self.taken += 1;
        let encoded = item
            .frame
            .encode(&mut self.buf, self.max_frame)
            .map_err(|e| {
                debug!(error = %e, request_id = item.frame.request_id, "frame not written");
                e
            });
        if let Some(ack) = item.ack {
            match encoded {
                Ok(()) => self.acks.push(ack),
                Err(e) => {
                    let _ = ack.send(Err(e));
                }
            }
        }
    }
}
