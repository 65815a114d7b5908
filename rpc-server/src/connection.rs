//! One task per accepted connection: read request frames, route them, run them
//! (on this task, or on the worker pool), and write the answers — all from the
//! same task, the way a hand-written event loop would.
//!
//! # Why the connection task writes its own answers
//!
//! A client needs a separate writer task: many caller tasks share one
//! connection. A server connection has one producer of answers — itself — plus
//! the worker pool's threads in `pool` mode. So the task reads whatever is
//! buffered, handles every complete frame, encodes the answers into one
//! [`Outbox`] buffer and writes it with one non-blocking `write` before it goes
//! back to the socket: no channel send, no second task to wake and no yield
//! per answer (a separate writer task cost ~10 % of the server's CPU and one
//! extra scheduler pass of latency per call). Answers that cannot be written
//! now stay in the outbox; the task then waits for the socket to become
//! writable in the same `select!` that waits for input. Pool threads encode
//! their answers into the connection's [`PoolAnswers`], which the task moves
//! into the outbox (see `answers.rs`).
//!
//! Backpressure: the task stops reading while the outbox holds more than
//! `4 × max_batch_bytes` (a client that does not read its answers stalls only
//! itself), while `max_in_flight_per_connection` calls are in progress
//! (on this task and on the pool together), and while the server's
//! `memory.frame_budget` has no room for its next large frame.
//!
//! A request over `max_frame_size` is answered `FrameTooLarge` from its header
//! alone and its bytes are skipped: the other calls on the connection go on.
//!
//! # Direct dispatch
//!
//! In `direct` mode the handlers' futures are polled by this very task: once
//! inline (most finish at once), then, if pending, in a `FuturesUnordered`, so
//! several calls of one connection still progress concurrently without a task
//! spawn per call, and a handler that blocks stalls only its own connection —
//! exactly jkrpc's "handle in the I/O thread" trade-off.
//!
//! # Shutdown and eviction
//!
//! During graceful shutdown the task keeps reading only to answer new requests
//! `ShuttingDown`, waits for its in-flight calls, writes what is left (for at
//! most 5 s) and closes.
//!
//! An evicted connection (see `admission`: at `max_connections`, the one
//! longest without a call makes room for a newcomer) winds down the same way,
//! answering new requests `TooManyConnections` (they do not run), and its last
//! frame is a connection-level `TooManyConnections` (request id 0), so its
//! client fails what it still had pending with that error, not a
//! `ConnectionClosed` that looks like a crash.
//!
//! # Call activity
//!
//! The admission table learns of this connection's calls through its
//! [`CallActivity`]: after each batch, one relaxed store when the batch held a
//! request or the connection's busy state changed; no lock per request.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use rpc_codec::{Frame, FrameKind, Header, OutFrame, CONNECTION_REQUEST_ID};
use rpc_core::{Dispatch, RpcError, RpcRequest, SerializerKind};
use rpc_transport::heartbeat::{self, Activity};
use rpc_transport::{CloseSignal, FrameReader, Inbound, IoCounters, Reserved, TransportConfig};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::{debug, trace, warn};

use crate::admission::{CallActivity, Ticket};
use crate::answers::{encode_answer, PoolAnswers};
use crate::dispatch::{
    answer_frame, finish_call, start_call, InFlight, PoolJob, Reply, ServerCtx, RUNNING, STOPPING,
};
use crate::router::RouteEntry;

/// Serves a plain TCP connection (split with `into_split`, the fast path);
/// `ticket` is its place in the admission table, held until the task ends.
pub(crate) async fn serve_connection(
    stream: TcpStream,
    peer_addr: SocketAddr,
    ctx: Arc<ServerCtx>,
    ticket: Ticket,
) {
    if let Err(e) = stream.set_nodelay(ctx.config.transport.nodelay) {
        debug!(peer = %peer_addr, error = %e, "could not set TCP_NODELAY");
    }
    let (read_half, write_half) = stream.into_split();
    serve_halves(read_half, write_half, peer_addr, ctx, ticket).await
}

/// How long a client gets to complete the TLS handshake.
#[cfg(feature = "tls")]
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves a TLS connection: handshake (bounded by a timeout; a failure closes
/// only this connection), then the same loop over `tokio::io::split` halves.
/// A connection evicted during its handshake is dropped (it cannot be told
/// why before the handshake).
#[cfg(feature = "tls")]
pub(crate) async fn serve_tls_connection(
    stream: TcpStream,
    peer_addr: SocketAddr,
    ctx: Arc<ServerCtx>,
    acceptor: rpc_transport::tls::TlsAcceptor,
    ticket: Ticket,
) {
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
        _ = ticket.eviction().closed() => {
            warn!(%peer, "evicted during its TLS handshake: connection closed");
            return;
        }
    };
    let (read_half, write_half) = tokio::io::split(tls_stream);
    serve_halves(read_half, write_half, peer_addr, ctx, ticket).await
}

async fn serve_halves<R, W>(
    read_half: R,
    write_half: W,
    peer_addr: SocketAddr,
    ctx: Arc<ServerCtx>,
    ticket: Ticket,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let transport = &ctx.config.transport;
    let peer: Arc<str> = peer_addr.to_string().into();
    let close = Arc::new(CloseSignal::new());
    let mut outbox = Outbox::new(write_half, transport, ctx.metrics.io.clone());
    let activity = Arc::new(Activity::default());
    let mut reader = FrameReader::new(
        read_half,
        transport.max_frame_size,
        transport.read_buffer_min,
        transport.read_buffer_max,
    )
    .with_counters(ctx.metrics.io.clone())
    .with_activity(activity.clone())
    .with_budget(ctx.frame_budget.clone());
    heartbeat::spawn(
        activity.clone(),
        transport.heartbeat_interval,
        transport.idle_timeout,
        None,
        close.clone(),
    );
    // Answers of calls run on the worker pool (created only in pool mode).
    let pooled = match ctx.pool {
        Some(_) if ctx.dispatch() == Dispatch::Pool => {
            Some(Arc::new(PoolAnswers::new(transport.max_frame_size)))
        }
        _ => None,
    };

    let in_flight = Arc::new(InFlight::default());
    // Calls in progress, on this task and on the pool.
    let calls = || in_flight.get() + pooled.as_ref().map_or(0, |p| p.in_flight());
    let max_in_flight = ctx.config.max_in_flight_per_connection;
    let mut direct = FuturesUnordered::new();
    let mut stopping = false;
    // Set once evicted: the answer to new requests and the connection's last frame.
    let mut evicted: Option<RpcError> = None;
    // The loop ended by a graceful stop with every call answered.
    let mut drained = false;
    let mut call_activity: CallActivity = ticket.activity();
    // A frame read by the `select!` below, handled at the top of the next turn
    // together with every frame already buffered behind it.
    let mut next_frame: Option<(Frame, Option<Reserved>)> = None;

    // Created once and pinned, and polled only to register (see `StopWatch`).
    let closed = close.closed();
    let forced = ctx.force_close.cancelled();
    let stop = ctx.stopping.cancelled();
    let evict = ticket.eviction().closed();
    tokio::pin!(closed, forced, stop, evict);
    let mut watch = StopWatch {
        closed,
        forced,
        stop,
        evict,
        close: &close,
        eviction: ticket.eviction(),
        ctx: &ctx,
        registered: None,
    };
    'serve: loop {
        // A shutdown is noticed here, before the frame just read is served:
        // the waiters in the `select!` below lose the race against that read.
        match watch.server_stop(stopping) {
            Some(Stop::Forced) => {
                close.close(FORCED_CLOSE);
                break;
            }
            Some(_) => stopping = true,
            None if watch.evicted(stopping) => {
                evicted = Some(ticket.eviction_error());
                stopping = true;
            }
            None => {}
        }
        // Handle the frame just read and every complete frame buffered behind
        // it, without going back to the socket. One clock reading per call: the
        // end of one call is the start of the next.
        let mut clock = Instant::now();
        let mut called = false;
        while calls() < max_in_flight && outbox.has_room() {
            let (frame, reserved) = match next_frame.take() {
                Some(next) => next,
                None => match reader.try_next_buffered() {
                    Ok(Some(Inbound::Frame(frame, reserved))) => (frame, reserved),
                    Ok(Some(Inbound::TooLarge { header, max })) => {
                        answer_too_large(&ctx, &peer, &header, max, &mut outbox);
                        continue;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        warn!(%peer, error = %e, "closing connection: bad input from client");
                        close.close(e.to_string());
                        break 'serve;
                    }
                },
            };
            called |= frame.header.kind == FrameKind::Request;
            let conn = Conn {
                ctx: &ctx,
                pooled: pooled.as_ref(),
                peer: peer_addr,
                stopping,
                evicted: evicted.as_ref(),
            };
            let Some((call, req)) = conn.on_frame(frame, reserved, clock, &mut outbox) else {
                continue;
            };
            // Poll the handler once right here: most finish at once (no I/O),
            // are answered into this batch and never need a slot in `direct`.
            let mut running = AssertUnwindSafe(start_call(&ctx, call.route, req)).catch_unwind();
            match futures::poll!(&mut running) {
                Poll::Ready(outcome) => {
                    let now = Instant::now();
                    call.answer(&ctx, now - clock, outcome, &mut outbox);
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
        }
        if let Some(pooled) = &pooled {
            outbox.take_pooled(pooled);
        }
        call_activity.after_batch(called, calls() > 0, clock);
        // The batch is handled: write its answers now, as far as the socket
        // takes them without waiting.
        if let Err(e) = outbox.write_now().await {
            close.close(e);
            break;
        }

        if stopping && calls() == 0 && next_frame.is_none() {
            drained = true;
            break;
        }
        let can_read = calls() < max_in_flight && outbox.has_room();
        // Hot branches first: the waiters below are polled (a lock each) only
        // when the read has to wait. A close is also noticed through one atomic
        // load per turn.
        if close.is_closed() {
            break;
        }
        let was_stopping = stopping;
        let stall_at = outbox.budget_stall();
        tokio::select! {
            biased;
            written = outbox.writable(), if !outbox.is_empty() => {
                if let Err(e) = written {
                    close.close(e);
                    break;
                }
            }
            next = reader.next(), if can_read => match next {
                Ok(Some(Inbound::Frame(frame, reserved))) => next_frame = Some((frame, reserved)),
                Ok(Some(Inbound::TooLarge { header, max })) => {
                    answer_too_large(&ctx, &peer, &header, max, &mut outbox);
                }
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
                call.answer(&ctx, elapsed, outcome, &mut outbox);
                drop(permit);
                // Answer every other call that is done too, in the same batch.
                while let Poll::Ready(Some((call, permit, outcome))) = futures::poll!(direct.next()) {
                    let elapsed = call.started.elapsed();
                    call.answer(&ctx, elapsed, outcome, &mut outbox);
                    drop(permit);
                    if !outbox.has_room() {
                        break;
                    }
                }
            }
            _ = pool_news(pooled.as_deref()) => {
                if let Some(pooled) = &pooled {
                    outbox.take_pooled(pooled);
                }
            }
            // An async block: disabled branches are still built, and a bare
            // `sleep_until` would clone the runtime handle on every turn.
            _ = async { if let Some(at) = stall_at { tokio::time::sleep_until(at).await } }, if stall_at.is_some() => {
                if outbox.budget_stall().is_some_and(|at| at <= tokio::time::Instant::now()) {
                    let n = outbox.give_back_budget();
                    warn!(%peer, reservations = n,
                        "the client took no answer for a while: its share of the frame budget goes back");
                }
            }
            _ = in_flight.changed.notified(), if !can_read || stopping => {}
            event = std::future::poll_fn(|cx| watch.poll_stop(cx, was_stopping)) => match event {
                Stop::Closed => break,
                Stop::Forced => {
                    close.close(FORCED_CLOSE);
                    break;
                }
                Stop::Stopping => stopping = true,
                Stop::Evicted => {
                    evicted = Some(ticket.eviction_error());
                    stopping = true;
                }
            },
        }
    }
    // Calls still running here are abandoned (a forced stop, a broken
    // connection): the server may have run them, so the client must not be
    // told "not run" (`TooManyConnections`) for them.
    let abandoned = calls() > 0;
    drop(direct);
    // Answers already encoded still go out (good frames before a bad one, the
    // last answers of a graceful shutdown), unless the server is forced down.
    if let Some(pooled) = &pooled {
        outbox.take_pooled(pooled);
        // Answers of calls still running have nobody to go to.
        pooled.close();
    }
    // After every answer, a connection-level "not run" for whatever is still
    // pending at the client (sent but not read here, or read during the
    // linger below): nothing pending then is a call the server ran, so the
    // client may retry it anywhere. Like HTTP/2's GOAWAY. Never after
    // abandoned calls, which may have run.
    let goodbye = match &evicted {
        Some(error) if !abandoned => Some(error.clone()),
        None if drained => Some(RpcError::ShuttingDown),
        _ => None,
    };
    if let Some(error) = &goodbye {
        outbox.push(OutFrame::error(CONNECTION_REQUEST_ID, 0, error));
    }
    let written = tokio::select! {
        biased;
        _ = ctx.force_close.cancelled() => {
            close.close("server shut down");
            false
        }
        r = outbox.finish() => match r {
            Ok(()) => true,
            Err(e) => {
                debug!(%peer, error = %e, "answers not written at close");
                false
            }
        },
        _ = tokio::time::sleep(Duration::from_secs(5)) => {
            close.close("answers not written within 5 s of closing");
            false
        }
    };
    if written {
        // Lingering close: the write side is shut (the client sees end of
        // stream after the last answer); read and discard until the client
        // closes too, for at most a second. Closing a socket with unread input
        // makes the kernel send a reset, which can destroy answers the client
        // has not read yet. Requests read here are not run; their callers get
        // the connection's close as error.
        // Frames read here are dropped at once: they take no budget.
        reader.leave_budget();
        let drain = async { while let Ok(Some(_)) = reader.next().await {} };
        tokio::select! {
            _ = drain => {}
            _ = ctx.force_close.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    close.close("connection finished");
    debug!(%peer, reason = close.reason(), "connection closed");
}

/// Answers a request whose header announced more than `max` bytes with
/// `FrameTooLarge` (the reader skips its bytes); other kinds are only logged.
fn answer_too_large<W: AsyncWrite + Unpin>(
    ctx: &ServerCtx,
    peer: &str,
    header: &Header,
    max: usize,
    outbox: &mut Outbox<W>,
) {
    let id = header.request_id;
    warn!(%peer, request_id = id, size = header.frame_len(), max,
        "request larger than max_frame_size: answered FrameTooLarge, its bytes skipped");
    if header.kind == FrameKind::Request {
        ctx.stats.requests.fetch_add(1, Ordering::Relaxed);
        ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
        let err = Inbound::too_large_error(header, max);
        outbox.push(OutFrame::error(id, header.serializer, &err));
    }
}

/// How long a client may leave answers unread while their requests hold part
/// of the frame budget (at most; half the idle timeout when shorter); then the
/// budget goes back to the other connections.
const BUDGET_STALL: Duration = Duration::from_secs(10);

/// Why a connection closes when the server is forced down.
const FORCED_CLOSE: &str = "server shut down before this connection's calls finished";

/// What ends or changes a connection's serving loop, other than its socket.
enum Stop {
    /// The connection's close signal fired (idle timeout, a write error...).
    Closed,
    /// Graceful shutdown: answer new requests `ShuttingDown`.
    Stopping,
    /// The server is going down now.
    Forced,
    /// The admission table evicted this connection: wind down as when
    /// `Stopping`, answering `TooManyConnections`.
    Evicted,
}

/// The connection's close signal, the server's two stop tokens and the
/// connection's eviction notice as one `select!` branch, which takes no lock
/// once it is registered.
///
/// `select!` polls every branch each time the read has to wait, and polling
/// tokio's `Notified` (under `CloseSignal::closed`) or a `CancellationToken`
/// waiter takes a lock each time: at one call in flight that is once per call,
/// about 570 instructions per call under callgrind for three waiters that
/// almost never fire. This polls them once, to register the task's waker (again
/// only if the waker changes), and otherwise reads what they wait for from the
/// atomics their senders set *before* notifying: `CloseSignal::is_closed` (of
/// the connection and of its eviction notice) and `ServerCtx::stop_level`.
struct StopWatch<'a, C, F, S, E> {
    closed: Pin<&'a mut C>,
    forced: Pin<&'a mut F>,
    stop: Pin<&'a mut S>,
    evict: Pin<&'a mut E>,
    close: &'a CloseSignal,
    eviction: &'a CloseSignal,
    ctx: &'a ServerCtx,
    /// The waker the waiters hold.
    registered: Option<std::task::Waker>,
}

impl<C, F, S, E> StopWatch<'_, C, F, S, E>
where
    C: std::future::Future<Output = ()>,
    F: std::future::Future<Output = ()>,
    S: std::future::Future<Output = ()>,
    E: std::future::Future<Output = ()>,
{
    fn poll_stop(&mut self, cx: &mut Context<'_>, stopping: bool) -> Poll<Stop> {
        if let Some(event) = self.check(stopping) {
            return Poll::Ready(event);
        }
        if !self
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            // A waiter that completes here has had its flag set first, so the
            // check below returns and it is never polled again (the serving
            // loop ends, or stops polling `stop` once stopping).
            let _ = self.closed.as_mut().poll(cx);
            let _ = self.forced.as_mut().poll(cx);
            if !stopping {
                let _ = self.stop.as_mut().poll(cx);
                let _ = self.evict.as_mut().poll(cx);
            }
            self.registered = Some(cx.waker().clone());
            if let Some(event) = self.check(stopping) {
                return Poll::Ready(event);
            }
        }
        Poll::Pending
    }

    fn check(&self, stopping: bool) -> Option<Stop> {
        if self.close.is_closed() {
            return Some(Stop::Closed);
        }
        self.server_stop(stopping)
            .or_else(|| self.evicted(stopping).then_some(Stop::Evicted))
    }

    /// Whether this connection has been evicted, as news for a loop that is
    /// `stopping` (already winding down: no news) or not.
    fn evicted(&self, stopping: bool) -> bool {
        !stopping && self.eviction.is_closed()
    }

    /// The server's stop state, as news for a loop that is `stopping` or not.
    fn server_stop(&self, stopping: bool) -> Option<Stop> {
        match self.ctx.stop_level.load(Ordering::Acquire) {
            RUNNING => None,
            STOPPING if stopping => None,
            STOPPING => Some(Stop::Stopping),
            _ => Some(Stop::Forced),
        }
    }
}

/// Completes when the worker pool has news for this connection (never, when
/// there is no pool).
///
/// With calls on the pool and nothing else to do, the task first gives its
/// CPU away a few times ([`ANSWER_YIELDS`]) before it lets the runtime thread
/// park: the answer is usually a few microseconds away, on a worker that this
/// very yield lets run. Parking instead costs the runtime thread a sleep in
/// `epoll_wait` and the worker an `eventfd` write to wake it — per handful of
/// answers, the largest single cost of pool dispatch (0.15 context switches per
/// call on the runtime thread at 1:100, about 0.6 µs per call).
async fn pool_news(pooled: Option<&PoolAnswers>) {
    let Some(pooled) = pooled else {
        return std::future::pending().await;
    };
    let mut yields = if pooled.in_flight() > 0 {
        ANSWER_YIELDS
    } else {
        0
    };
    std::future::poll_fn(|cx| loop {
        match pooled.poll_news(cx) {
            Poll::Pending if yields > 0 => {
                yields -= 1;
                std::thread::yield_now();
            }
            news => return news,
        }
    })
    .await
}

/// How many times a connection task waiting only for pool answers yields its
/// thread before it parks (see [`pool_news`]).
const ANSWER_YIELDS: u32 = 2;

/// The connection's write side: answers encoded back to back into one buffer,
/// written with one `write` per batch.
///
/// The buffer is written from the front; what the socket does not take stays
/// for the next attempt. Once it has been written out the buffer is cleared and
/// reused, so a busy connection encodes its answers without allocating, and
/// one that grew for a burst of large answers gives the memory back.
struct Outbox<W> {
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
    max_frame: usize,
    max_batch: usize,
    counters: Arc<IoCounters>,
}

impl<W: AsyncWrite + Unpin> Outbox<W> {
    fn new(io: W, transport: &TransportConfig, counters: Arc<IoCounters>) -> Self {
        Outbox {
            io,
            // Empty until the first answer: an idle connection costs nothing here.
            buf: BytesMut::new(),
            held: Vec::new(),
            held_progress: None,
            budget_stall: BUDGET_STALL.min(transport.idle_timeout / 2),
            written: 0,
            max_frame: transport.max_frame_size,
            max_batch: transport.max_batch_bytes.max(1),
            counters,
        }
    }

    /// Encodes `frame` at the end of the outbox.
    fn push(&mut self, frame: OutFrame) {
        encode_answer(&mut self.buf, &frame, self.max_frame);
    }

    /// Holds a large request's budget until the answers now in the outbox
    /// are written.
    fn hold(&mut self, reserved: Option<Reserved>) {
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
    fn budget_stall(&self) -> Option<tokio::time::Instant> {
        if self.held.is_empty() || self.is_empty() {
            return None;
        }
        self.held_progress.map(|at| at + self.budget_stall)
    }

    /// Gives the held budget back (the answers' memory stays, bounded by this
    /// connection's high-water mark): a client that does not read must not
    /// hold the budget every other connection shares.
    fn give_back_budget(&mut self) -> usize {
        self.held_progress = None;
        std::mem::take(&mut self.held).len()
    }

    /// Moves the answers the worker pool has encoded so far to the end of the
    /// outbox (when the outbox is empty, the two buffers trade places).
    fn take_pooled(&mut self, pooled: &PoolAnswers) {
        if self.is_empty() {
            self.buf.clear();
            self.written = 0;
        }
        pooled.take(&mut self.buf, &mut self.held, 4 * self.max_batch);
        if !self.held.is_empty() {
            self.held_progress
                .get_or_insert_with(tokio::time::Instant::now);
        }
    }

    fn is_empty(&self) -> bool {
        self.written == self.buf.len()
    }

    /// Whether more input may be handled: the unwritten answers are below the
    /// high-water mark.
    fn has_room(&self) -> bool {
        self.buf.len() - self.written < 4 * self.max_batch
    }

    /// Writes until the outbox is empty or the socket would block.
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        while !self.is_empty() {
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
        // Everything written; TLS may still hold bytes until flushed.
        match Pin::new(&mut self.io).poll_flush(cx) {
            Poll::Ready(Err(e)) => return Poll::Ready(Err(format!("flush failed: {e}"))),
            Poll::Ready(Ok(())) => {}
            Poll::Pending => return Poll::Pending,
        }
        if self.buf.capacity() > 4 * self.max_batch {
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
    async fn write_now(&mut self) -> Result<(), String> {
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
    async fn writable(&mut self) -> Result<(), String> {
        std::future::poll_fn(|cx| self.poll_write_out(cx)).await
    }

    /// Writes what is left, then shuts the write side down.
    async fn finish(&mut self) -> Result<(), String> {
        self.writable().await?;
        self.io
            .shutdown()
            .await
            .map_err(|e| format!("shutdown failed: {e}"))
    }
}

/// A call run on the connection task (direct dispatch), minus its request.
struct DirectCall<'a> {
    route: &'a RouteEntry,
    id: u64,
    serializer: u8,
    started: Instant,
    /// A large request's share of the frame budget, held until its answer is written.
    reserved: Option<Reserved>,
}

impl DirectCall<'_> {
    /// Records the call's outcome and encodes its answer.
    fn answer<W: AsyncWrite + Unpin>(
        self,
        ctx: &ServerCtx,
        elapsed: Duration,
        outcome: std::thread::Result<Result<bytes::Bytes, RpcError>>,
        outbox: &mut Outbox<W>,
    ) {
        let result = finish_call(ctx, self.route, elapsed, outcome);
        outbox.push(answer_frame(self.id, self.serializer, result));
        outbox.hold(self.reserved);
    }
}

struct Conn<'a, 'b> {
    ctx: &'a Arc<ServerCtx>,
    /// Where pool threads put their answers (pool mode only).
    pooled: Option<&'a Arc<PoolAnswers>>,
    peer: SocketAddr,
    stopping: bool,
    /// Set when the connection was evicted: what new requests are answered.
    evicted: Option<&'b RpcError>,
}

impl<'a> Conn<'a, '_> {
    fn reply_error<W: AsyncWrite + Unpin>(
        &self,
        id: u64,
        serializer: u8,
        err: RpcError,
        answers: &mut Outbox<W>,
    ) {
        self.ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
        answers.push(OutFrame::error(id, serializer, &err));
    }

    /// Handles one frame (received at `received`); returns a call for the
    /// caller to run when dispatch is direct. Answers that need no handler
    /// (pongs, errors) go into `answers`.
    fn on_frame<W: AsyncWrite + Unpin>(
        &self,
        frame: Frame,
        reserved: Option<Reserved>,
        received: Instant,
        answers: &mut Outbox<W>,
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
            let refusal = self.evicted.cloned().unwrap_or(RpcError::ShuttingDown);
            self.reply_error(id, raw_ser, refusal, answers);
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
        match (&self.ctx.pool, self.pooled) {
            (Some(pool), Some(pooled)) => {
                let job = PoolJob {
                    ctx: self.ctx.clone(),
                    route: route.clone(),
                    req,
                    received,
                    reply: Reply::Frame(pooled.reserve(id, raw_ser, reserved)),
                };
                if let Err(busy) = job.submit(pool, self.ctx, route) {
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
                    reserved,
                },
                req,
            )),
        }
    }
}
