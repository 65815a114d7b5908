//! raw: a minimal hand-written pipelined tokio echo — the ceiling.
//!
//! Frames are a 4-byte big-endian length and the payload. The server reads
//! whatever is available, answers every complete frame into one buffer and
//! writes it with one `write_all`. The client has, per connection, a writer task
//! that takes the first queued request plus everything else already queued,
//! writes them with one `write_all`, and a reader task that completes the calls
//! in order (responses on one connection come back in request order).
//!
//! The writer yields once between taking the first request and draining the
//! queue. Without it the coalescing hardly happens on a multi-thread runtime: the
//! first caller's `send` wakes the writer into the worker's LIFO slot, so it runs
//! right after that one caller, before the other callers woken by the same read
//! have queued anything — about one `write` per call. With the yield the writer
//! runs after them and writes them all at once (measured: ~40 calls per `write`
//! at 1:100:1024 instead of ~1, and several times the throughput).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{mpsc as std_mpsc, Arc};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use crate::load::Caller;

/// Largest frame either side accepts.
const MAX_FRAME: usize = 16 << 20;
/// A client write batch is flushed once it holds this much.
const MAX_BATCH: usize = 256 << 10;

/// Serves until `stop` fires; reports the bound address on `ready`.
pub async fn serve(
    stop: oneshot::Receiver<()>,
    ready: std_mpsc::Sender<Result<SocketAddr, String>>,
) {
    let listener = match TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(e.to_string()));
            return;
        }
    };
    let _ = ready.send(listener.local_addr().map_err(|e| e.to_string()));
    let accept = async {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(serve_connection(stream));
        }
    };
    tokio::select! {
        _ = stop => {}
        _ = accept => {}
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
        while input.len() >= 4 {
            let len = u32::from_be_bytes(input[..4].try_into().expect("4 bytes")) as usize;
            if len > MAX_FRAME {
                return Err(std::io::Error::other("frame too large"));
            }
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

type Reply = oneshot::Sender<Bytes>;

/// The raw caller: the request queue of one connection.
#[derive(Clone)]
pub struct RawCaller {
    queue: mpsc::Sender<(Bytes, Reply)>,
}

impl Caller for RawCaller {
    async fn call(&mut self, payload: Bytes) -> Result<Bytes, String> {
        let (tx, rx) = oneshot::channel();
        self.queue
            .send((payload, tx))
            .await
            .map_err(|_| "raw connection closed".to_string())?;
        rx.await
            .map_err(|_| "raw connection closed before the answer".to_string())
    }
}

/// Opens `conns` connections, each with its writer and reader task.
pub async fn connect(addr: SocketAddr, conns: usize) -> Result<Vec<RawCaller>, String> {
    let mut callers = Vec::with_capacity(conns);
    for _ in 0..conns {
        let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (read_half, write_half) = stream.into_split();
        let (tx, rx) = mpsc::channel(4096);
        let waiting = Arc::new(Mutex::new(VecDeque::new()));
        tokio::spawn(write_loop(write_half, rx, waiting.clone()));
        tokio::spawn(read_loop(read_half, waiting));
        callers.push(RawCaller { queue: tx });
    }
    Ok(callers)
}

async fn write_loop(
    mut io: OwnedWriteHalf,
    mut rx: mpsc::Receiver<(Bytes, Reply)>,
    waiting: Arc<Mutex<VecDeque<Reply>>>,
) -> std::io::Result<()> {
    let mut buf = BytesMut::with_capacity(64 << 10);
    let mut replies = Vec::new();
    while let Some(first) = rx.recv().await {
        // Let the callers that are already runnable queue their requests first (the
        // first send woke this task into the scheduler's LIFO slot, ahead of them).
        tokio::task::yield_now().await;
        let mut next = Some(first);
        while let Some((payload, reply)) = next.take() {
            buf.put_u32(payload.len() as u32);
            buf.put_slice(&payload);
            replies.push(reply);
            if buf.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        // Registered before the write: the answer may arrive before write_all returns.
        waiting.lock().extend(replies.drain(..));
        io.write_all(&buf).await?;
        buf.clear();
    }
    Ok(())
}

async fn read_loop(
    mut io: OwnedReadHalf,
    waiting: Arc<Mutex<VecDeque<Reply>>>,
) -> std::io::Result<()> {
    let mut input = BytesMut::with_capacity(64 << 10);
    loop {
        if input.capacity() - input.len() < 16 << 10 {
            input.reserve(64 << 10);
        }
        if io.read_buf(&mut input).await? == 0 {
            return Ok(());
        }
        while input.len() >= 4 {
            let len = u32::from_be_bytes(input[..4].try_into().expect("4 bytes")) as usize;
            if len > MAX_FRAME {
                return Err(std::io::Error::other("frame too large"));
            }
            if input.len() < 4 + len {
                input.reserve(4 + len - input.len());
                break;
            }
            input.advance(4);
            let payload = input.split_to(len).freeze();
            let Some(reply) = waiting.lock().pop_front() else {
                return Err(std::io::Error::other("an answer nobody asked for"));
            };
            let _ = reply.send(payload);
        }
    }
}
