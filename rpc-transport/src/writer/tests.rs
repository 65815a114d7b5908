//! Tests of the writer.

use super::*;
use crate::ClientTransport;
use std::task::Context;
use tokio::io::AsyncReadExt;

/// A writer over `io` holding at most `capacity` frames, default settings otherwise.
fn spawn<W: AsyncWrite + Unpin + Send + 'static>(
    io: W,
    capacity: usize,
    close: Arc<CloseSignal>,
    peer: &str,
) -> FrameWriter {
    FrameWriter::spawn(
        io,
        &TransportConfig::default(),
        capacity,
        close,
        peer.into(),
    )
}

/// `frames` encoded back to back, as the peer should read them.
fn encoded<'a>(frames: impl IntoIterator<Item = &'a OutFrame>) -> Vec<u8> {
    let mut expected = BytesMut::new();
    for frame in frames {
        frame.encode(&mut expected, usize::MAX).unwrap();
    }
    expected.to_vec()
}

/// The pings `ids` encoded back to back.
fn pings(ids: impl IntoIterator<Item = u64>) -> Vec<u8> {
    let frames: Vec<OutFrame> = ids
        .into_iter()
        .map(|id| OutFrame::control(FrameKind::Ping, id))
        .collect();
    encoded(&frames)
}

#[tokio::test]
async fn queued_frames_are_written_in_order_and_acked() {
    let (client, mut server) = tokio::io::duplex(1 << 20);
    let close = Arc::new(CloseSignal::new());
    let writer = spawn(client, 16, close.clone(), "test");
    for id in 1..=5 {
        let ping = OutFrame::control(FrameKind::Ping, id);
        assert_eq!(writer.offer(&ping).unwrap(), Offer::Queued);
        // The writer task has not run yet: the batch is gathering.
        assert_eq!(writer.queued_frames(), id as usize);
    }
    let (ack, acked) = oneshot::channel();
    writer
        .send(&OutFrame::control(FrameKind::Ping, 6), Some(ack))
        .await
        .unwrap();
    acked.await.unwrap().unwrap();
    let len = OutFrame::control(FrameKind::Ping, 0).encoded_len();
    let mut bytes = vec![0u8; 6 * len];
    server.read_exact(&mut bytes).await.unwrap();
    assert_eq!(bytes, pings(1..=6));
    close.close("test over");
}

#[tokio::test]
async fn a_full_buffer_pushes_back_until_the_writer_drains() {
    // A peer that does not read: the pipe fills, the writer blocks in its
    // write, and the buffer behind it fills up to its bound.
    let (client, mut server) = tokio::io::duplex(64);
    let close = Arc::new(CloseSignal::new());
    let writer = spawn(client, 2, close.clone(), "test");
    let ping = OutFrame::control(FrameKind::Ping, 1);
    let mut full = false;
    for _ in 0..100 {
        if writer.offer(&ping).unwrap() == Offer::Full {
            full = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(full, "the bound of 2 frames was never reached");
    // A full buffer is no batch to join (see `fixed` connections).
    assert_eq!(writer.queued_frames(), usize::MAX);
    assert!(writer.try_send(&ping).is_err());
    // Waiting for room succeeds once the peer reads.
    let waiting = tokio::spawn({
        let writer = writer.clone();
        async move { writer.send(&ping, None).await }
    });
    let mut sink = vec![0u8; 4096];
    let reader = tokio::spawn(async move {
        loop {
            match server.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    });
    waiting.await.unwrap().unwrap();
    // The writer took the full buffer: the count is a count again.
    assert!(writer.queued_frames() <= 1);
    close.close("test over");
    drop(writer);
    reader.abort();
}

#[tokio::test]
async fn the_buffer_is_also_bounded_in_bytes() {
    // The peer never reads: after the first write fills the pipe, frames
    // stay in the buffer until the byte high-water mark (16 × 16 bytes).
    let (client, _server) = tokio::io::duplex(64);
    let close = Arc::new(CloseSignal::new());
    let config = TransportConfig {
        max_batch_bytes: 16,
        ..TransportConfig::default()
    };
    let writer = FrameWriter::spawn(client, &config, 1000, close.clone(), "test".into());
    let frame = OutFrame::response(1, 0, bytes::Bytes::from(vec![7u8; 100]));
    let mut queued = 0;
    for _ in 0..1000 {
        match writer.offer(&frame).unwrap() {
            Offer::Queued => queued += 1,
            Offer::Full => break,
        }
        tokio::task::yield_now().await;
    }
    assert!(
        (2..10).contains(&queued),
        "{queued} frames of {} bytes queued against a 256-byte mark",
        frame.encoded_len()
    );
    assert!(writer.shared().queue.lock().buf.len() <= 256 + frame.encoded_len());
    close.close("test over");
}

#[tokio::test]
async fn a_frame_larger_than_the_mark_goes_alone() {
    let (client, mut server) = tokio::io::duplex(1 << 16);
    let close = Arc::new(CloseSignal::new());
    let config = TransportConfig {
        max_batch_bytes: 16,
        ..TransportConfig::default()
    };
    let writer = FrameWriter::spawn(
        client,
        &config,
        ClientTransport::DEFAULT_WRITE_QUEUE_CAPACITY,
        close.clone(),
        "test".into(),
    );
    let big = OutFrame::response(1, 0, bytes::Bytes::from(vec![1u8; 1000]));
    assert_eq!(writer.offer(&big).unwrap(), Offer::Queued);
    let mut bytes = vec![0u8; big.encoded_len()];
    server.read_exact(&mut bytes).await.unwrap();
    close.close("test over");
}

#[tokio::test]
async fn closing_fails_queued_acks_and_later_offers() {
    let (client, _server) = tokio::io::duplex(64);
    let close = Arc::new(CloseSignal::new());
    let writer = spawn(client, 64, close.clone(), "peer-x");
    // Fill the pipe so that later frames stay queued.
    let big = OutFrame::control(FrameKind::Ping, 1);
    for _ in 0..32 {
        let _ = writer.offer(&big);
        tokio::task::yield_now().await;
    }
    let (ack, acked) = oneshot::channel();
    let mut ack = Some(ack);
    let _ = writer.shared().offer(&big, &mut ack);
    close.close("closed by the test");
    let err = acked.await.unwrap().unwrap_err();
    assert!(err.to_string().contains("closed by the test"), "{err}");
    // The task has stopped: nothing can be queued any more.
    for _ in 0..10 {
        if writer.offer(&big).is_err() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("offers still accepted after close");
}

#[tokio::test]
async fn stop_unsent_names_the_requests_that_never_left() {
    // A peer that does not read: the first batch fills the pipe, the rest
    // stays queued.
    let (client, _server) = tokio::io::duplex(64);
    let close = Arc::new(CloseSignal::new());
    let writer = spawn(client, 1000, close.clone(), "peer-y");
    let mut offered = Vec::new();
    for id in 1..=50u64 {
        let mut f = OutFrame::request(id, 1, "S", "m", bytes::Bytes::from(vec![0u8; 40]));
        f.request_id = id;
        if writer.offer(&f).unwrap() == Offer::Queued {
            offered.push(id);
        }
        tokio::task::yield_now().await;
    }
    let (ack, acked) = oneshot::channel();
    let last = OutFrame::request(99, 1, "S", "m", bytes::Bytes::new());
    let mut ack = Some(ack);
    assert_eq!(
        writer.shared().offer(&last, &mut ack).unwrap(),
        Offer::Queued
    );
    close.close("closed by the test");
    let unsent = writer.stop_unsent();
    assert!(unsent.contains(&99), "{unsent:?}");
    assert!(
        !unsent.contains(&1),
        "the first batch was taken for writing"
    );
    assert!(unsent.iter().all(|id| *id == 99 || offered.contains(id)));
    let err = acked.await.unwrap().unwrap_err();
    assert!(matches!(err, RpcError::NotSent { .. }), "{err:?}");
    let later = writer.offer(&last).unwrap_err();
    assert!(matches!(later, RpcError::NotSent { .. }), "{later:?}");
}

#[tokio::test]
async fn dropping_every_handle_flushes_then_shuts_down() {
    let (client, mut server) = tokio::io::duplex(1 << 16);
    let close = Arc::new(CloseSignal::new());
    let writer = spawn(client, 16, close.clone(), "test");
    writer
        .offer(&OutFrame::control(FrameKind::Ping, 9))
        .unwrap();
    drop(writer);
    let mut bytes = Vec::new();
    server.read_to_end(&mut bytes).await.unwrap();
    assert_eq!(
        bytes.len(),
        OutFrame::control(FrameKind::Ping, 9).encoded_len()
    );
    close.closed().await;
    assert!(close.reason().contains("every handle was dropped"));
}

/// Takes every byte at once but, like TLS over a full socket, holds them
/// until a flush completes — and the first flush cannot.
struct HoldsUntilFlushed {
    held: Vec<u8>,
    flushed: Arc<parking_lot::Mutex<Vec<u8>>>,
    flush_attempts: usize,
}

impl AsyncWrite for HoldsUntilFlushed {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.held.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.flush_attempts += 1;
        if self.flush_attempts == 1 {
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        }
        let held = std::mem::take(&mut self.held);
        self.flushed.lock().extend_from_slice(&held);
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn a_batch_is_flushed_and_its_sync_ack_waits_for_the_flush() {
    let flushed = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let io = HoldsUntilFlushed {
        held: Vec::new(),
        flushed: flushed.clone(),
        flush_attempts: 0,
    };
    let close = Arc::new(CloseSignal::new());
    let writer = spawn(io, 16, close.clone(), "test");
    let (ack, acked) = oneshot::channel();
    writer
        .send(&OutFrame::control(FrameKind::Ping, 1), Some(ack))
        .await
        .unwrap();
    acked.await.unwrap().unwrap();
    let len = OutFrame::control(FrameKind::Ping, 0).encoded_len();
    assert_eq!(
        flushed.lock().len(),
        len,
        "acknowledged once flushed, not before"
    );
    close.close("test over");
}

/// Lets the writer task run until it has parked on an empty buffer (its
/// waker is left in the queue only then).
async fn until_parked(writer: &FrameWriter) {
    for _ in 0..100 {
        {
            let q = writer.shared().queue.lock();
            if q.writer.is_some() && !q.has_work() {
                return;
            }
        }
        tokio::task::yield_now().await;
    }
    panic!("the writer task never parked");
}

#[tokio::test]
async fn a_caller_alone_writes_through_and_keeps_the_order() {
    let (client, mut server) = tokio::io::duplex(1 << 16);
    let close = Arc::new(CloseSignal::new());
    let writer = spawn(client, 16, close.clone(), "test");
    until_parked(&writer).await;
    // Written on this task, before the writer task could run at all.
    let one = OutFrame::control(FrameKind::Ping, 1);
    assert_eq!(writer.offer_alone(&one).unwrap(), Offer::Queued);
    assert!(
        writer.shared().queue.lock().buf.is_empty(),
        "nothing queued"
    );
    // It counts as a batch gathering (a burst joins it) until a read.
    assert_eq!(writer.queued_frames(), 1);
    writer.note_read();
    assert_eq!(writer.queued_frames(), 0);
    let mut bytes = vec![0u8; one.encoded_len()];
    server.read_exact(&mut bytes).await.unwrap();
    assert_eq!(bytes, pings([1]));
    // Queued frames go first: a caller alone behind them queues too.
    assert_eq!(
        writer
            .offer(&OutFrame::control(FrameKind::Ping, 2))
            .unwrap(),
        Offer::Queued
    );
    writer
        .push_alone(&OutFrame::control(FrameKind::Ping, 3))
        .unwrap();
    assert_eq!(writer.queued_frames(), 2);
    until_parked(&writer).await;
    assert_eq!(writer.queued_frames(), 0, "the task took the batch");
    writer
        .push_alone(&OutFrame::control(FrameKind::Ping, 4))
        .unwrap();
    let mut bytes = vec![0u8; 3 * one.encoded_len()];
    server.read_exact(&mut bytes).await.unwrap();
    assert_eq!(bytes, pings([2, 3, 4]));
    close.close("test over");
}

#[tokio::test]
async fn what_the_socket_does_not_take_is_left_to_the_task_in_order() {
    // A 64-byte pipe: a 1 000-byte frame written through goes out in part,
    // the rest (and a frame queued after it) once the peer reads.
    let (client, mut server) = tokio::io::duplex(64);
    let close = Arc::new(CloseSignal::new());
    let writer = spawn(client, 16, close.clone(), "test");
    until_parked(&writer).await;
    let big = OutFrame::response(7, 0, bytes::Bytes::from(vec![5u8; 1000]));
    assert_eq!(writer.offer_alone(&big).unwrap(), Offer::Queued);
    assert!(!writer.shared().queue.lock().carry.is_empty());
    let after = OutFrame::control(FrameKind::Ping, 8);
    assert_eq!(writer.offer_alone(&after).unwrap(), Offer::Queued);
    let expected = encoded([&big, &after]);
    let mut bytes = vec![0u8; expected.len()];
    server.read_exact(&mut bytes).await.unwrap();
    assert_eq!(bytes, expected);
    until_parked(&writer).await;
    close.close("test over");
}

#[tokio::test]
async fn a_write_through_that_left_bytes_in_the_stream_is_flushed_by_the_task() {
    // A buffered stream (as TLS is): the caller's write lands in its buffer
    // and the flush cannot finish on a 16-byte pipe; the task finishes it.
    let (client, mut server) = tokio::io::duplex(16);
    let close = Arc::new(CloseSignal::new());
    let writer = spawn(tokio::io::BufWriter::new(client), 16, close.clone(), "test");
    until_parked(&writer).await;
    let frame = OutFrame::response(3, 0, bytes::Bytes::from(vec![9u8; 200]));
    assert_eq!(writer.offer_alone(&frame).unwrap(), Offer::Queued);
    assert!(writer.shared().queue.lock().flush_owed);
    let expected = encoded([&frame]);
    let mut bytes = vec![0u8; expected.len()];
    server.read_exact(&mut bytes).await.unwrap();
    assert_eq!(bytes, expected);
    close.close("test over");
}

#[tokio::test]
async fn a_request_written_through_not_at_all_is_named_unsent() {
    // The peer never reads: once the pipe is full, a request written
    // through leaves not a byte, and stop_unsent must name it.
    let (client, _server) = tokio::io::duplex(64);
    let close = Arc::new(CloseSignal::new());
    let writer = spawn(client, 1000, close.clone(), "test");
    until_parked(&writer).await;
    let fill = OutFrame::response(1, 0, bytes::Bytes::from(vec![0u8; 200]));
    assert_eq!(writer.offer_alone(&fill).unwrap(), Offer::Queued);
    // The task now waits on the full pipe with the remainder; offers queue.
    let mut request = OutFrame::request(5, 1, "S", "m", bytes::Bytes::new());
    request.request_id = 5;
    assert_eq!(writer.offer_alone(&request).unwrap(), Offer::Queued);
    close.close("closed by the test");
    assert!(writer.stop_unsent().contains(&5));
}

/// A socket that, on its first write, lets another caller queue a frame —
/// as a caller on another thread would while this one writes through.
struct Meddling {
    out: tokio::io::DuplexStream,
    writer: Arc<parking_lot::Mutex<Option<FrameWriter>>>,
    meddled: bool,
}

impl AsyncWrite for Meddling {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if !self.meddled {
            self.meddled = true;
            if let Some(writer) = self.writer.lock().as_ref() {
                // The turn is busy: this is queued, and must follow.
                let later = OutFrame::control(FrameKind::Ping, 2);
                assert_eq!(writer.offer_alone(&later).unwrap(), Offer::Queued);
                assert!(writer.shared().queue.lock().busy);
            }
        }
        Pin::new(&mut self.out).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.out).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.out).poll_shutdown(cx)
    }
}

#[tokio::test]
async fn a_frame_queued_during_a_write_through_follows_it() {
    let (client, mut server) = tokio::io::duplex(1 << 16);
    let slot = Arc::new(parking_lot::Mutex::new(None));
    let io = Meddling {
        out: client,
        writer: slot.clone(),
        meddled: false,
    };
    let close = Arc::new(CloseSignal::new());
    let writer = spawn(io, 16, close.clone(), "test");
    *slot.lock() = Some(writer.clone());
    until_parked(&writer).await;
    writer
        .offer_alone(&OutFrame::control(FrameKind::Ping, 1))
        .unwrap();
    // The caller left the turn with a frame queued: the task was woken.
    let mut bytes = vec![0u8; 2 * OutFrame::control(FrameKind::Ping, 0).encoded_len()];
    server.read_exact(&mut bytes).await.unwrap();
    assert_eq!(bytes, pings([1, 2]));
    slot.lock().take();
    close.close("test over");
}
