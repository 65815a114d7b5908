//! [`Outbox`]: a connection's write side — its answers encoded back to back
//! into one buffer and written with one `write` per batch.
//!
//! # Why the server has a writer of its own
//!
//! A client needs a separate writer task (rpc-transport's), because many
//! caller tasks share one connection. A server connection has one producer of
//! answers — its own task — so the task encodes every answer of a batch here
//! and writes the lot with one non-blocking `write` before it goes back to the
//! socket: no channel send, no second task to wake, no yield per answer.
//! Answers the socket does not take now stay here, and the task waits for the
//! socket to become writable ([`Outbox::writable`]) in the same `select!`
//! that waits for input.
//!
//! # Invariants
//!
//! - The buffer is written from the front; what the socket does not take
//!   stays for the next attempt. Once written out it is cleared and reused, so
//!   a busy connection encodes its answers without allocating — up to
//!   twice the high-water mark, what a buffer filled to the mark grows to —
//!   and one that grew further for a burst of large answers gives the
//!   memory back.
//! - The high-water mark ([`Outbox::has_room`], `4 × max_batch_bytes`) is the
//!   connection's backpressure: past it the task stops reading requests, so a
//!   client that does not read its answers stalls only itself.
//! - The frame budget of a large request is held until its answer is written
//!   ([`Outbox::hold`]), so large requests cannot pile up answers beyond the
//!   budget — but not forever: a client that takes no answer byte for
//!   [`BUDGET_STALL`] (or half the idle timeout, when shorter) gives it back
//!   ([`Outbox::budget_stall`]), because the budget is shared by every
//!   connection.
//!
//! The hot methods are `#[inline]`: the connection loop calls them per answer
//! and per batch, from another module.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use rpc_codec::OutFrame;
use rpc_transport::{IoCounters, Reserved, TransportConfig};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::frame::encode_answer;
use super::pool_answers::PoolAnswers;

/// How long a client may leave answers unread while their requests hold part
/// of the frame budget (at most; half the idle timeout when shorter); then the
/// budget goes back to the other connections.
pub(crate) const BUDGET_STALL: Duration = Duration::from_secs(10);

/// The connection's write side: answers encoded back to back into one buffer,
/// written with one `write` per batch (see the module docs).
pub(crate) struct Outbox<W> {
    io: W,
    buf: BytesMut,
    /// The frame budget of the large requests whose answers are in `buf`,
    /// given back once `buf` is written out.
    held: Vec<Reserved>,
    /// While `held` is not empty: when the client last took answer bytes.
    held_progress: Option<tokio::time::Instant>,
    /// [`BUDGET_STALL`], or half the idle timeout when that is shorter (a
    /// connection not read for the idle timeout is closed anyway).
    budget_stall: Duration,
    /// Bytes at the front of `buf` already written.
    written: usize,
    /// Every byte is written, but the stream still holds some until a flush
    /// completes (TLS over a full socket; a plain socket never does).
    unflushed: bool,
    max_frame: usize,
    max_batch: usize,
    counters: Arc<IoCounters>,
}

/// The high-water mark of an outbox made with `transport`: unwritten bytes
/// past which its connection stops reading ([`Outbox::high_water`]).
pub(crate) fn high_water_mark(transport: &TransportConfig) -> usize {
    high_water_of(transport.max_batch_bytes.max(1))
}

/// The high-water mark for batches of `max_batch` bytes.
const fn high_water_of(max_batch: usize) -> usize {
    4 * max_batch
}

impl<W: AsyncWrite + Unpin> Outbox<W> {
    pub fn new(io: W, transport: &TransportConfig, counters: Arc<IoCounters>) -> Self {
        Outbox {
            io,
            // Empty until the first answer: an idle connection costs nothing here.
            buf: BytesMut::new(),
            held: Vec::new(),
            held_progress: None,
            budget_stall: BUDGET_STALL.min(transport.idle_timeout / 2),
            written: 0,
            unflushed: false,
            max_frame: transport.max_frame_size,
            max_batch: transport.max_batch_bytes.max(1),
            counters,
        }
    }

    /// Encodes `frame` at the end of the outbox.
    #[inline]
    pub fn push(&mut self, frame: OutFrame) {
        encode_answer(&mut self.buf, &frame, self.max_frame);
    }

    /// Holds a large request's budget until the answers now in the outbox
    /// are written.
    #[inline]
    pub fn hold(&mut self, reserved: Option<Reserved>) {
        if let Some(reserved) = reserved {
            self.held.push(reserved);
            self.held_progress
                .get_or_insert_with(tokio::time::Instant::now);
        }
    }

    /// When the budget held for unwritten answers is given back anyway: the
    /// client has taken no answer byte for [`BUDGET_STALL`] (or half the idle
    /// timeout, when shorter). `None` while
    /// nothing is held or nothing waits to be written.
    #[inline]
    pub fn budget_stall(&self) -> Option<tokio::time::Instant> {
        if self.held.is_empty() || self.is_empty() {
            return None;
        }
        self.held_progress.map(|at| at + self.budget_stall)
    }

    /// Gives the held budget back (the answers' memory stays, bounded by this
    /// connection's high-water mark): a client that does not read must not
    /// hold the budget every other connection shares.
    pub fn give_back_budget(&mut self) -> usize {
        self.held_progress = None;
        std::mem::take(&mut self.held).len()
    }

    /// Gives back the buffer's memory when everything is written (an idle
    /// connection's tidy); the next answer allocates again.
    pub fn release(&mut self) {
        if self.is_empty() {
            self.buf = BytesMut::new();
            self.written = 0;
            self.held = Vec::new();
            self.held_progress = None;
        }
    }

    /// Moves the answers the worker pool has encoded so far to the end of the
    /// outbox (when the outbox is empty, the two buffers trade places).
    #[inline]
    pub fn take_pooled(&mut self, pooled: &PoolAnswers) {
        if self.all_written() {
            self.buf.clear();
            self.written = 0;
        }
        let high_water = self.high_water();
        pooled.take(&mut self.buf, &mut self.held, high_water);
        if !self.held.is_empty() {
            self.held_progress
                .get_or_insert_with(tokio::time::Instant::now);
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.all_written() && !self.unflushed
    }

    /// Whether `buf` has been handed to the stream entirely (it may still
    /// need a flush).
    #[inline]
    fn all_written(&self) -> bool {
        self.written == self.buf.len()
    }

    /// Whether more input may be handled: the unwritten answers are below the
    /// high-water mark.
    #[inline]
    pub fn has_room(&self) -> bool {
        self.buf.len() - self.written < self.high_water()
    }

    /// Unwritten bytes past which the connection stops reading
    /// ([`high_water_mark`] of its settings).
    #[inline]
    pub fn high_water(&self) -> usize {
        high_water_of(self.max_batch)
    }

    /// Writes until the outbox is empty or the socket would block.
    #[inline]
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        while !self.all_written() {
            match Pin::new(&mut self.io).poll_write(cx, &self.buf[self.written..]) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err("write failed: the socket accepted no bytes".into()))
                }
                Poll::Ready(Ok(n)) => {
                    self.written += n;
                    self.counters.add_out(n as u64);
                    if !self.held.is_empty() {
                        self.held_progress = Some(tokio::time::Instant::now());
                    }
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(format!("write failed: {e}"))),
                Poll::Pending => return Poll::Pending,
            }
        }
        // Everything written; TLS may still hold bytes until flushed, and
        // until then the outbox is not empty: the connection must come back
        // to flush it, or the end of its answers would wait for the next.
        match Pin::new(&mut self.io).poll_flush(cx) {
            Poll::Ready(Err(e)) => return Poll::Ready(Err(format!("flush failed: {e}"))),
            Poll::Ready(Ok(())) => self.unflushed = false,
            Poll::Pending => {
                self.unflushed = true;
                return Poll::Pending;
            }
        }
        // Filled to the high-water mark, the buffer grows to twice that
        // (`Vec`'s doubling): a busy connection keeps that much, since
        // allocating it anew each turn costs a page fault per 4 KiB (it is
        // a mapping of its own, see `rpc_transport::allocator`). Only what
        // a burst of larger answers grew it to is given back at once.
        if self.buf.capacity() > 2 * self.high_water() {
            self.buf = BytesMut::new();
        } else {
            self.buf.clear();
        }
        self.written = 0;
        self.held.clear();
        self.held_progress = None;
        Poll::Ready(Ok(()))
    }

    /// Writes what the socket takes now, without waiting (a pending write
    /// leaves the rest for [`writable`](Self::writable)).
    #[inline]
    pub async fn write_now(&mut self) -> Result<(), String> {
        if self.is_empty() {
            return Ok(());
        }
        std::future::poll_fn(|cx| match self.poll_write_out(cx) {
            Poll::Pending => Poll::Ready(Ok(())),
            ready => ready,
        })
        .await
    }

    /// Completes when the socket has taken the whole outbox (or failed).
    #[inline]
    pub async fn writable(&mut self) -> Result<(), String> {
        std::future::poll_fn(|cx| self.poll_write_out(cx)).await
    }

    /// Writes what is left, then shuts the write side down.
    pub async fn finish(&mut self) -> Result<(), String> {
        self.writable().await?;
        self.io
            .shutdown()
            .await
            .map_err(|e| format!("shutdown failed: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use rpc_codec::FrameCodec;
    use tokio::io::AsyncReadExt;
    use tokio_util::codec::Decoder;

    fn transport(max_batch_bytes: usize) -> TransportConfig {
        TransportConfig {
            max_batch_bytes,
            ..TransportConfig::default()
        }
    }

    fn answer(id: u64, len: usize) -> OutFrame {
        OutFrame::response(id, 0, Bytes::from(vec![7u8; len]))
    }

    #[tokio::test]
    async fn a_batch_goes_out_in_order_and_what_the_socket_refuses_waits() {
        // A pipe that takes 64 bytes at a time: the rest of the batch stays.
        let (server, mut client) = tokio::io::duplex(64);
        let counters = Arc::new(IoCounters::default());
        let mut outbox = Outbox::new(server, &transport(1 << 16), counters.clone());
        assert!(outbox.is_empty());
        for id in 1..=3 {
            outbox.push(answer(id, 40));
        }
        outbox.write_now().await.unwrap();
        assert!(!outbox.is_empty(), "the pipe took only part of the batch");
        let reading = tokio::spawn(async move {
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.unwrap();
            got
        });
        outbox.finish().await.unwrap();
        assert!(outbox.is_empty());
        let got = reading.await.unwrap();
        assert_eq!(counters.bytes_out(), got.len() as u64);
        let mut buf = BytesMut::from(&got[..]);
        let mut codec = FrameCodec::default();
        let mut ids = Vec::new();
        while let Some(frame) = codec.decode(&mut buf).unwrap() {
            ids.push(frame.header.request_id);
        }
        assert_eq!(ids, vec![1, 2, 3]);
    }

    #[tokio::test]
    async fn past_the_high_water_mark_it_has_no_room_until_written() {
        let (server, mut client) = tokio::io::duplex(1 << 16);
        let mut outbox = Outbox::new(server, &transport(100), Arc::new(IoCounters::default()));
        assert!(outbox.has_room());
        outbox.push(answer(1, 4 * 100));
        assert!(
            !outbox.has_room(),
            "more than 4 × max_batch_bytes unwritten"
        );
        outbox.writable().await.unwrap();
        assert!(outbox.has_room());
        let mut sink = vec![0u8; 1 << 16];
        assert!(client.read(&mut sink).await.unwrap() > 400);
    }

    /// Takes every byte at once but, like TLS over a full socket, holds them
    /// until a flush completes — and the first flush cannot.
    #[derive(Default)]
    struct HoldsUntilFlushed {
        held: Vec<u8>,
        flushed: Vec<u8>,
        flush_attempts: usize,
    }

    impl AsyncWrite for HoldsUntilFlushed {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            self.held.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            self.flush_attempts += 1;
            if self.flush_attempts == 1 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let held = std::mem::take(&mut self.held);
            self.flushed.extend_from_slice(&held);
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn an_outbox_whose_flush_is_pending_is_not_empty() {
        let io = HoldsUntilFlushed::default();
        let mut outbox = Outbox::new(io, &transport(1 << 16), Arc::new(IoCounters::default()));
        outbox.push(answer(1, 40));
        outbox.write_now().await.unwrap();
        assert!(
            !outbox.is_empty(),
            "written but not flushed: the connection must come back for it"
        );
        assert!(outbox.io.flushed.is_empty());
        outbox.writable().await.unwrap();
        assert!(outbox.is_empty());
        assert!(outbox.io.held.is_empty());
        assert!(!outbox.io.flushed.is_empty(), "the answer went out");
    }
}
