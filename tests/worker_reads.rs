//! A lone caller, or a pipelining one, on pool dispatch: once a worker
//! keeps its rhythm, the worker reads the caller's next requests itself, on
//! the read side the connection lends it (`reply::pool_reads`). These tests
//! drive that path from a raw connection (one call at a time, as a lone
//! caller does, or many in flight) and check what must hold on it: every
//! call answered once, deadlines and `Cancel` frames honoured, a blocking
//! handler stalling nothing else of its connection, a graceful stop.
//!
//! Timings are bounds with a margin for a loaded 2-core machine, never
//! speed targets.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brisk::codec::{Code, Frame, FrameCodec, FrameKind, OutFrame};
use brisk::{Context, Dispatch, Server, ServerHandle, Status};
use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::Decoder;

mod common;

/// Handlers that block their worker.
#[brisk::service]
pub trait Lone {
    /// Blocks for up to `ms`, checking for cancellation each millisecond;
    /// returns `ms`.
    async fn block(&self, cx: &Context, ms: u64) -> Result<u64, Status>;
}

/// Cancellations the handlers saw, and the blocking calls that ran.
#[derive(Default)]
struct Seen {
    cancelled: AtomicUsize,
    blocking: AtomicUsize,
}

struct LoneImpl(Arc<Seen>);

impl Lone for LoneImpl {
    async fn block(&self, cx: &Context, ms: u64) -> Result<u64, Status> {
        if ms > 0 {
            self.0.blocking.fetch_add(1, Ordering::SeqCst);
        }
        let end = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < end {
            if cx.is_cancelled() {
                self.0.cancelled.fetch_add(1, Ordering::SeqCst);
                return Err(Status::new(Code::Cancelled, "stopped early"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(ms)
    }
}

/// What a loaded machine may add before a deadline or a cancellation is
/// seen (the handlers these tests stop block for 3 s).
const MARGIN: Duration = Duration::from_millis(1000);

/// One test at a time: they measure rhythms and bounds on two cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn bounded<F: std::future::Future<Output = ()>>(secs: u64, f: F) {
    let _alone = SERIAL.lock().await;
    common::bounded(secs, f).await;
}

async fn pool_server() -> (ServerHandle, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let server = Server::builder()
        .addr("127.0.0.1:0")
        .dispatch(Dispatch::Pool)
        .service(LoneServer::new(LoneImpl(seen.clone())))
        .start()
        .await
        .unwrap();
    (server, seen)
}

/// `Lone.{method}(ms)` as request `id`, in msgpack.
fn request(id: u64, method: &'static str, ms: u64) -> OutFrame {
    let serializer = brisk::SerializerKind::MsgPack;
    let body = brisk::codec::BodyCodec::encode_body(serializer, &(ms,)).unwrap();
    OutFrame::request(id, serializer.id(), "Lone", method, body)
}

/// A caller on one raw connection.
struct Raw {
    stream: TcpStream,
    codec: FrameCodec,
    buf: BytesMut,
}

impl Raw {
    async fn connect(server: &ServerHandle) -> Raw {
        Raw {
            stream: TcpStream::connect(server.local_addr()).await.unwrap(),
            codec: FrameCodec::new(1 << 20),
            buf: BytesMut::new(),
        }
    }

    /// Sends `Lone.block(ms)` as request `id`, `timeout_ms` in its header.
    async fn send(&mut self, id: u64, ms: u64, timeout_ms: u32) {
        let mut frame = request(id, "block", ms);
        frame.timeout_ms = timeout_ms;
        self.write(frame).await;
    }

    async fn write(&mut self, frame: OutFrame) {
        assert!(
            self.try_write(frame).await,
            "the server closed the connection"
        );
    }

    /// Writes `frame`; `false` when the server closed the connection.
    async fn try_write(&mut self, frame: OutFrame) -> bool {
        let mut out = BytesMut::new();
        frame.encode(&mut out, 1 << 20).unwrap();
        self.stream.write_all(&out).await.is_ok()
    }

    /// `block(0)` as request `id`; `false` when the server closed the
    /// connection.
    async fn try_call(&mut self, id: u64) -> bool {
        self.try_write(request(id, "block", 0)).await
    }

    /// The next frame from the server; `None` once it closed.
    async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = self.codec.decode(&mut self.buf).unwrap() {
                return Some(frame);
            }
            let n =
                tokio::time::timeout(Duration::from_secs(5), self.stream.read_buf(&mut self.buf))
                    .await
                    .expect("no frame within 5 s")
                    .ok()?;
            if n == 0 {
                return None;
            }
        }
    }

    /// The next frame, which must be call `id`'s `Ok` answer.
    async fn expect_ok(&mut self, id: u64) {
        let answer = self.next().await.expect("answered");
        assert_eq!(answer.header.request_id, id);
        assert_eq!(answer.code(), Code::Ok, "call {id}");
    }

    /// Calls `block(0)` one at a time until a worker has read `reads`
    /// requests itself (or `calls` were made), checking every answer;
    /// returns the next free request id.
    async fn keep_rhythm(&mut self, server: &ServerHandle, mut id: u64, reads: u64) -> u64 {
        let before = server.stats().worker_reads;
        for _ in 0..50_000 {
            self.send(id, 0, 0).await;
            let answer = self.next().await.expect("answered");
            assert_eq!(answer.header.request_id, id);
            assert_eq!(answer.code(), Code::Ok, "call {id}");
            id += 1;
            if server.stats().worker_reads >= before + reads {
                return id;
            }
        }
        panic!(
            "no worker read the lone caller's requests ({} of 50000)",
            server.stats().worker_reads - before
        );
    }
}

impl Raw {
    /// Keeps `depth` calls of `block(0)` in flight, the next sent as each
    /// answer comes, until a worker has read `reads` requests itself (or
    /// 200 000 calls were made); checks that every call answered so far is
    /// answered once, `Ok`. Returns at once, the caller still in its
    /// rhythm (a worker keeps reading), the next free request id and the
    /// calls still in flight. Ids start at 1 on a new server.
    async fn pipeline_open(
        &mut self,
        server: &ServerHandle,
        mut id: u64,
        depth: u64,
        reads: u64,
    ) -> (u64, HashSet<u64>) {
        let before = server.stats().worker_reads;
        let mut waiting = HashSet::new();
        let mut run = BytesMut::new();
        for _ in 0..depth {
            request(id, "block", 0).encode(&mut run, 1 << 20).unwrap();
            waiting.insert(id);
            id += 1;
        }
        self.stream.write_all(&run).await.unwrap();
        for _ in 0..200_000 {
            if server.stats().worker_reads - before >= reads {
                // Back at once, in the caller's rhythm: what it sends next
                // arrives while the server is still busy with these.
                return (id, waiting);
            }
            self.expect_ok_of(&mut waiting).await;
            self.send(id, 0, 0).await;
            waiting.insert(id);
            id += 1;
        }
        panic!(
            "workers read {} requests",
            server.stats().worker_reads - before
        );
    }

    /// [`pipeline_open`](Self::pipeline_open), then every call answered.
    async fn pipeline(&mut self, server: &ServerHandle, id: u64, depth: u64, reads: u64) -> u64 {
        let (id, mut waiting) = self.pipeline_open(server, id, depth, reads).await;
        while !waiting.is_empty() {
            self.expect_ok_of(&mut waiting).await;
        }
        id
    }

    /// The next frame, which must be the `Ok` answer of a call in
    /// `waiting` (taken out of it); returns its id.
    async fn expect_ok_of(&mut self, waiting: &mut HashSet<u64>) -> u64 {
        let answer = self.next().await.expect("answered");
        let id = answer.header.request_id;
        assert!(waiting.remove(&id), "call {id} answered once, when sent");
        assert_eq!(answer.code(), Code::Ok, "call {id}");
        id
    }
}

/// Tries of a run sent while a pipelining caller is in its rhythm, until a
/// worker read the whole run. The task reads it if it took its read side
/// back just then, or never lent it: on a loaded machine the workers often
/// finish a batch's calls before the task could lend. With two busy loops
/// on this 2-core machine a worker read the run within 1 to 8 tries; a try
/// costs tens of milliseconds plus the run's blocking call.
const RUN_TRIES: usize = 40;

/// How long the blocking call of a run blocks, when nothing cancels it.
const BLOCK: Duration = Duration::from_millis(400);

#[tokio::test]
async fn a_pipelining_callers_requests_are_read_by_a_worker_and_each_answered_once() {
    bounded(60, async {
        let (server, _) = pool_server().await;
        let mut raw = Raw::connect(&server).await;
        let next = raw.pipeline(&server, 1, 64, 2000).await;
        let stats = server.stats();
        assert_eq!(stats.requests, next - 1, "every call counted once");
        assert_eq!(stats.errors, 0);
        server.shutdown().await;
    })
    .await;
}

impl Raw {
    /// While a pipelining caller is in its rhythm (`waiting` in flight),
    /// sends one run — `block(ms)` as call `first`, `quick` calls of
    /// `block(0)` behind it, then, with `cancel`, the first call's `Cancel`
    /// — and waits until every other call is answered, `Ok`. Returns when
    /// the run was sent.
    async fn run_behind(
        &mut self,
        mut waiting: HashSet<u64>,
        first: u64,
        ms: u64,
        quick: u64,
        cancel: bool,
    ) -> Instant {
        let mut run = BytesMut::new();
        request(first, "block", ms)
            .encode(&mut run, 1 << 20)
            .unwrap();
        for i in 1..=quick {
            request(first + i, "block", 0)
                .encode(&mut run, 1 << 20)
                .unwrap();
            waiting.insert(first + i);
        }
        if cancel {
            OutFrame::control(FrameKind::Cancel, first)
                .encode(&mut run, 1 << 20)
                .unwrap();
        }
        let sent = Instant::now();
        self.stream.write_all(&run).await.unwrap();
        while !waiting.is_empty() {
            self.expect_ok_of(&mut waiting).await;
        }
        sent
    }
}

/// The workers' reads so far, for [`read_by_workers`], when the caller has
/// sent the requests before `next`: as many more as were not counted yet
/// (read since, by a worker or not), so that what workers read past it is
/// what the caller sends from `next` on. The requests count first: a request
/// counted between the two readings is in both.
fn worker_reads_before(server: &ServerHandle, next: u64) -> u64 {
    let counted = server.stats().requests;
    server.stats().worker_reads + (next - 1).saturating_sub(counted)
}

/// Whether workers read `run` requests past `reads`
/// ([`worker_reads_before`]); on the last of [`RUN_TRIES`], that they did.
fn read_by_workers(server: &ServerHandle, reads: u64, run: u64, tried: usize) -> bool {
    let read = server.stats().worker_reads.saturating_sub(reads) >= run;
    assert!(read || tried < RUN_TRIES, "no run read by a worker");
    read
}

#[tokio::test]
async fn a_blocking_call_in_a_run_a_worker_read_stalls_nothing_else() {
    bounded(60, async {
        let (server, _) = pool_server().await;
        let mut raw = Raw::connect(&server).await;
        let mut id = 1;
        for tried in 1..=RUN_TRIES {
            let (next, waiting) = raw.pipeline_open(&server, id, 64, 200).await;
            let reads = worker_reads_before(&server, next);
            // One run: a call that blocks, then 20 that do not.
            let block_ms = BLOCK.as_millis() as u64;
            let sent = raw.run_behind(waiting, next, block_ms, 20, false).await;
            // And a call sent while it still blocks.
            raw.send(next + 21, 0, 0).await;
            raw.expect_ok(next + 21).await;
            let after = sent.elapsed();
            assert!(after < BLOCK, "{after:?}");
            raw.expect_ok(next).await;
            if read_by_workers(&server, reads, 21, tried) {
                break;
            }
            id = next + 22;
        }
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_run_a_worker_read_whose_first_call_blocks_stalls_nothing_else() {
    bounded(60, async {
        let (server, _) = pool_server().await;
        let mut raw = Raw::connect(&server).await;
        let mut id = 1;
        for tried in 1..=RUN_TRIES {
            // A lone caller's rhythm: the worker that answers reads next, so
            // the run below is what it reads, blocking call first.
            let next = raw.keep_rhythm(&server, id, 20).await;
            let reads = worker_reads_before(&server, next);
            let block_ms = BLOCK.as_millis() as u64;
            let sent = raw
                .run_behind(HashSet::new(), next, block_ms, 10, false)
                .await;
            let after = sent.elapsed();
            assert!(after < BLOCK, "the calls behind waited {after:?}");
            raw.expect_ok(next).await;
            if read_by_workers(&server, reads, 11, tried) {
                break;
            }
            id = next + 11;
        }
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_cancel_behind_a_run_a_worker_read_finds_its_call() {
    bounded(60, async {
        let (server, seen) = pool_server().await;
        let mut raw = Raw::connect(&server).await;
        let mut id = 1;
        for tried in 1..=RUN_TRIES {
            let (next, waiting) = raw.pipeline_open(&server, id, 64, 200).await;
            let reads = worker_reads_before(&server, next);
            // One run: a call that blocks 3 s, 10 that do not, then its
            // cancel.
            let cancelled = raw.run_behind(waiting, next, 3000, 10, true).await;
            // The `Cancel` finds the call: the server counts it. The handler
            // sees it if a worker had started the call by then; a call still
            // queued is not run at all (on a loaded machine the `Cancel` can
            // come first).
            let found = || {
                server
                    .metrics()
                    .method(LoneClient::SERVICE, "block")
                    .map_or(0, |m| m.cancelled())
            };
            let seen_all =
                || seen.cancelled.load(Ordering::SeqCst) == seen.blocking.load(Ordering::SeqCst);
            while (found() < tried as u64 || !seen_all()) && cancelled.elapsed() < MARGIN {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            assert_eq!(found(), tried as u64, "found within {MARGIN:?}");
            assert!(seen_all(), "a handler that ran noticed within {MARGIN:?}");
            // Nothing is answered for the cancelled call.
            raw.send(next + 11, 0, 0).await;
            raw.expect_ok(next + 11).await;
            if read_by_workers(&server, reads, 11, tried) {
                break;
            }
            id = next + 12;
        }
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_lone_callers_requests_are_read_by_a_worker_and_every_one_is_answered() {
    bounded(60, async {
        let (server, _) = pool_server().await;
        let mut raw = Raw::connect(&server).await;
        let next = raw.keep_rhythm(&server, 1, 1000).await;
        let stats = server.stats();
        assert_eq!(stats.requests, next - 1, "every call counted once");
        assert_eq!(stats.errors, 0);
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_bad_request_a_worker_read_is_answered_and_the_rhythm_goes_on() {
    bounded(60, async {
        let (server, _) = pool_server().await;
        let mut raw = Raw::connect(&server).await;
        let mut id = raw.keep_rhythm(&server, 1, 100).await;
        for _ in 0..20 {
            raw.write(request(id, "nope", 0)).await;
            let answer = raw.next().await.expect("answered");
            assert_eq!(answer.header.request_id, id);
            assert_ne!(answer.code(), Code::Ok, "an unknown method is an error");
            id = raw.keep_rhythm(&server, id + 1, 10).await;
        }
        assert_eq!(server.stats().errors, 20);
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_call_a_worker_read_is_answered_at_its_deadline_and_cancelled() {
    bounded(60, async {
        let (server, seen) = pool_server().await;
        let mut raw = Raw::connect(&server).await;
        let id = raw.keep_rhythm(&server, 1, 100).await;
        let sent = Instant::now();
        raw.send(id, 3000, 150).await;
        let answer = raw.next().await.expect("answered");
        let after = sent.elapsed();
        assert_eq!(answer.header.request_id, id);
        assert_eq!(answer.code(), Code::DeadlineExceeded);
        assert!(
            after < Duration::from_millis(150) + MARGIN,
            "after {after:?}"
        );
        let deadline = Instant::now() + MARGIN;
        while seen.cancelled.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(
            seen.cancelled.load(Ordering::SeqCst),
            1,
            "the handler saw it"
        );
        // The connection carries on in rhythm.
        raw.keep_rhythm(&server, id + 1, 10).await;
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_cancel_reaches_a_blocking_call_a_worker_read() {
    bounded(60, async {
        let (server, seen) = pool_server().await;
        let mut raw = Raw::connect(&server).await;
        let id = raw.keep_rhythm(&server, 1, 100).await;
        raw.send(id, 3000, 0).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let cancelled = Instant::now();
        raw.write(OutFrame::control(FrameKind::Cancel, id)).await;
        while seen.cancelled.load(Ordering::SeqCst) == 0 && cancelled.elapsed() < MARGIN {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(
            seen.cancelled.load(Ordering::SeqCst),
            1,
            "noticed within {MARGIN:?}"
        );
        // Nothing is answered for a cancelled call: the next answer is the
        // next call's.
        raw.send(id + 1, 0, 0).await;
        let answer = raw.next().await.expect("answered");
        assert_eq!(answer.header.request_id, id + 1);
        assert_eq!(answer.code(), Code::Ok);
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_blocking_call_a_worker_read_stalls_nothing_else_of_its_connection() {
    bounded(60, async {
        let (server, _) = pool_server().await;
        let mut raw = Raw::connect(&server).await;
        let id = raw.keep_rhythm(&server, 1, 100).await;
        let sent = Instant::now();
        raw.send(id, 2000, 0).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        raw.send(id + 1, 0, 0).await;
        let first = raw.next().await.expect("answered");
        assert_eq!(
            first.header.request_id,
            id + 1,
            "the second call is answered while the first blocks"
        );
        assert!(
            sent.elapsed() < Duration::from_millis(2000),
            "{:?}",
            sent.elapsed()
        );
        raw.expect_ok(id).await;
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_graceful_stop_in_rhythm_answers_or_refuses_every_call() {
    bounded(60, async {
        let (server, _) = pool_server().await;
        let mut raw = Raw::connect(&server).await;
        let mut id = raw.keep_rhythm(&server, 1, 100).await;
        let stop = tokio::spawn(server.shutdown());
        // Calls go on until the server says it stops or closes.
        let mut refused = false;
        for _ in 0..100_000 {
            if !raw.try_call(id).await {
                break;
            }
            match raw.next().await {
                Some(frame) if frame.code() == Code::Ok => {
                    assert_eq!(frame.header.request_id, id);
                }
                Some(frame) => {
                    assert_eq!(frame.code(), Code::ShuttingDown, "{frame:?}");
                    refused = true;
                    break;
                }
                None => break,
            }
            id += 1;
        }
        let report = stop.await.unwrap();
        assert!(report.drained, "every call in progress answered");
        let _ = refused;
    })
    .await;
}
