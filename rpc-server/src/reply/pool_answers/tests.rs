//! Unit tests of [`PoolAnswers`](super::PoolAnswers): taking answers, the
//! socket lent to the workers, and the read side lent (runs, partial
//! requests, the in-flight limit, hand-backs).

use super::*;
use bytes::Bytes;
use rpc_codec::{FrameCodec, FrameKind};
use rpc_core::RpcResponse;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::task::Wake;
use tokio_util::codec::Decoder;

#[test]
fn a_large_answer_copied_out_leaves_no_storage_and_hands_over_its_budget() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let budget = rpc_transport::FrameBudget::new(1 << 20);
    let reserved = rt.block_on(budget.reserve(1000));
    let answers = std::sync::Arc::new(PoolAnswers::new(1 << 24));
    answers
        .reserve(
            ReplyTo {
                id: 1,
                serializer: 1,
                answer_in: rpc_core::Compression::None,
            },
            Some(reserved),
        )
        .answer(Ok(RpcResponse::new(Bytes::from(vec![1u8; 2 << 20]))));
    // The outbox is busy with earlier answers: the large one is copied.
    let mut out = BytesMut::from(&b"earlier"[..]);
    let mut held = Vec::new();
    assert!(answers.take(&mut out, &mut held, 1 << 16));
    assert_eq!(held.len(), 1, "the request's budget moves with its answer");
    assert_eq!(budget.available(), (1 << 20) - 1000);
    assert!(
        answers.state.lock().buf.capacity() <= 1 << 16,
        "storage let go"
    );
    held.clear();
    assert_eq!(budget.available(), 1 << 20);
}

#[test]
fn release_gives_back_an_empty_buffer_only() {
    let answers = std::sync::Arc::new(PoolAnswers::new(1 << 24));
    let reply_to = |id| ReplyTo {
        id,
        serializer: 1,
        answer_in: rpc_core::Compression::None,
    };
    answers
        .reserve(reply_to(1), None)
        .answer(Ok(RpcResponse::new(Bytes::from_static(b"one"))));
    answers.release();
    assert!(
        !answers.state.lock().buf.is_empty(),
        "an answer waiting is kept"
    );
    let mut out = BytesMut::from(&b"earlier"[..]);
    assert!(answers.take(&mut out, &mut Vec::new(), 1 << 16));
    assert!(answers.state.lock().buf.capacity() > 0, "kept for reuse");
    answers.release();
    assert_eq!(answers.state.lock().buf.capacity(), 0, "given back");
    // And answers still come through.
    answers
        .reserve(reply_to(2), None)
        .answer(Ok(RpcResponse::new(Bytes::from_static(b"two"))));
    let mut out = BytesMut::new();
    assert!(answers.take(&mut out, &mut Vec::new(), 1 << 16));
    assert_eq!(decode_all(out)[0].0, 2);
}

struct Flag(AtomicBool);
impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn decode_all(mut buf: BytesMut) -> Vec<(u64, FrameKind, u8, Bytes)> {
    let mut codec = FrameCodec::new(1 << 20);
    let mut out = Vec::new();
    while let Some(f) = codec.decode(&mut buf).unwrap() {
        out.push((f.header.request_id, f.header.kind, f.header.status, f.body));
    }
    assert!(buf.is_empty(), "trailing bytes");
    out
}

#[test]
fn answers_are_taken_in_order_and_wake_a_waiting_task_once() {
    let answers = Arc::new(PoolAnswers::new(1 << 20));
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    let mut out = BytesMut::new();

    let a = answers.reserve(reply_to(1), None);
    let b = answers.reserve(reply_to(2), None);
    assert_eq!(answers.in_flight(), 2);
    assert!(answers.poll_news(&mut cx, false, None).is_pending());

    a.answer(Ok(RpcResponse::new(Bytes::from_static(b"one"))));
    assert!(
        flag.0.swap(false, Ordering::SeqCst),
        "the waiting task is woken"
    );
    b.answer(Ok(RpcResponse::new(Bytes::from_static(b"two"))));
    assert!(
        !flag.0.load(Ordering::SeqCst),
        "woken once per wait, not per answer"
    );
    assert_eq!(answers.in_flight(), 0);

    assert!(answers.poll_news(&mut cx, false, None).is_ready());
    assert!(
        answers.poll_news(&mut cx, false, None).is_pending(),
        "news is told once"
    );
    assert!(answers.take(&mut out, &mut Vec::new(), 1 << 16));
    let got = decode_all(out);
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].0, &got[0].3[..]), (1, &b"one"[..]));
    assert_eq!((got[1].0, &got[1].3[..]), (2, &b"two"[..]));
    assert!(got.iter().all(|f| f.1 == FrameKind::Response && f.2 == 0));
}

#[test]
fn taking_into_a_non_empty_buffer_appends() {
    let answers = Arc::new(PoolAnswers::new(1 << 20));
    let mut out = BytesMut::new();
    encode_answer(
        &mut out,
        &OutFrame::response(7, 0, Bytes::from_static(b"first")),
        1 << 20,
    );
    answers
        .reserve(reply_to(8), None)
        .answer(Ok(RpcResponse::new(Bytes::from_static(b"second"))));
    assert!(answers.take(&mut out, &mut Vec::new(), 1 << 16));
    assert!(
        !answers.take(&mut out, &mut Vec::new(), 1 << 16),
        "nothing left"
    );
    let ids: Vec<u64> = decode_all(out).into_iter().map(|f| f.0).collect();
    assert_eq!(ids, vec![7, 8]);
}

#[test]
fn a_dropped_slot_counts_the_call_done_without_an_answer() {
    let answers = Arc::new(PoolAnswers::new(1 << 20));
    let slot = answers.reserve(reply_to(1), None);
    assert_eq!(answers.in_flight(), 1);
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    assert!(answers
        .poll_news(&mut Context::from_waker(&waker), false, None)
        .is_pending());
    drop(slot);
    assert_eq!(answers.in_flight(), 0);
    assert!(
        flag.0.load(Ordering::SeqCst),
        "the connection task is woken to re-check its in-flight count"
    );
    assert!(answers
        .poll_news(&mut Context::from_waker(&waker), false, None)
        .is_ready());
    assert!(!answers.take(&mut BytesMut::new(), &mut Vec::new(), 1 << 16));
}

#[test]
fn an_oversize_answer_becomes_an_error_frame() {
    let answers = Arc::new(PoolAnswers::new(64));
    answers
        .reserve(reply_to(3), None)
        .answer(Ok(RpcResponse::new(Bytes::from(vec![0u8; 1000]))));
    let mut out = BytesMut::new();
    assert!(answers.take(&mut out, &mut Vec::new(), 1 << 16));
    let got = decode_all(out);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 3);
    assert_eq!(got[0].1, FrameKind::Response);
    assert_ne!(got[0].2, 0, "an error status, not the answer");
    assert!(got[0].3.len() < 64);
}

#[test]
fn answers_after_close_are_dropped_but_counted() {
    let answers = Arc::new(PoolAnswers::new(1 << 20));
    let slot = answers.reserve(reply_to(1), None);
    answers.close();
    slot.answer(Ok(RpcResponse::new(Bytes::from_static(b"late"))));
    assert_eq!(answers.in_flight(), 0);
    assert!(!answers.take(&mut BytesMut::new(), &mut Vec::new(), 1 << 16));
}

/// A plain socket pair on loopback: the server's halves and the client.
async fn socket_pair() -> (
    tokio::net::tcp::OwnedReadHalf,
    tokio::net::tcp::OwnedWriteHalf,
    tokio::net::TcpStream,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, server) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
    let (read, write) = server.unwrap().0.into_split();
    (read, write, client.unwrap())
}

fn lent_answers(
    write: &tokio::net::tcp::OwnedWriteHalf,
    max_frame: usize,
) -> (Arc<PoolAnswers>, Arc<IoCounters>) {
    use rpc_transport::WriteNow;
    let counters = Arc::new(IoCounters::default());
    // SAFETY: every test closes the answers before it drops `write`.
    let answers = Arc::new(unsafe {
        PoolAnswers::new(max_frame).lending(write.raw_socket().map(|socket| Lender {
            socket,
            keep: 1 << 16,
            io: counters.clone(),
            stats: Arc::new(ServerStats::default()),
            quiet: QuietMarker::detached(),
        }))
    });
    (answers, counters)
}

fn reply_to(id: u64) -> ReplyTo {
    ReplyTo {
        id,
        serializer: 0,
        answer_in: rpc_core::Compression::None,
    }
}

async fn read_frames(client: &mut tokio::net::TcpStream, n: usize) -> Vec<(u64, Bytes)> {
    use tokio::io::AsyncReadExt;
    let mut codec = FrameCodec::new(1 << 26);
    let mut buf = BytesMut::new();
    let mut got = Vec::new();
    while got.len() < n {
        if let Some(f) = codec.decode(&mut buf).unwrap() {
            got.push((f.header.request_id, f.body));
            continue;
        }
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            client.read_buf(&mut buf),
        )
        .await
        .expect("the answers arrive")
        .unwrap();
        assert!(read > 0, "the connection ended early");
    }
    assert!(buf.is_empty(), "trailing bytes");
    got
}

#[tokio::test]
async fn while_the_socket_is_lent_answers_are_written_without_waking_the_task() {
    let (_read, write, mut client) = socket_pair().await;
    let (answers, counters) = lent_answers(&write, 1 << 20);
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let a = answers.reserve(reply_to(1), None);
    let b = answers.reserve(reply_to(2), None);
    assert!(answers
        .poll_news(&mut Context::from_waker(&waker), true, None)
        .is_pending());

    // Off a worker thread the deferred write happens at once; on one,
    // at the end of its run (`pool::wake_soon`).
    a.answer(Ok(RpcResponse::new(Bytes::from_static(b"one"))));
    b.answer(Ok(RpcResponse::new(Bytes::from_static(b"two"))));
    let got = read_frames(&mut client, 2).await;
    assert_eq!(got[0], (1, Bytes::from_static(b"one")));
    assert_eq!(got[1], (2, Bytes::from_static(b"two")));
    assert!(!flag.0.load(Ordering::SeqCst), "the task was not woken");
    assert!(counters.bytes_out() > 0, "the bytes are counted");
    assert_eq!(answers.in_flight(), 0);

    // Taken back, the socket is the task's again: answers wait for it.
    assert!(!answers.take(&mut BytesMut::new(), &mut Vec::new(), 1 << 16));
    answers
        .reserve(reply_to(3), None)
        .answer(Ok(RpcResponse::new(Bytes::from_static(b"three"))));
    assert!(flag.0.swap(false, Ordering::SeqCst), "now it is woken");
    let mut out = BytesMut::new();
    assert!(answers.take(&mut out, &mut Vec::new(), 1 << 16));
    assert_eq!(decode_all(out)[0].0, 3);
    answers.close();
    drop(write);
}

#[tokio::test]
async fn what_a_full_socket_did_not_take_goes_out_first_when_the_task_takes_it_back() {
    use tokio::io::AsyncWriteExt;
    let (_read, mut write, mut client) = socket_pair().await;
    let (answers, _) = lent_answers(&write, 1 << 26);
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let big = Bytes::from(vec![5u8; 32 << 20]);
    let slot = answers.reserve(reply_to(1), None);
    assert!(answers
        .poll_news(&mut Context::from_waker(&waker), true, None)
        .is_pending());
    // More than loopback's buffers take while the client does not read.
    slot.answer(Ok(RpcResponse::new(big.clone())));
    assert!(
        flag.0.load(Ordering::SeqCst),
        "the task is woken for the rest"
    );
    assert!(answers.state.lock().tail, "a frame was written in part");

    // The task had an answer of its own queued meanwhile: the rest of
    // the worker's frame still goes first.
    let mut out = BytesMut::new();
    encode_answer(
        &mut out,
        &OutFrame::response(7, 0, Bytes::from_static(b"mine")),
        1 << 20,
    );
    assert!(answers.take(&mut out, &mut Vec::new(), 1 << 16));
    let (got, written) = tokio::join!(read_frames(&mut client, 2), write.write_all(&out));
    written.unwrap();
    assert_eq!(got[0].0, 1);
    assert_eq!(got[0].1, big);
    assert_eq!(got[1], (7, Bytes::from_static(b"mine")));
    answers.close();
    drop(write);
}

#[tokio::test]
async fn a_closed_connection_lends_nothing() {
    let (_read, write, _client) = socket_pair().await;
    let (answers, counters) = lent_answers(&write, 1 << 20);
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let slot = answers.reserve(reply_to(1), None);
    answers.close();
    assert!(answers
        .poll_news(&mut Context::from_waker(&waker), true, None)
        .is_pending());
    assert!(!answers.state.lock().lent);
    slot.answer(Ok(RpcResponse::new(Bytes::from_static(b"late"))));
    assert_eq!(counters.bytes_out(), 0, "nothing written after close");
    drop(write);
}

/// Records the requests a worker read and starts nothing.
#[derive(Default)]
struct Taken(parking_lot::Mutex<Vec<u64>>);

impl TakeRequest for Arc<Taken> {
    fn take(
        &self,
        frames: &mut Vec<rpc_codec::Frame>,
        _received: std::time::Instant,
        _answers: &Arc<PoolAnswers>,
    ) -> Box<dyn FnOnce() + Send> {
        let mut taken = self.0.lock();
        taken.extend(frames.drain(..).map(|frame| frame.header.request_id));
        Box::new(|| {})
    }
}

fn request(id: u64) -> BytesMut {
    let mut out = BytesMut::new();
    OutFrame::request(id, 0, "S", "m", Bytes::from_static(b"body"))
        .encode(&mut out, 1 << 20)
        .unwrap();
    out
}

/// Looks at the lent read side as a worker would, until it stops looking
/// (or a second passes).
fn look_until_done(answers: &Arc<PoolAnswers>) {
    use crate::pool::IdlePoll;
    let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while answers.clone().poll() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Looks at the lent read side as a worker would until `done` holds (or
/// a second passes), claiming it again after each take (as the answer
/// of the last call taken would).
fn look_until(answers: &Arc<PoolAnswers>, done: impl Fn() -> bool) {
    use crate::pool::IdlePoll;
    let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while !done() && std::time::Instant::now() < end {
        {
            let mut st = answers.state.lock();
            st.read_claimed = st.read_lent;
        }
        if answers.clone().poll() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Answers that lend their read side to workers, with `Taken` as taker and
/// `max_calls` calls at most, and their byte counters (not lent yet).
fn reading_answers(
    write: &tokio::net::tcp::OwnedWriteHalf,
    max_calls: usize,
) -> (Arc<PoolAnswers>, Arc<Taken>, Arc<IoCounters>) {
    let taken = Arc::new(Taken::default());
    let (answers, counters) = reading_answers_with(write, max_calls, taken.clone());
    (answers, taken, counters)
}

/// [`reading_answers`] with `taker` as taker.
fn reading_answers_with(
    write: &tokio::net::tcp::OwnedWriteHalf,
    max_calls: usize,
    taker: impl TakeRequest + 'static,
) -> (Arc<PoolAnswers>, Arc<IoCounters>) {
    let (answers, counters) = lent_answers(write, 1 << 20);
    let answers = Arc::new(Arc::into_inner(answers).expect("one handle").reading(
        taker,
        1 << 20,
        max_calls,
    ));
    (answers, counters)
}

/// Lends the read side as in a task's wait, claimed by a worker.
fn lend(answers: &PoolAnswers) {
    let mut st = answers.state.lock();
    st.lent = true;
    st.read_lent = true;
    st.read_claimed = true;
}

/// [`reading_answers`], lent.
async fn lent_reading(
    max_calls: usize,
) -> (
    Arc<PoolAnswers>,
    Arc<Taken>,
    tokio::net::TcpStream,
    (
        tokio::net::tcp::OwnedReadHalf,
        tokio::net::tcp::OwnedWriteHalf,
    ),
) {
    let (read, write, client) = socket_pair().await;
    let (answers, taken, _) = reading_answers(&write, max_calls);
    lend(&answers);
    (answers, taken, client, (read, write))
}

#[tokio::test]
async fn a_worker_reads_no_request_past_the_connections_limit() {
    use tokio::io::AsyncWriteExt;
    let (answers, taken, mut client, _halves) = lent_reading(2).await;
    let mut three = request(1);
    three.extend_from_slice(&request(2));
    let last = request(3);
    three.extend_from_slice(&last);
    client.write_all(&three).await.unwrap();
    look_until(&answers, || !answers.state.lock().read_lent);
    assert_eq!(*taken.0.lock(), [1, 2], "two calls at most");
    let bytes = answers.take_handed().expect("the third goes back").bytes;
    assert_eq!(&bytes[..], &last[..]);
    answers.close();
}

#[tokio::test]
async fn the_start_of_a_request_goes_back_when_nobody_will_read() {
    use tokio::io::AsyncWriteExt;
    let (answers, taken, mut client, _halves) = lent_reading(1000).await;
    let next = request(4);
    client.write_all(&next[..20]).await.unwrap();
    look_until(&answers, || !answers.state.lock().inbox.is_empty());
    crate::pool::IdlePoll::release(answers.clone());
    assert!(taken.0.lock().is_empty());
    let bytes = answers.take_handed().expect("the start of a request").bytes;
    assert_eq!(&bytes[..], &next[..20]);
    // Closed while a start is held: nothing is kept.
    lend(&answers);
    client.write_all(&next[20..30]).await.unwrap();
    look_until(&answers, || !answers.state.lock().inbox.is_empty());
    answers.close();
    assert!(answers.state.lock().inbox.is_empty());
}

#[tokio::test]
async fn the_start_of_a_request_the_task_seeds_is_completed_by_a_worker_and_counted_once() {
    use tokio::io::AsyncWriteExt;
    let (read, write, mut client) = socket_pair().await;
    let (answers, taken, counters) = reading_answers(&write, 1000);
    // The task read the first 20 bytes of request 5 (and counted them).
    let next = request(5);
    answers.seed(|inbox| inbox.extend_from_slice(&next[..20]));
    lend(&answers);
    client.write_all(&next[20..]).await.unwrap();
    look_until(&answers, || !taken.0.lock().is_empty());
    assert_eq!(*taken.0.lock(), [5], "completed and taken");
    let rest = (next.len() - 20) as u64;
    assert_eq!(answers.worker_bytes(), rest, "only what the worker read");
    assert_eq!(counters.bytes_in(), rest);
    // A seeded start nobody completes goes back with the read side, the
    // task's part marked as counted, the worker's not.
    let other = request(6);
    answers.seed(|inbox| inbox.extend_from_slice(&other[..10]));
    lend(&answers);
    client.write_all(&other[10..15]).await.unwrap();
    look_until(&answers, || answers.state.lock().inbox.buffer().len() == 15);
    crate::pool::IdlePoll::release(answers.clone());
    let handed = answers.take_handed().expect("the start of a request");
    assert_eq!(&handed.bytes[..], &other[..15]);
    assert_eq!(handed.counted, 10);
    assert_eq!(
        counters.bytes_in(),
        rest,
        "counted by the task when it takes them"
    );
    assert_eq!(*taken.0.lock(), [5]);
    answers.close();
    drop((read, write));
}

#[tokio::test]
async fn a_worker_takes_whole_requests_and_hands_anything_else_back() {
    use tokio::io::AsyncWriteExt;
    let (_read, write, mut client) = socket_pair().await;
    let (answers, taken, _) = reading_answers(&write, 1000);
    let taken_ids = || taken.0.lock().clone();
    // One request: started through the taker, the read side kept lent.
    lend(&answers);
    client.write_all(&request(7)).await.unwrap();
    look_until_done(&answers);
    assert_eq!(taken_ids(), [7]);
    assert!(answers.state.lock().read_lent, "still lent");
    assert!(
        !answers.state.lock().read_claimed,
        "until its answer claims it"
    );
    assert!(answers.take_handed().is_none());
    // A run of requests, the last in two parts: the whole ones are
    // taken at once, the last once its rest has come.
    answers.state.lock().read_claimed = true;
    let mut run = request(8);
    run.extend_from_slice(&request(9));
    let last = request(10);
    run.extend_from_slice(&last[..5]);
    client.write_all(&run).await.unwrap();
    look_until(&answers, || taken_ids().len() == 3);
    assert_eq!(taken_ids(), [7, 8, 9]);
    answers.state.lock().read_claimed = true;
    client.write_all(&last[5..]).await.unwrap();
    look_until(&answers, || taken_ids().len() == 4);
    assert_eq!(taken_ids(), [7, 8, 9, 10]);
    assert!(answers.take_handed().is_none(), "nothing handed back");
    // A request, then a frame of another kind: the request is taken,
    // the other frame's bytes go back with the read side.
    answers.state.lock().read_claimed = true;
    let mut mixed = request(11);
    let mut ping = BytesMut::new();
    OutFrame::control(FrameKind::Ping, 0)
        .encode(&mut ping, 1 << 20)
        .unwrap();
    mixed.extend_from_slice(&ping);
    client.write_all(&mixed).await.unwrap();
    look_until(&answers, || !answers.state.lock().read_lent);
    assert_eq!(taken_ids(), [7, 8, 9, 10, 11]);
    let handed = answers.take_handed().expect("the bytes read");
    let (bytes, error) = (handed.bytes, handed.error);
    assert!(error.is_none());
    assert_eq!(&bytes[..], &ping[..]);
    // The start of a request when the task takes its read side back:
    // it goes back too, to be read before the socket.
    lend(&answers);
    let next = request(12);
    client.write_all(&next[..9]).await.unwrap();
    look_until(&answers, || !answers.state.lock().inbox.is_empty());
    answers.take(&mut BytesMut::new(), &mut Vec::new(), 1 << 20);
    let bytes = answers.take_handed().expect("the start of a request").bytes;
    assert_eq!(&bytes[..], &next[..9]);
    assert_eq!(taken_ids().len(), 5, "not taken");
    answers.close();
    drop(write);
}

#[test]
fn a_read_side_nobody_will_look_at_goes_back_and_wakes_the_task() {
    use crate::pool::IdlePoll;
    let answers = Arc::new(PoolAnswers::new(1 << 20));
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    {
        let mut st = answers.state.lock();
        st.waker = Some(Waker::from(flag.clone()));
        st.lent = true;
        st.read_lent = true;
        st.read_claimed = true;
    }
    answers.clone().release();
    assert!(flag.0.load(Ordering::SeqCst), "the task is woken to read");
    let st = answers.state.lock();
    assert!(!st.read_lent && !st.read_claimed);
    assert!(st.news, "its wait ends");
}

/// Keeps every request a worker read, as calls still running would, and
/// counts them.
#[derive(Default)]
struct Kept(parking_lot::Mutex<Vec<rpc_codec::Frame>>, AtomicUsize);

impl TakeRequest for Arc<Kept> {
    fn take(
        &self,
        frames: &mut Vec<rpc_codec::Frame>,
        _received: std::time::Instant,
        _answers: &Arc<PoolAnswers>,
    ) -> Box<dyn FnOnce() + Send> {
        self.1.fetch_add(frames.len(), Ordering::SeqCst);
        self.0.lock().append(frames);
        Box::new(|| {})
    }
}

#[tokio::test]
async fn the_inbox_stays_within_a_few_looks_while_requests_are_held_and_is_freed_when_idle() {
    use tokio::io::AsyncWriteExt;
    let (read, write, mut client) = socket_pair().await;
    let kept = Arc::new(Kept::default());
    let (answers, _) = reading_answers_with(&write, 10_000, kept.clone());
    lend(&answers);
    // Runs of requests, each looked at while some requests before it are
    // still held (their calls running): what the inbox keeps stays within a
    // few looks' worth (its allocation and its spares), whatever the number
    // of runs, and every run is taken whole.
    let mut most = 0;
    for run in 0..40u64 {
        let mut bytes = BytesMut::new();
        for i in 0..8 {
            OutFrame::request(run * 8 + i, 0, "S", "m", Bytes::from(vec![7u8; 1024]))
                .encode(&mut bytes, 1 << 20)
                .unwrap();
        }
        client.write_all(&bytes).await.unwrap();
        let want = ((run + 1) * 8) as usize;
        look_until(&answers, || kept.1.load(Ordering::SeqCst) == want);
        assert_eq!(kept.1.load(Ordering::SeqCst), want, "run {run} taken whole");
        if run % 4 == 3 {
            // Every fourth run the calls before end.
            kept.0.lock().clear();
        }
        most = most.max(answers.state.lock().inbox.held());
    }
    assert!(
        most <= 4 * crate::reply::pool_reads::RECV_SIZE,
        "within a few looks' worth: {most} bytes"
    );
    kept.0.lock().clear();
    answers.release();
    assert_eq!(
        answers.state.lock().inbox.held(),
        0,
        "an idle connection's inbox holds nothing"
    );
    answers.close();
    drop((read, write));
}

/// A request of `len` body bytes.
fn request_of(id: u64, len: usize) -> BytesMut {
    let mut out = BytesMut::new();
    OutFrame::request(id, 0, "S", "m", Bytes::from(vec![7u8; len]))
        .encode(&mut out, 1 << 20)
        .unwrap();
    out
}

/// A request larger than one look (100 KiB) is taken whole by the looks of
/// a worker — its rest read once its header is in — and one past the
/// largest a worker reads goes back to the task. The socket's low-water
/// mark while lent is past the largest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_larger_than_a_look_is_taken_whole_and_one_past_the_largest_goes_back() {
    use crate::reply::pool_reads::{lent_lowat, READ_MAX, RECV_SIZE};
    use tokio::io::AsyncWriteExt;
    let (read, write, mut client) = socket_pair().await;
    let kept = Arc::new(Kept::default());
    let (answers, _) = reading_answers_with(&write, 1000, kept.clone());
    assert_eq!(answers.max_request, READ_MAX);
    assert!(lent_lowat(answers.max_request, true) > READ_MAX);
    assert_eq!(lent_lowat(answers.max_request, false), RECV_SIZE + 1);
    lend(&answers);
    let large = request_of(1, 100 << 10);
    assert!(large.len() > RECV_SIZE);
    // The client writes while the "worker" (this thread) looks.
    let writer = tokio::spawn(async move {
        client.write_all(&large).await.unwrap();
        client
    });
    look_until(&answers, || kept.1.load(Ordering::SeqCst) == 1);
    assert_eq!(kept.1.load(Ordering::SeqCst), 1, "taken within a second");
    let mut client = writer.await.unwrap();
    {
        let frames = kept.0.lock();
        assert_eq!(frames.len(), 1, "taken whole, once");
        assert_eq!(frames[0].header.request_id, 1);
        assert_eq!(frames[0].body.len(), 100 << 10);
    }
    assert!(answers.take_handed().is_none(), "nothing went back");
    // Past the largest a worker reads: back to the task, from its start.
    let too_large = request_of(2, READ_MAX + 1);
    let sent = too_large.clone();
    let writer = tokio::spawn(async move {
        // The rest stays unread until the task reads it.
        let _ = client.write_all(&too_large).await;
    });
    look_until(&answers, || answers.state.lock().handed.is_some());
    let handed = answers.take_handed().expect("handed back");
    assert!(!handed.bytes.is_empty());
    assert_eq!(
        &handed.bytes[..],
        &sent[..handed.bytes.len()],
        "what was read of it, from its start"
    );
    assert_eq!(kept.1.load(Ordering::SeqCst), 1, "not taken");
    answers.close();
    writer.abort();
    drop((read, write));
}
