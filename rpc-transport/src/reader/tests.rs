//! Tests of the reader.

use super::*;
use crate::ReadNow;
use bytes::Bytes;
use rpc_codec::{FrameKind, OutFrame};
use tokio::io::AsyncWriteExt;

fn request(id: u64, body: usize) -> Vec<u8> {
    let f = OutFrame::request(id, 1, "S", "m", Bytes::from(vec![7u8; body]));
    let mut b = BytesMut::new();
    f.encode(&mut b, usize::MAX).unwrap();
    b.to_vec()
}

fn frame(inbound: Option<Inbound>) -> Frame {
    match inbound {
        Some(Inbound::Frame(f, _)) => f,
        other => panic!("expected a frame, got {other:?}"),
    }
}

fn frame_and_reservation(inbound: Option<Inbound>) -> (Frame, Option<Reserved>) {
    match inbound {
        Some(Inbound::Frame(f, r)) => (f, r),
        other => panic!("expected a frame, got {other:?}"),
    }
}

#[tokio::test]
async fn an_over_size_frame_is_announced_and_skipped_and_the_next_one_read() {
    let (mut tx, rx) = tokio::io::duplex(1 << 16);
    let mut reader = FrameReader::new(rx, 4096, 512, 1024);
    let mut bytes = request(1, 10);
    bytes.extend(request(2, 100_000));
    bytes.extend(request(3, 20));
    let writer = tokio::spawn(async move {
        tx.write_all(&bytes).await.unwrap();
        tx
    });
    assert_eq!(frame(reader.next().await.unwrap()).header.request_id, 1);
    match reader.next().await.unwrap() {
        Some(Inbound::TooLarge { header, max }) => {
            assert_eq!(header.request_id, 2);
            assert_eq!(header.kind, FrameKind::Request);
            assert_eq!(max, 4096);
            let err = Inbound::too_large_error(&header, max);
            assert!(matches!(err, RpcError::FrameTooLarge { max: 4096, .. }));
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let third = frame(reader.next().await.unwrap());
    assert_eq!(third.header.request_id, 3);
    assert_eq!(third.body.len(), 20);
    assert!(
        reader.buffer_capacity() < 64 << 10,
        "the skipped frame was never buffered: {}",
        reader.buffer_capacity()
    );
    drop(writer.await.unwrap());
    assert!(reader.next().await.unwrap().is_none());
}

#[tokio::test]
async fn a_large_frame_owns_its_allocation_and_the_budget_while_held() {
    let (mut tx, rx) = tokio::io::duplex(1 << 16);
    let budget = FrameBudget::new(1 << 20);
    let mut reader = FrameReader::new(rx, 16 << 20, 512, 4096).with_budget(budget.clone());
    let mut bytes = request(1, 300_000);
    bytes.extend(request(2, 10));
    tokio::spawn(async move {
        tx.write_all(&bytes).await.unwrap();
        // Keep the stream open.
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let (big, reserved) = frame_and_reservation(reader.next().await.unwrap());
    assert!(reserved.is_some());
    assert_eq!(big.body.len(), 300_000);
    assert!(
        budget.available() <= (1 << 20) - 300_000,
        "reserved while held"
    );
    let small = frame(reader.next().await.unwrap());
    assert_eq!(small.header.request_id, 2);
    assert!(
        reader.buffer_capacity() < 64 << 10,
        "the reader does not keep the large frame's memory: {}",
        reader.buffer_capacity()
    );
    drop(big);
    drop(reserved);
    assert_eq!(
        budget.available(),
        1 << 20,
        "given back with the reservation"
    );
}

#[tokio::test]
async fn a_spent_budget_holds_the_next_large_frame_until_bytes_come_back() {
    let (mut tx, rx) = tokio::io::duplex(1 << 16);
    let budget = FrameBudget::new(400_000);
    let mut reader = FrameReader::new(rx, 16 << 20, 512, 4096).with_budget(budget);
    let mut bytes = request(1, 300_000);
    bytes.extend(request(2, 300_000));
    tokio::spawn(async move {
        tx.write_all(&bytes).await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let first = frame_and_reservation(reader.next().await.unwrap());
    // The second does not fit beside the first: next() waits, and a
    // cancelled wait loses nothing.
    for _ in 0..3 {
        let waited = tokio::time::timeout(Duration::from_millis(30), reader.next()).await;
        assert!(waited.is_err(), "the second frame waits for the budget");
    }
    drop(first);
    let second = tokio::time::timeout(Duration::from_secs(5), reader.next())
        .await
        .expect("read once the first frame is gone");
    assert_eq!(frame(second.unwrap()).header.request_id, 2);
}

#[tokio::test(start_paused = true)]
async fn a_budgeted_frame_that_stalls_closes_the_connection_and_gives_its_budget_back() {
    let (mut tx, rx) = tokio::io::duplex(1 << 16);
    let budget = FrameBudget::new(1 << 20);
    let mut reader = FrameReader::new(rx, 16 << 20, 512, 4096).with_budget(budget.clone());
    let bytes = request(1, 300_000);
    // The header and a little of the body, then nothing (the peer stays).
    tx.write_all(&bytes[..1000]).await.unwrap();
    let started = tokio::time::Instant::now();
    let err = reader.next().await.unwrap_err();
    let waited = started.elapsed();
    assert!(err.to_string().contains("too slowly"), "{err}");
    assert!(
        waited >= large_frame_deadline(bytes.len())
            && waited < large_frame_deadline(bytes.len()) * 2,
        "closed after {waited:?}"
    );
    drop(reader);
    assert_eq!(budget.available(), 1 << 20, "the share is back");
    drop(tx);
}

#[tokio::test(start_paused = true)]
async fn an_idle_reader_lets_its_buffer_go() {
    for body in [10, 1000, 200 << 10] {
        let (mut tx, rx) = tokio::io::duplex(1 << 20);
        let mut reader = FrameReader::new(rx, 16 << 20, 512, 1 << 20);
        for id in 1..=3 {
            tx.write_all(&request(id, body)).await.unwrap();
            drop(frame(reader.next().await.unwrap()));
        }
        assert!(reader.buffer_capacity() > 0, "{body}: a buffer while busy");
        // Nothing arrives for a while.
        let waited = tokio::time::timeout(IDLE_RELEASE * 3, reader.next()).await;
        assert!(waited.is_err());
        assert_eq!(reader.buffer_capacity(), 0, "{body}: released");
        // And it still reads, a frame at a time and several at once.
        tx.write_all(&request(9, body)).await.unwrap();
        assert_eq!(frame(reader.next().await.unwrap()).header.request_id, 9);
        let mut two = request(10, body);
        two.extend(request(11, body));
        tx.write_all(&two).await.unwrap();
        assert_eq!(frame(reader.next().await.unwrap()).header.request_id, 10);
        assert_eq!(frame(reader.next().await.unwrap()).header.request_id, 11);
    }
}

#[tokio::test]
async fn a_new_reader_allocates_nothing_until_bytes_arrive() {
    let (mut tx, rx) = tokio::io::duplex(1 << 16);
    let mut reader = FrameReader::new(rx, 1 << 20, 512, 1 << 20);
    let waited = tokio::time::timeout(Duration::from_millis(20), reader.next()).await;
    assert!(waited.is_err());
    assert_eq!(reader.buffer_capacity(), 0, "nothing held while waiting");
    // A frame arriving a byte at a time still comes out whole.
    let bytes = request(1, 100);
    let writer = tokio::spawn(async move {
        for b in bytes {
            tx.write_all(&[b]).await.unwrap();
            tokio::task::yield_now().await;
        }
        tx
    });
    assert_eq!(frame(reader.next().await.unwrap()).header.request_id, 1);
    let tx = writer.await.unwrap();
    // A clean end of stream allocates nothing either.
    drop(tx);
    let mut quiet = FrameReader::new(tokio::io::empty(), 1 << 20, 512, 1 << 20);
    assert!(quiet.next().await.unwrap().is_none());
    assert_eq!(quiet.buffer_capacity(), 0);
}

#[tokio::test]
async fn every_read_counts_as_activity() {
    let (mut tx, rx) = tokio::io::duplex(64);
    let activity = Arc::new(Activity::default());
    let mut reader = FrameReader::new(rx, 1 << 20, 512, 4096).with_activity(activity.clone());
    let bytes = request(1, 1000);
    let writer = tokio::spawn(async move {
        for chunk in bytes.chunks(100) {
            tx.write_all(chunk).await.unwrap();
            tokio::task::yield_now().await;
        }
    });
    assert_eq!(frame(reader.next().await.unwrap()).header.request_id, 1);
    writer.await.unwrap();
    assert!(
        activity.get() > 1,
        "one frame, several reads: {}",
        activity.get()
    );
}

#[tokio::test]
async fn garbage_is_still_an_error() {
    let (mut tx, rx) = tokio::io::duplex(64);
    let mut reader = FrameReader::new(rx, 1 << 20, 512, 4096);
    tx.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let err = reader.next().await.unwrap_err();
    assert!(err.to_string().contains("bad magic"), "{err}");
}

/// A connected pair of TCP sockets: the client, and the server's read half.
async fn tcp_pair() -> (tokio::net::TcpStream, tokio::net::tcp::OwnedReadHalf) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, accepted) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
    let (read, _write) = accepted.unwrap().0.into_split();
    (client.unwrap(), read)
}

/// `read_now` until it has something, sleeping the thread (not the task)
/// between tries: on this current-thread runtime nothing polls the I/O
/// driver meanwhile, so what is read was read without it.
fn read_now_blocking<R: AsyncRead + ReadNow + Unpin>(reader: &mut FrameReader<R>) -> bool {
    for _ in 0..2000 {
        if reader.read_now() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// Turns the client into a blocking std socket and writes `bytes` with it:
/// no write of the tests below goes through the runtime.
fn blocking_client(client: tokio::net::TcpStream, bytes: Vec<u8>) -> std::net::TcpStream {
    let mut client = client.into_std().unwrap();
    client.set_nonblocking(false).unwrap();
    std::io::Write::write_all(&mut client, &bytes).unwrap();
    client
}

#[tokio::test]
async fn read_now_reads_whole_small_frames_without_the_runtime() {
    let (client, read) = tcp_pair().await;
    let mut reader = FrameReader::new(read, 1 << 20, 512, 4096);
    assert!(reader.can_read_now());
    assert!(!reader.read_now(), "no buffer yet: nothing is read");
    assert_eq!(reader.buffer_capacity(), 0, "and nothing allocated");

    // A first frame through the usual path allocates the buffer.
    let mut client = blocking_client(client, request(1, 10));
    assert_eq!(frame(reader.next().await.unwrap()).header.request_id, 1);
    assert!(!reader.read_now(), "nothing sent");

    // Two small frames, read with no `.await` at all.
    let before = reader.bytes_read();
    let mut two = request(2, 100);
    two.extend(request(3, 200));
    let sent = two.len() as u64;
    std::io::Write::write_all(&mut client, &two).unwrap();
    assert!(read_now_blocking(&mut reader), "the frames arrive");
    let mut got = Vec::new();
    while got.len() < 2 {
        while let Some(inbound) = reader.try_next_buffered().unwrap() {
            got.push(frame(Some(inbound)).header.request_id);
        }
        if got.len() < 2 {
            assert!(read_now_blocking(&mut reader), "the second frame arrives");
        }
    }
    assert_eq!(got, [2, 3]);
    assert_eq!(reader.bytes_read() - before, sent);

    // Half a frame is kept, and not reported until the rest comes.
    let half = request(4, 300);
    std::io::Write::write_all(&mut client, &half[..100]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(!reader.read_now(), "half a frame is not a frame");
    assert!(reader.try_next_buffered().unwrap().is_none());
    std::io::Write::write_all(&mut client, &half[100..]).unwrap();
    assert!(read_now_blocking(&mut reader));
    assert_eq!(
        frame(reader.try_next_buffered().unwrap()).header.request_id,
        4
    );
}

#[tokio::test]
async fn read_now_leaves_a_large_frame_to_next() {
    let (client, read) = tcp_pair().await;
    let mut reader = FrameReader::new(read, 1 << 20, 512, 4096);
    let mut client = blocking_client(client, request(1, 10));
    assert_eq!(frame(reader.next().await.unwrap()).header.request_id, 1);

    // A frame larger than the buffer's maximum needs an allocation of its
    // own: `read_now` reports its header and reads no further.
    std::io::Write::write_all(&mut client, &request(2, 10_000)).unwrap();
    assert!(read_now_blocking(&mut reader), "its header is reported");
    let read_once = reader.bytes_read();
    assert!(reader.read_now());
    assert_eq!(reader.bytes_read(), read_once, "nothing more is read");
    let large = frame(reader.next().await.unwrap());
    assert_eq!((large.header.request_id, large.body.len()), (2, 10_000));
}

#[tokio::test]
async fn read_now_finds_the_end_of_the_stream_and_next_reports_it() {
    let (client, read) = tcp_pair().await;
    let mut reader = FrameReader::new(read, 1 << 20, 512, 4096);
    let client = blocking_client(client, request(1, 10));
    assert_eq!(frame(reader.next().await.unwrap()).header.request_id, 1);
    // A last frame, then the end.
    let mut client = client;
    std::io::Write::write_all(&mut client, &request(2, 10)).unwrap();
    drop(client);
    std::thread::sleep(Duration::from_millis(20));
    assert!(read_now_blocking(&mut reader));
    assert_eq!(
        frame(reader.try_next_buffered().unwrap()).header.request_id,
        2
    );
    assert!(read_now_blocking(&mut reader), "the end is reported");
    assert!(reader.next().await.unwrap().is_none(), "a clean end");
}

#[tokio::test]
async fn read_now_keeps_a_reset_for_next() {
    let (client, read) = tcp_pair().await;
    let mut reader = FrameReader::new(read, 1 << 20, 512, 4096);
    let client = blocking_client(client, request(1, 10));
    assert_eq!(frame(reader.next().await.unwrap()).header.request_id, 1);
    // Closed with a zero linger: the peer resets the connection.
    socket2::SockRef::from(&client)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(client);
    assert!(read_now_blocking(&mut reader), "the reset is found");
    let err = reader.next().await.unwrap_err();
    assert!(
        err.to_string().to_lowercase().contains("reset"),
        "the reset itself, not an end: {err}"
    );
}

#[tokio::test]
async fn a_split_stream_is_never_read_now() {
    let (mut tx, rx) = tokio::io::duplex(1 << 16);
    let (rx, _) = tokio::io::split(rx);
    let mut reader = FrameReader::new(rx, 1 << 20, 512, 4096);
    assert!(!reader.can_read_now());
    tx.write_all(&request(1, 10)).await.unwrap();
    assert!(!reader.read_now());
    assert_eq!(frame(reader.next().await.unwrap()).header.request_id, 1);
    assert!(!reader.read_now());
}

#[tokio::test]
async fn bytes_read_by_someone_else_come_out_first_then_the_stream() {
    let (mut tx, rx) = tokio::io::duplex(1 << 16);
    let mut reader = FrameReader::new(rx, 4096, 512, 1024);
    assert!(reader.is_drained());
    // A whole frame and the first half of the next, read elsewhere (a
    // worker the connection lent its read side to).
    let second = request(2, 100);
    let mut handed = request(1, 10);
    handed.extend_from_slice(&second[..40]);
    reader.unread(&handed, 0, None);
    assert!(!reader.is_drained());
    assert_eq!(reader.bytes_read(), handed.len() as u64, "counted as read");
    tx.write_all(&second[40..]).await.unwrap();
    tx.write_all(&request(3, 5)).await.unwrap();
    for id in 1..=3 {
        let f = frame(reader.next().await.unwrap());
        assert_eq!(f.header.request_id, id);
    }
    assert!(reader.is_drained());
}

#[tokio::test]
async fn the_start_of_a_frame_handed_out_and_back_is_counted_once() {
    let (mut tx, rx) = tokio::io::duplex(1 << 16);
    let mut reader = FrameReader::new(rx, 4096, 512, 1024);
    // A whole frame, then the start of the next, its header in part.
    let second = request(2, 100);
    let mut read = request(1, 10);
    read.extend_from_slice(&second[..5]);
    reader.unread(&read, 0, None);
    assert_eq!(reader.partial_frame(), None, "a whole frame first");
    assert_eq!(
        frame(reader.try_next_buffered().unwrap()).header.request_id,
        1
    );
    assert_eq!(reader.partial_frame(), Some(0), "a header in part");
    // Handed out: the reader is drained, the bytes stay counted.
    let mut out = BytesMut::new();
    reader.hand_partial(&mut out);
    assert_eq!(&out[..], &second[..5]);
    assert!(reader.is_drained());
    assert_eq!(reader.partial_frame(), None);
    assert_eq!(reader.bytes_read(), read.len() as u64);
    // Back, with 35 more bytes someone else read: only those are counted.
    out.extend_from_slice(&second[5..40]);
    reader.unread(&out, 5, None);
    assert_eq!(reader.bytes_read(), read.len() as u64 + 35);
    assert_eq!(reader.partial_frame(), Some(second.len() as u64));
    tx.write_all(&second[40..]).await.unwrap();
    assert_eq!(frame(reader.next().await.unwrap()).header.request_id, 2);
    assert!(reader.is_drained());
}

#[tokio::test]
async fn the_error_a_lent_read_ended_with_comes_after_its_bytes() {
    let (_tx, rx) = tokio::io::duplex(1 << 16);
    let mut reader = FrameReader::new(rx, 4096, 512, 1024);
    let reset = io::Error::from(io::ErrorKind::ConnectionReset);
    reader.unread(&request(1, 10), 0, Some(reset));
    assert_eq!(frame(reader.next().await.unwrap()).header.request_id, 1);
    assert!(reader.next().await.is_err(), "then the read's error");
}
