//! One task per accepted connection: read request frames, route them, run them
//! (on this task, or on the worker pool), answer through the connection's
//! [`FrameWriter`].
//!
//! In `direct` mode the handlers' futures are polled by this very task (a
//! `FuturesUnordered`), so several calls of one connection still progress
//! concurrently without a task spawn per call, and a handler that blocks stalls
//! only its own connection — exactly jkrpc's "handle in the I/O thread" trade-off.
//!
//! Each connection has at most `max_in_flight_per_connection` calls in progress;
//! at the limit the task stops reading, and TCP flow control pushes back on the
//! client. During graceful shutdown the task keeps reading only to answer new
//! requests `ShuttingDown`, waits for its in-flight calls, lets the writer flush,
//! and closes.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::panic::AssertUnwindSafe;
use std::task::Poll;

use bytes::BytesMut;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use rpc_codec::{Frame, FrameKind, OutFrame};
use rpc_core::{Dispatch, RpcError, RpcRequest, SerializerKind};
use rpc_transport::heartbeat::{self, Activity};
use rpc_transport::{CloseSignal, FrameReader, FrameWriter, Outbound};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tracing::{debug, trace, warn};

use crate::dispatch::{answer_frame, finish_call, start_call, InFlight, PoolJob, Reply, ServerCtx};
use crate::router::RouteEntry;

/// Decrements the open-connection gauge however the task ends.
struct OpenGuard(Arc<ServerCtx>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0
            .stats
            .open_connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves a plain TCP connection (split with `into_split`, the fast path).
pub(crate) async fn serve_connection(
    stream: TcpStream,
    peer_addr: SocketAddr,
    ctx: Arc<ServerCtx>,
) {
    let open = OpenGuard(ctx.clone());
    if let Err(e) = stream.set_nodelay(ctx.config.transport.nodelay) {
        debug!(peer = %peer_addr, error = %e, "could not set TCP_NODELAY");
    }
    let (read_half, write_half) = stream.into_split();
    serve_halves(read_half, write_half, peer_addr, ctx, open).await
}

/// How long a client gets to complete the TLS handshake.
#[cfg(feature = "tls")]
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves a TLS connection: handshake (bounded by a timeout; a failure closes
/// only this connection), then the same loop over `tokio::io::split` halves.
#[cfg(feature = "tls")]
pub(crate) async fn serve_tls_connection(
    stream: TcpStream,
    peer_addr: SocketAddr,
    ctx: Arc<ServerCtx>,
    acceptor: rpc_transport::tls::TlsAcceptor,
) {
    let open = OpenGuard(ctx.clone());
    if let Err(e) = stream.set_nodelay(ctx.config.transport.nodelay) {
        debug!(peer = %peer_addr, error = %e, "could not set TCP_NODELAY");
    }
    let peer = peer_addr.to_string();
    let handshake = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream, &peer));
    let tls_stream = tokio::select! {
        r = handshake => match r {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                warn!(%peer, error = %e, "closing connection");
                return;
            }
            Err(_) => {
                warn!(%peer, timeout = ?TLS_HANDSHAKE_TIMEOUT, "TLS handshake timed out: connection closed");
                return;
            }
        },
        _ = ctx.force_close.cancelled() => return,
    };
    let (read_half, write_half) = tokio::io::split(tls_stream);
    serve_halves(read_half, write_half, peer_addr, ctx, open).await
}

async fn serve_halves<R, W>(
    read_half: R,
    write_half: W,
    peer_addr: SocketAddr,
    ctx: Arc<ServerCtx>,
    _open: OpenGuard,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let transport = &ctx.config.transport;
    let peer: Arc<str> = peer_addr.to_string().into();
    let close = Arc::new(CloseSignal::new());
    let writer = FrameWriter::spawn_counted(
        write_half,
        transport,
        close.clone(),
        peer.clone(),
        Some(ctx.metrics.io.clone()),
    );
    let mut reader = FrameReader::new(
        read_half,
        transport.max_frame_size,
        transport.read_buffer_min,
        transport.read_buffer_max,
    )
    .with_counters(ctx.metrics.io.clone());
    let activity = Arc::new(Activity::default());
    heartbeat::spawn(
        activity.clone(),
        transport.heartbeat_interval,
        transport.idle_timeout,
        None,
        close.clone(),
    );

    let in_flight = Arc::new(InFlight::default());
    let max_in_flight = ctx.config.max_in_flight_per_connection;
    let mut direct = FuturesUnordered::new();
    let mut answers = Answers::new(transport.max_frame_size, transport.max_batch_bytes);
    let mut stopping = false;
    // A frame read by the `select!` below, handled at the top of the next turn
    // together with every frame already buffered behind it.
    let mut next_frame: Option<Frame> = None;

    // Created once and pinned: re-creating these waiters on every frame would
    // re-register them (a lock each) per request.
    let closed = close.closed();
    let forced = ctx.force_close.cancelled();
    let stop = ctx.stopping.cancelled();
    tokio::pin!(closed, forced, stop);
    'serve: loop {
        // Handle the frame just read and every complete frame buffered behind
        // it, without going back to the socket. One clock reading per call: the
        // end of one call is the start of the next.
        let mut clock = Instant::now();
        loop {
            if in_flight.get() >= max_in_flight {
                break;
            }
            let frame = match next_frame.take() {
                Some(frame) => frame,
                None => match reader.try_next_buffered() {
                    Ok(Some(frame)) => frame,
                    Ok(None) => break,
                    Err(e) => {
                        warn!(%peer, error = %e, "closing connection: bad input from client");
                        close.close(e.to_string());
                        break 'serve;
                    }
                },
            };
            activity.bump();
            let conn = Conn {
                ctx: &ctx,
                writer: &writer,
                peer: peer_addr,
                stopping,
            };
            let Some((call, req)) = conn.on_frame(frame, clock, &in_flight, &mut answers) else {
                continue;
            };
            // Poll the handler once right here: most finish at once (no I/O),
            // are answered into this batch and never need a slot in `direct`.
            let mut running = AssertUnwindSafe(start_call(&ctx, call.route, req)).catch_unwind();
            match futures::poll!(&mut running) {
                Poll::Ready(outcome) => {
                    let now = Instant::now();
                    call.answer(&ctx, now - clock, outcome, &mut answers);
                    clock = now;
                }
                Poll::Pending => {
                    let permit = in_flight.acquire();
                    direct.push(async move {
                        let outcome = running.await;
                        (call, permit, outcome)
                    });
                }
            }
            if answers.is_full() {
                answers.flush(&writer).await;
            }
        }
        // The batch is handled: its answers go to the writer in one send.
        answers.flush(&writer).await;

        if stopping && in_flight.get() == 0 {
            break;
        }
        let can_read = in_flight.get() < max_in_flight;
        // Hot branches first: the waiters below are polled (a lock each) only
        // when the read has to wait. A close is also noticed through one atomic
        // load per turn.
        if close.is_closed() {
            break;
        }
        tokio::select! {
            biased;
            next = reader.next(), if can_read => match next {
                Ok(Some(frame)) => next_frame = Some(frame),
                Ok(None) => {
                    close.close("the client closed the connection");
                    break;
                }
                Err(e) => {
                    warn!(%peer, error = %e, "closing connection: bad input from client");
                    close.close(e.to_string());
                    break;
                }
            },
            Some((call, permit, outcome)) = direct.next(), if !direct.is_empty() => {
                let elapsed = call.started.elapsed();
                call.answer(&ctx, elapsed, outcome, &mut answers);
                drop(permit);
                // Answer every other call that is done too, in the same batch.
                while let Poll::Ready(Some((call, permit, outcome))) = futures::poll!(direct.next()) {
                    let elapsed = call.started.elapsed();
                    call.answer(&ctx, elapsed, outcome, &mut answers);
                    drop(permit);
                    if answers.is_full() {
                        break;
                    }
                }
            }
            _ = in_flight.changed.notified(), if !can_read || stopping => {}
            _ = &mut closed => break,
            _ = &mut forced => {
                close.close("server shut down before this connection's calls finished");
                break;
            }
            _ = &mut stop, if !stopping => stopping = true,
        }
    }
    drop(direct);
    // Answers already encoded still go out (a bad frame after good ones).
    answers.flush(&writer).await;
    // Let the writer flush what is queued (it closes the signal when done),
    // unless the server is being forced down.
    drop(writer);
    if let Some(reason) = close.write_error() {
        // The writer already stopped on a write error: nothing left to flush.
        close.close(reason.to_owned());
    }
    tokio::select! {
        _ = close.closed() => {}
        _ = ctx.force_close.cancelled() => close.close("server shut down"),
        _ = tokio::time::sleep(Duration::from_secs(5)) => close.close("writer did not finish in 5 s"),
    }
    debug!(%peer, reason = close.reason(), "connection closed");
}

/// The answers of one read batch, encoded back to back into one buffer and
/// handed to the writer with one send (one queue slot, one wake-up) instead of
/// one send per call. The buffer is split off on each flush and its space
/// reclaimed once the writer has copied it, so a busy connection encodes its
/// answers without allocating.
struct Answers {
    buf: BytesMut,
    max_frame: usize,
    max_batch: usize,
}

impl Answers {
    fn new(max_frame: usize, max_batch: usize) -> Self {
        Answers {
            // Empty until the first answer: an idle connection costs nothing here.
            buf: BytesMut::new(),
            max_frame,
            max_batch: max_batch.max(1),
        }
    }

    fn push(&mut self, frame: OutFrame) {
        if let Err(e) = frame.encode(&mut self.buf, self.max_frame) {
            // Only an answer can be too large (and `finish_call` already turns
            // an oversize result into an error): answer with the error instead
            // of leaving the caller to its timeout.
            let error = OutFrame::error(frame.request_id, frame.serializer, &e);
            if let Err(e) = error.encode(&mut self.buf, self.max_frame) {
                warn!(error = %e, request_id = frame.request_id, "answer not encodable: dropped");
            }
        }
    }

    fn is_full(&self) -> bool {
        self.buf.len() >= self.max_batch
    }

    async fn flush(&mut self, writer: &FrameWriter) {
        if !self.buf.is_empty() {
            let frames = self.buf.split().freeze();
            // A closed writer fails every pending call on the client side.
            let _ = writer.send(Outbound::encoded(frames)).await;
        }
    }
}

/// A call run on the connection task (direct dispatch), minus its request.
struct DirectCall<'a> {
    route: &'a RouteEntry,
    id: u64,
    serializer: u8,
    started: Instant,
}

impl DirectCall<'_> {
    /// Records the call's outcome and encodes its answer.
    fn answer(
        self,
        ctx: &ServerCtx,
        elapsed: Duration,
        outcome: std::thread::Result<Result<bytes::Bytes, RpcError>>,
        answers: &mut Answers,
    ) {
        let result = finish_call(ctx, self.route, elapsed, outcome);
        answers.push(answer_frame(self.id, self.serializer, result));
    }
}

struct Conn<'a> {
    ctx: &'a Arc<ServerCtx>,
    writer: &'a FrameWriter,
    peer: SocketAddr,
    stopping: bool,
}

impl<'a> Conn<'a> {
    fn reply_error(&self, id: u64, serializer: u8, err: RpcError, answers: &mut Answers) {
        self.ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
        answers.push(OutFrame::error(id, serializer, &err));
    }

    /// Handles one frame (received at `received`); returns a call for the
    /// caller to run when dispatch is direct. Answers that need no handler
    /// (pongs, errors) go into `answers`.
    fn on_frame(
        &self,
        frame: Frame,
        received: Instant,
        in_flight: &Arc<InFlight>,
        answers: &mut Answers,
    ) -> Option<(DirectCall<'a>, RpcRequest)> {
        let id = frame.header.request_id;
        match frame.header.kind {
            FrameKind::Request => {}
            FrameKind::Ping => {
                answers.push(OutFrame::control(FrameKind::Pong, id));
                return None;
            }
            FrameKind::Pong => return None,
            FrameKind::Cancel => {
                trace!(peer = %self.peer, request_id = id, "cancel received (advisory; the call runs to completion)");
                return None;
            }
            FrameKind::Response => {
                warn!(peer = %self.peer, request_id = id, "a client sent a response frame: ignored");
                return None;
            }
        }
        self.ctx.stats.requests.fetch_add(1, Ordering::Relaxed);
        let raw_ser = frame.header.serializer;
        let serializer = match SerializerKind::from_id(raw_ser) {
            Ok(s) => s,
            Err(e) => {
                self.reply_error(id, raw_ser, e, answers);
                return None;
            }
        };
        if self.stopping {
            self.reply_error(id, raw_ser, RpcError::ShuttingDown, answers);
            return None;
        }
        let ctx: &'a ServerCtx = self.ctx;
        let route = match ctx
            .router
            .route_ref(frame.meta.service(), frame.meta.method())
        {
            Ok(r) => r,
            Err(e) => {
                self.reply_error(id, raw_ser, e, answers);
                return None;
            }
        };
        let timeout_ms = frame.header.timeout_ms;
        let req = RpcRequest {
            service: Cow::Borrowed(route.service),
            method: Cow::Borrowed(route.method),
            serializer,
            metadata: frame.meta.metadata,
            body: frame.body,
            timeout: (timeout_ms > 0).then(|| Duration::from_millis(timeout_ms as u64)),
            peer: Some(self.peer),
        };
        match (self.ctx.dispatch(), &self.ctx.pool) {
            (Dispatch::Pool, Some(pool)) => {
                let job = PoolJob {
                    ctx: self.ctx.clone(),
                    route: route.clone(),
                    req,
                    received,
                    reply: Reply::Frame {
                        writer: self.writer.clone(),
                        id,
                    },
                    permit: Some(in_flight.acquire()),
                };
                if let Err(busy) = job.submit(pool) {
                    answers.push(OutFrame::error(id, raw_ser, &busy));
                }
                None
            }
            _ => Some((
                DirectCall {
                    route,
                    id,
                    serializer: raw_ser,
                    started: received,
                },
                req,
            )),
        }
    }
}
