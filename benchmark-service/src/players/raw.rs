//! The raw player: a minimal hand-written pipelined tokio echo — the ceiling the frameworks
//! are measured against, so it does only what an echo over TCP cannot avoid. It implements
//! `echo` only; any other scenario is an error ([`super::Player::supports`] says so too).
//!
//! Frames are a 4-byte big-endian length and the payload. The server reads whatever is
//! available, answers every complete frame into one buffer and writes it with one
//! `write_all`. The client has, per connection, a writer task that takes the first queued
//! request plus everything else already queued and writes them with one `write_all`, and a
//! reader task that completes the calls in order (answers on one connection come back in
//! request order, so a FIFO of waiting callers is all the matching needed).
//!
//! The writer yields once between taking the first request and draining the queue. Without it
//! the coalescing hardly happens on a multi-thread runtime: the first caller's `send` wakes the
//! writer into the worker's LIFO slot, so it runs right after that one caller, before the other
//! callers woken by the same read have queued anything — about one `write` per call. With the
//! yield the writer runs after them and writes them all at once.
//!
//! The scene's connections are that many TCP connections, caller `i` on connection
//! `i % connections`; the per-call timeout is `tokio::time::timeout` around the call. When a
//! connection fails, its waiting callers and every later call on it fail at once instead of
//! waiting for the timeout.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use super::call::{CallError, Reply};
use crate::scenario::Scenario;
use crate::store::MessageStore;

/// What the suite sets for raw.
pub const SETTINGS: &str = "echo only: length-prefixed frames over TCP with TCP_NODELAY, \
pipelined, the client coalescing every queued request into one write and the server every \
answer of one read; the scene's connections are that many TCP connections (caller i on \
connection i % connections); per-call timeout via tokio::time::timeout; no serializer, no \
headers, nothing else to set";

/// Largest frame either side accepts: the suite's largest echo payload (`--payload` is at
/// most 64 MiB).
const MAX_FRAME: usize = 64 << 20;
/// A client write batch is written once it holds this much.
const MAX_BATCH: usize = 256 << 10;
/// Requests queued per connection before callers wait to queue theirs.
const QUEUE: usize = 4096;

/// Where a caller waits for its answer.
type Answer = oneshot::Sender<Bytes>;

/// The callers of one connection whose requests are written, in request order; `closed` once
/// the connection failed (nothing is registered after that).
#[derive(Default)]
struct Waiting {
    closed: bool,
    queue: VecDeque<Answer>,
}

/// Marks the connection failed and drops its waiting callers (each sees "closed").
fn close(waiting: &Mutex<Waiting>) {
    let mut w = waiting.lock();
    w.closed = true;
    w.queue.clear();
}

/// A connected raw client: the request queue of each connection; clones share them.
#[derive(Clone)]
pub struct Client {
    queues: Arc<[mpsc::Sender<(Bytes, Answer)>]>,
    timeout: Duration,
}

impl Client {
    /// Opens `connections` (at least 1) connections to `addr`, each with its writer and reader
    /// task; every call (and each connect) is bounded by `timeout`.
    pub async fn connect(
        addr: SocketAddr,
        connections: usize,
        timeout: Duration,
    ) -> Result<Client, CallError> {
        let mut queues = Vec::with_capacity(connections.max(1));
        for _ in 0..connections.max(1) {
            let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
                .await
                .map_err(|_| CallError::new(format!("raw: connecting to {addr} timed out")))?
                .map_err(|e| CallError::new(format!("raw: cannot connect to {addr}: {e}")))?;
            stream
                .set_nodelay(true)
                .map_err(|e| CallError::new(format!("raw: TCP_NODELAY: {e}")))?;
            let (read_half, write_half) = stream.into_split();
            let (tx, rx) = mpsc::channel(QUEUE);
            let waiting = Arc::new(Mutex::new(Waiting::default()));
            tokio::spawn(write_loop(write_half, rx, waiting.clone()));
            tokio::spawn(read_loop(read_half, waiting));
            queues.push(tx);
        }
        Ok(Client {
            queues: queues.into(),
            timeout,
        })
    }

    /// One echo of `payload` on connection `caller % connections`; any other scenario is an
    /// error.
    pub async fn call(
        &self,
        caller: usize,
        scenario: Scenario,
        _key: i64,
        payload: &Bytes,
    ) -> Result<Reply, CallError> {
        if scenario != Scenario::Echo {
            return Err(CallError::new("raw implements echo only"));
        }
        if payload.len() > MAX_FRAME {
            return Err(CallError::new(format!(
                "raw: a {} B payload is over the {MAX_FRAME} B frame limit",
                payload.len()
            )));
        }
        let queue = &self.queues[caller % self.queues.len()];
        let (tx, rx) = oneshot::channel();
        let answer = async {
            queue
                .send((payload.clone(), tx))
                .await
                .map_err(|_| CallError::new("raw: connection closed"))?;
            rx.await
                .map_err(|_| CallError::new("raw: connection closed before the answer"))
        };
        match tokio::time::timeout(self.timeout, answer).await {
            Ok(back) => back.map(Reply::Echo),
            Err(_) => Err(CallError::new(format!(
                "raw: no answer within {:?}",
                self.timeout
            ))),
        }
    }
}

async fn write_loop(
    mut io: OwnedWriteHalf,
    mut rx: mpsc::Receiver<(Bytes, Answer)>,
    waiting: Arc<Mutex<Waiting>>,
) {
    let mut buf = BytesMut::with_capacity(64 << 10);
    let mut answers = Vec::new();
    while let Some(first) = rx.recv().await {
        // Let the callers that are already runnable queue their requests first (the first
        // send woke this task into the scheduler's LIFO slot, ahead of them).
        tokio::task::yield_now().await;
        let mut next = Some(first);
        while let Some((payload, answer)) = next.take() {
            // `call` refused payloads over MAX_FRAME, so the length fits in a u32.
            buf.put_u32(payload.len() as u32);
            buf.put_slice(&payload);
            answers.push(answer);
            if buf.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        // Registered before the write: the answer may arrive before write_all returns.
        {
            let mut w = waiting.lock();
            if w.closed {
                // The reader saw the connection end: dropping `rx` fails every later call.
                return;
            }
            w.queue.extend(answers.drain(..));
        }
        if let Err(e) = io.write_all(&buf).await {
            tracing::debug!("raw: write failed: {e}");
            close(&waiting);
            return;
        }
        buf.clear();
    }
}

async fn read_loop(mut io: OwnedReadHalf, waiting: Arc<Mutex<Waiting>>) {
    if let Err(e) = read_answers(&mut io, &waiting).await {
        tracing::debug!("raw: connection failed: {e}");
    }
    close(&waiting);
}

async fn read_answers(io: &mut OwnedReadHalf, waiting: &Mutex<Waiting>) -> std::io::Result<()> {
    let mut input = BytesMut::with_capacity(64 << 10);
    loop {
        if input.capacity() - input.len() < 16 << 10 {
            input.reserve(64 << 10);
        }
        if io.read_buf(&mut input).await? == 0 {
            return Ok(());
        }
        while let Some(len) = frame_len(&input)? {
            if input.len() < 4 + len {
                input.reserve(4 + len - input.len());
                break;
            }
            input.advance(4);
            let payload = input.split_to(len).freeze();
            let Some(answer) = waiting.lock().queue.pop_front() else {
                return Err(std::io::Error::other("an answer nobody asked for"));
            };
            // The caller may have timed out and gone: its answer is dropped.
            let _ = answer.send(payload);
        }
    }
}

/// The length of the frame at the start of `input` (`None` until its 4-byte header is in).
fn frame_len(input: &[u8]) -> std::io::Result<Option<usize>> {
    let Some(header) = input.first_chunk::<4>() else {
        return Ok(None);
    };
    let len = u32::from_be_bytes(*header) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::other(format!(
            "a {len} B frame is over the {MAX_FRAME} B limit"
        )));
    }
    Ok(Some(len))
}

/// Serves the raw echo on `listener` (the store is unused: raw is an echo only). Runs until the
/// process ends; a failed accept is logged and skipped (after a short pause, so running out of
/// descriptors does not spin).
pub async fn serve(listener: TcpListener, _store: MessageStore) -> std::io::Result<()> {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("raw: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("raw: TCP_NODELAY on an accepted connection: {e}");
        }
        tokio::spawn(async move {
            if let Err(e) = serve_connection(stream).await {
                tracing::debug!("raw: connection ended: {e}");
            }
        });
    }
}

async fn serve_connection(mut stream: TcpStream) -> std::io::Result<()> {
    let mut input = BytesMut::with_capacity(64 << 10);
    let mut output = BytesMut::with_capacity(64 << 10);
    loop {
        if input.capacity() - input.len() < 16 << 10 {
            input.reserve(64 << 10);
        }
        if stream.read_buf(&mut input).await? == 0 {
            return Ok(());
        }
        while let Some(len) = frame_len(&input)? {
            if input.len() < 4 + len {
                input.reserve(4 + len - input.len());
                break;
            }
            // The answer is the same frame: length and payload.
            output.extend_from_slice(&input[..4 + len]);
            input.advance(4 + len);
        }
        if !output.is_empty() {
            stream.write_all(&output).await?;
            output.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{self, TestServer};
    use super::super::PlayerClient;
    use super::*;

    async fn setup(tag: &str) -> (TestServer, PlayerClient) {
        let server = test_support::start(tag, serve).await;
        let client = Client::connect(server.addr, 2, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(client.queues.len(), 2);
        (server, PlayerClient::Raw(client))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn echo_answers_the_same_bytes() {
        let (_server, client) = setup("raw-echo").await;
        test_support::check_echo(&client).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn other_scenarios_are_errors_and_echo_goes_on() {
        let (_server, client) = setup("raw-other").await;
        for scenario in [Scenario::Nth, Scenario::Cache, Scenario::File, Scenario::Db] {
            let e = client
                .call(0, scenario, 1, &Bytes::new())
                .await
                .unwrap_err();
            assert_eq!(e, CallError::new("raw implements echo only"));
        }
        test_support::call_ok(&client, 0, Scenario::Echo, 1, &test_support::pattern(10)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_all_succeed() {
        let (_server, client) = setup("raw-concurrent").await;
        test_support::check_concurrent(&client, &[Scenario::Echo]).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_server_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Accepts and holds the connection, never answering.
        let held = tokio::spawn(async move { listener.accept().await.map(|(s, _)| s) });
        let client = Client::connect(addr, 1, Duration::from_millis(200))
            .await
            .unwrap();
        let e = client
            .call(0, Scenario::Echo, 1, &Bytes::from_static(b"x"))
            .await
            .unwrap_err();
        assert!(e.0.contains("no answer within"), "{e}");
        drop(held);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_connection_fails_calls_at_once() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Accepts, then closes the connection.
        let closer = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            drop(stream);
        });
        let client = Client::connect(addr, 1, Duration::from_secs(60))
            .await
            .unwrap();
        closer.await.unwrap();
        let started = std::time::Instant::now();
        for _ in 0..3 {
            let e = client
                .call(0, Scenario::Echo, 1, &Bytes::from_static(b"x"))
                .await
                .unwrap_err();
            assert!(e.0.contains("closed"), "{e}");
        }
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
