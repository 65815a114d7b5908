//! One task per accepted connection: read request frames, route them, run them
//! (on this task, or on the worker pool), and write the answers — all from the
//! same task, the way a hand-written event loop would.
//!
//! # One task, one batch at a time
//!
//! Each turn the task handles the frame just read and every complete frame
//! buffered behind it without going back to the socket, encodes their answers
//! into its [`Outbox`] and writes them with one non-blocking `write` (the
//! server's connections have one producer of answers, so they need no writer
//! task of their own; see `reply::outbox`). Pool threads encode their answers
//! into the connection's [`PoolAnswers`], which the task moves into the
//! outbox — or, while the task waits with an empty outbox, write them
//! themselves on the socket it lends them (plain sockets; see
//! `reply::pool_answers`) — and, for a lone caller in rhythm or a
//! pipelining caller alone on the pool, its read side too: the worker that
//! answers reads the next requests and starts them, and
//! the task sleeps until it takes the read side back (at least every
//! millisecond; see `worker_reads` and "The read side lent" there). Only
//! then does it wait — for input, for the socket to take the rest
//! of the outbox, for calls to finish and for stop news — in one `select!`;
//! a client that comes straight back (and whose calls do not go to the pool)
//! is polled for a moment instead, reading the socket itself (`busy_poll`).
//!
//! Backpressure: the task stops reading while its outbox is past the
//! high-water mark (a client that does not read its answers stalls only
//! itself), while `max_in_flight_per_connection` calls are in progress (on
//! this task and on the pool together), and while the server's
//! `memory.frame_budget` has no room for its next large frame.
//!
//! # Streams
//!
//! A stream runs on this task too, whatever the dispatch mode
//! (`stream::ConnStreams` polls it); its caller's items and credit are
//! routed to it by id, and the frames it queues are moved into the outbox
//! each turn — after the turn's requests were read, and only while the
//! outbox has room, so a stream that never waits takes turns with the
//! unary calls beside it instead of keeping the outbox full. Open streams
//! count as calls in progress.
//!
//! A request over `max_frame_size` is answered `FrameTooLarge` from its header
//! alone and its bytes are skipped: the other calls on the connection go on.
//!
//! # Direct dispatch
//!
//! In `direct` mode the handlers' futures are polled by this very task: once
//! inline (most finish at once and are answered in the same batch), then, if
//! pending, in a `FuturesUnordered`, so several calls of one connection still
//! progress concurrently without a task spawn per call, and a handler that
//! blocks stalls only its own connection — jkrpc's "handle in the I/O thread"
//! trade-off. One clock reading per call: the end of one call is the start of
//! the next.
//!
//! # Waking the pool
//!
//! A batch's pooled calls are handed to the pool together when the batch
//! ends (`dispatch::PoolBatch`: one take of the queue's lock and one count
//! for them all), quietly, and the pool is woken once after the batch —
//! not at all if a worker is awake to take them. A wake-up
//! of a parked worker is a futex call and a context switch, and the worker
//! parks again once the queue is empty: with calls of several connections
//! (10:100) each runtime thread's batches each woke a worker, and the
//! pool's server spent a fifth of its CPU switching threads
//! (BENCHMARKS.md, "One wake-up per runtime turn"). So a batch of several
//! calls, on a server with other connections open, that would wake a
//! parked worker first yields its runtime thread once (`yield_now`, which
//! tokio resumes once the thread has no other task ready — after its turn,
//! the tasks it steals included — or at its periodic maintenance): the
//! thread's other connections ready now submit their batches too, and the
//! first task back wakes one worker for all of them. The batch's calls wait
//! that turn longer for their worker; the pool's wake-ups and parks, each a
//! context switch, drop by a quarter. A server with one open connection
//! (1:100, 1:1) does not yield: nothing would join its batch. However the
//! wait ends — the task dropped while it yields included — the pool is
//! woken (`WakeIdle`). `PoolLane::hand_over` (`pool_side`) hands the batch
//! over, yields when it should and wakes the pool.
//!
//! # Deadlines and cancellation
//!
//! A request's deadline is its arrival plus the timeout in its header. The
//! calls that can still end early — direct calls still pending after their
//! first poll, and every pooled call — are kept in [`LiveCalls`], their
//! deadlines on the connection's one timer. At a deadline the task answers
//! `DeadlineExceeded` at once and cancels the call's context: a direct
//! call's future is dropped, a pooled call's late answer discarded. A
//! `Cancel` frame cancels the context the same
//! way and nothing is answered. A direct handler that blocks its thread
//! cannot be interrupted (it blocks this task too): its answer comes when
//! it returns. When the connection closes, every live call is cancelled.
//! Whether a call's answer or its cancellation came first is decided once,
//! by its [`CancelSignal`](rpc_core::CancelSignal): only the winner acts.
//!
//! # Shutdown and eviction
//!
//! Stop news comes through the [`StopWatch`], read once
//! per batch and polled in the `select!` only to register the task's waker.
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
//! # One timer
//!
//! The connection has one timer, set for the earliest of: a live call's
//! deadline, the outbox's budget stall, the next idle check and the next
//! tidy (see `idle`). No task of its own keeps the idle timeout, and a
//! connection quiet for a second gives back what its calls left behind —
//! and asks the allocator to return freed memory to the system
//! (`memory.return_to_os`; rate-limited, shared by all connections): an
//! idle connection is its task's future, its socket and little else.
//!
//! # Call activity
//!
//! The admission table learns of this connection's calls through its
//! [`CallActivity`]: after each batch, one relaxed store when the batch held a
//! request or the connection's busy state changed; no lock per request.

mod admit;
mod close;
mod idle;
mod live;
mod on_frame;
mod pool_side;
mod stop_watch;
#[cfg(feature = "tls")]
mod tls;
mod worker_reads;

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use futures::future::Either;
use futures::stream::{FuturesUnordered, StreamExt};
use rpc_codec::{Frame, FrameKind};
use rpc_core::RpcError;
use rpc_transport::{BusyPoll, FrameReader, Inbound, ReadNow, Reserved, WriteNow};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Sleep;
use tracing::{debug, warn};

use crate::admission::{CallActivity, Ticket};
use crate::ctx::ServerCtx;
use crate::dispatch::{InFlight, PoolBatch};
use crate::listener::{Accepted, Peer};
use crate::reply::{pool_news, Outbox, PoolAnswers};
use crate::stream::ConnStreams;
use close::{CloseReason, Closing, FORCED_CLOSE};
use idle::{Check, IdleWatch};
use live::{Live, LiveCalls};
use on_frame::{answer_expired, answer_too_large, Conn};
use pool_side::{LazyPoolSide, PoolLane, PoolSide};
use stop_watch::{Stop, StopWatch};
#[cfg(feature = "tls")]
pub(crate) use tls::serve_tls_connection;
use worker_reads::{RunLoans, LENT_READ_TICK};

/// Serves a plain connection, TCP or Unix (split with `into_split`, the
/// fast path); `ticket` is its place in the admission table, held until the
/// task ends.
///
/// Not an `async fn`: the socket is set up here, in the accept loop before
/// the task is spawned, and the task's future is the serving loop's own,
/// without a wrapper that would keep its arguments beside it in every
/// connection's memory.
pub(crate) fn serve_connection(
    accepted: Accepted,
    ctx: Arc<ServerCtx>,
    ticket: Ticket,
) -> impl Future<Output = ()> + Send + 'static {
    let peer = accepted.peer();
    match accepted {
        Accepted::Tcp(stream, _) => {
            if let Err(e) = stream.set_nodelay(ctx.config.transport.nodelay) {
                debug!(peer = %peer.label, error = %e, "could not set TCP_NODELAY");
            }
            let (read_half, write_half) = stream.into_split();
            Either::Left(serve_halves(read_half, write_half, peer, ctx, ticket))
        }
        Accepted::Unix(stream, _) => {
            let (read_half, write_half) = stream.into_split();
            Either::Right(serve_halves(read_half, write_half, peer, ctx, ticket))
        }
    }
}

async fn serve_halves<R, W>(
    read_half: R,
    write_half: W,
    peer_addr: Peer,
    ctx: Arc<ServerCtx>,
    ticket: Ticket,
) where
    R: AsyncRead + ReadNow + Unpin + Send + 'static,
    W: AsyncWrite + WriteNow + Unpin + Send + 'static,
{
    let transport = &ctx.config.transport;
    let peer: Arc<str> = peer_addr.label;
    // Why the loop ended: only this task ends it, and it stops at once.
    let mut close = CloseReason::default();
    let socket = write_half.raw_socket();
    let mut outbox = Outbox::new(write_half, transport, ctx.metrics.io.clone());
    let mut reader = FrameReader::new(
        read_half,
        transport.max_frame_size,
        transport.read_buffer_min,
        transport.read_buffer_max,
    )
    .with_counters(ctx.metrics.io.clone())
    .with_budget(ctx.frame_budget.clone());
    // The connection's side of the worker pool (pool mode only), made for
    // its first request: a connection that sends none holds
    // none of it (see `pool_side`).
    // SAFETY: declared after `outbox` and `reader`, so dropped — which ends
    // every worker's use of the socket — before they drop its halves.
    let pool_side = unsafe { LazyPoolSide::new(&ctx, socket, &ticket) };
    // Once made: the pool and where its threads put this connection's
    // answers, and the calls workers started from requests they read
    // themselves (a lone caller's, on the read side lent to them; see
    // `worker_reads`).
    let mut pool_side_made: Option<&PoolSide<'_>> = None;
    let mut pool_lane: Option<&PoolLane<'_>> = None;
    let mut pooled: Option<&PoolAnswers> = None;

    let in_flight = Arc::new(InFlight::default());
    // Streaming calls, run by this task; their frames come back through
    // the table's queue.
    let mut streams = ConnStreams::default();
    // Calls in progress, on this task and on the pool, and streams open.
    let calls = |streams: &ConnStreams, pooled: Option<&PoolAnswers>| {
        in_flight.get() + pooled.map_or(0, |p| p.in_flight()) + streams.len()
    };
    let max_in_flight = ctx.config.max_in_flight_per_connection;
    // Created with the first direct call that does not finish at once (a
    // `FuturesUnordered` allocates as it is made) and let go when idle.
    let mut direct = None;
    // Calls that may still end early, the idle check, and the connection's
    // one timer, which comes round for the earliest of: a call's deadline,
    // the next idle check and tidy, the outbox's budget stall (see `Timers`).
    let mut live = LiveCalls::default();
    // Pool dispatch: a batch's pooled calls, handed to the pool together
    // at its end (`dispatch::PoolBatch`).
    let mut batch = RefCell::new(PoolBatch::default());
    let mut expired = Vec::new();
    let mut idle = IdleWatch::new(
        transport.heartbeat_interval,
        transport.idle_timeout,
        tokio::time::Instant::now(),
    );
    let timer = tokio::time::sleep_until(idle.next_check());
    tokio::pin!(timer);
    let mut armed = Some(idle.next_check());
    // The timer fired in the `select!`: handled at the top of the next turn.
    let mut timer_fired = false;
    // A call or stream came since the last tidy.
    let mut served = false;
    let mut stopping = false;
    // Set once evicted: new requests and the connection's last frame are
    // answered `ticket.eviction_error()`.
    let mut evicted = false;
    // The loop ended by a graceful stop with every call answered.
    let mut drained = false;
    let mut call_activity: CallActivity = ticket.activity();
    // A frame read by the `select!` below, handled at the top of the next turn
    // together with every frame already buffered behind it.
    let mut next_frame: Option<(Frame, Option<Reserved>)> = None;
    let mut busy_poll =
        BusyPoll::new(ctx.config.busy_poll, reader.can_read_now()).in_group(&ctx.poll_group);
    // The busy poll read a frame (or found the end of the stream) itself.
    let mut polled = false;
    // The socket may have been lent to the workers since the last batch: a
    // worker may have recorded the end of the calls (`QuietMarker`).
    let mut lent = false;
    // The read side came back from the workers in the last wait: not lent
    // again in the next one (see `lend_read`).
    let mut read_side_back = false;
    // The read side may have been lent since the last batch: workers may
    // have started calls and left bytes for this task (see `worker_reads`).
    let mut read_lent = false;
    // Loans of the read side for a pipelining caller's runs.
    let mut run_loans = RunLoans::default();

    // Pinned once and polled only to register (see `StopWatch`); the server
    // waiter is replaced once, when the loop starts stopping.
    let evict = ticket.eviction().notified();
    let server_waiter = ctx.stop.stopping();
    tokio::pin!(evict, server_waiter);
    let mut watch = StopWatch {
        evict,
        server_waiter,
        eviction: ticket.eviction(),
        server: &ctx.stop,
        registered: None,
        waits_for_forced: false,
    };
    'serve: loop {
        // A shutdown is noticed here, before the frame just read is served:
        // the waiters in the `select!` below lose the race against that read.
        match watch.server_stop(stopping) {
            Some(Stop::Forced) => {
                close.set(FORCED_CLOSE);
                break;
            }
            Some(_) => stopping = true,
            None if watch.evicted(stopping) => {
                evicted = true;
                stopping = true;
            }
            None => {}
        }
        // Handle the frame just read and every complete frame buffered behind
        // it, without going back to the socket. One clock reading per call: the
        // end of one call is the start of the next.
        let mut clock = Instant::now();
        let mut called = false;
        // Calls on the pool before this batch (see `lend_read` below).
        let pooled_before = pooled.map_or(0, PoolAnswers::in_flight);
        let read_by_poll = std::mem::take(&mut polled);
        let arrived = next_frame.is_some() || read_by_poll;
        if arrived && busy_poll.arrived(clock) {
            ctx.stats.busy_polled_frames.fetch_add(1, Ordering::Relaxed);
            if read_by_poll {
                ctx.stats.busy_poll_reads.fetch_add(1, Ordering::Relaxed);
            }
        }
        // The timer first: a client that keeps the socket busy must not
        // keep the timer's branch of the `select!` below from ever running.
        if timer_fired || armed.is_some_and(|at| at.into_std() <= clock) {
            timer_fired = false;
            armed = None;
            let timers = Timers {
                live: &mut live,
                expired: &mut expired,
                idle: &mut idle,
            };
            match timers.fired(&ctx, &peer, &mut outbox, bytes_in(&reader, pooled)) {
                Check::Busy => {}
                Check::Idle(silent) => {
                    close.set(format!(
                        "idle timeout: nothing received for {} ms",
                        silent.as_millis()
                    ));
                    break;
                }
                // Quiet for a while: give back what the calls left behind.
                Check::Tidy if calls(&streams, pooled) == 0 => {
                    live.release();
                    batch.get_mut().release();
                    outbox.release();
                    if let Some(pooled) = pooled {
                        pooled.release();
                    }
                    streams.release();
                    if direct.as_ref().is_some_and(FuturesUnordered::is_empty) {
                        direct = None;
                    }
                    expired = Vec::new();
                    // And, after calls (not pings alone), the allocator gives
                    // back what every connection freed (one trim a second at
                    // most, shared by all).
                    if std::mem::take(&mut served) && ctx.config.memory.return_to_os {
                        rpc_transport::allocator::release_freed();
                    }
                }
                Check::Tidy => {}
            }
        }
        // A request of this batch may make the connection's side of the pool
        // (then counted from the next frame on).
        let made = || pool_side.as_ref()?.get().map(|side| &*side.lane.answers);
        while calls(&streams, pooled.or_else(made)) < max_in_flight && outbox.has_room() {
            // The frame, the request and what routed it live in this block
            // only: kept across the `poll!` below, they would make every
            // connection's future, an idle connection's memory, larger.
            let (mut call, cancel, mut running) = {
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
                            close.set(e.to_string());
                            break 'serve;
                        }
                    },
                };
                called |= frame.header.kind == FrameKind::Request;
                let conn = Conn {
                    ctx: &ctx,
                    pool_side: pool_side.as_ref(),
                    peer: peer_addr.addr,
                    stopping,
                    evicted: evicted.then_some(&ticket),
                    batch: &batch,
                };
                match conn.on_frame(frame, reserved, clock, &mut outbox, &mut live, &mut streams) {
                    Some(started) => started,
                    None => continue,
                }
            };
            // Poll the handler once right here: most finish at once (no I/O),
            // are answered into this batch and never need a slot in `direct`.
            match futures::poll!(&mut running) {
                Poll::Ready(outcome) => {
                    let now = Instant::now();
                    call.answer(&ctx, now - clock, outcome, &mut outbox);
                    clock = now;
                }
                Poll::Pending => {
                    let permit = in_flight.acquire();
                    call.wait_in(&mut live, &cancel);
                    direct
                        .get_or_insert_with(FuturesUnordered::new)
                        .push(async move {
                            // Given up (its deadline, the client's `Cancel`, the
                            // connection closing): the handler's future is dropped.
                            let outcome = tokio::select! {
                                biased;
                                outcome = &mut running => Some(outcome),
                                _ = cancel.given_up() => None,
                            };
                            (call, permit, outcome)
                        });
                }
            }
        }
        if pool_lane.is_none() {
            // The batch's first request made the connection's pool side.
            if let Some(side) = pool_side.as_ref().and_then(LazyPoolSide::get) {
                pool_side_made = Some(side);
                pool_lane = Some(&side.lane);
                pooled = Some(&*side.lane.answers);
            }
        }
        // Only requests make pooled calls, so a batch with calls to hand
        // over is one that `called`.
        debug_assert!(called || batch.get_mut().len() == 0);
        // Calls of this batch that went to the pool (see `lend_read` below).
        let pooled_now = match (called, pool_lane) {
            (true, Some(lane)) => {
                let handed = lane
                    .hand_over(&ctx, batch.get_mut(), &mut live, &mut outbox)
                    .await;
                busy_poll.start_over();
                handed
            }
            _ => 0,
        };
        if let Some(side) = pool_side_made {
            // The socket back, and the read side with what came of it.
            let was_lent = std::mem::take(&mut read_lent);
            side.take_back(&ctx, &mut outbox, &mut reader, &mut live, was_lent);
            if was_lent {
                let answers = &side.lane.answers;
                run_loans.back(answers.worker_bytes(), answers.read_loans());
            }
        }
        if !streams.is_idle() {
            // The handlers the batch's items (or opens) woke run now, so
            // their answers leave with this batch.
            streams.run_woken().await;
            streams.write_into(&mut outbox);
        }
        if calls(&streams, pooled) == 0 {
            idle.quiet(
                tokio::time::Instant::from_std(clock),
                bytes_in(&reader, pooled),
            );
        }
        // Re-arm the timer when what it waits for moved earlier.
        let next = [
            live.next_deadline().map(tokio::time::Instant::from_std),
            outbox.budget_stall(),
            Some(idle.next_check()),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(next) = next {
            arm(timer.as_mut(), &mut armed, next);
        }
        served |= called || !streams.is_idle();
        // After `take_pooled` above, which ended any loan.
        if std::mem::take(&mut lent) {
            call_activity.resync();
        }
        call_activity.after_batch(called, calls(&streams, pooled) > 0, clock);
        // The batch is handled: write its answers now, as far as the socket
        // takes them without waiting.
        let answering = !outbox.is_empty();
        if let Err(e) = outbox.write_now().await {
            close.set(e);
            break;
        }
        if arrived || answering {
            let pending = direct.as_ref().is_some_and(|d| !d.is_empty());
            busy_poll.waits(clock, !pending && !stopping && outbox.is_empty());
        }

        if stopping && calls(&streams, pooled) == 0 && next_frame.is_none() {
            drained = true;
            break;
        }
        let can_read = calls(&streams, pooled) < max_in_flight && outbox.has_room();
        // Hot branches first: the waiters below are polled (a lock each) only
        // when the read has to wait.
        let was_stopping = stopping;
        let polling = can_read && !stopping && busy_poll.keep_polling();
        // Waiting with nothing to write, able to read more, every call of
        // the connection on the pool: workers may write answers to the
        // socket themselves meanwhile, and the last one records the end of
        // the calls (`PoolAnswers`).
        let lend = pooled.is_some_and(PoolAnswers::lends)
            && can_read
            && !stopping
            && outbox.is_empty()
            && in_flight.get() == 0
            && streams.len() == 0;
        lent |= lend;
        // A lone caller's connection, its one call on a pool whose worker
        // keeps the caller's rhythm: it lends its read side too, and the
        // worker that writes the answer reads the next request itself
        // (`reply::pool_reads`). The task then reads nothing until it takes
        // it back — when a worker hands it back, or after a tick.
        let lend_read = lend
            && !std::mem::take(&mut read_side_back)
            && next_frame.is_none()
            && (reader.is_drained()
                || pooled.is_some_and(|answers| {
                    reader
                        .partial_frame()
                        .is_some_and(|len| len <= answers.max_seed() as u64)
                }))
            && pool_lane
                .is_some_and(|lane| lane.lends_read(pooled_now, pooled_before, &mut run_loans));
        read_lent |= lend_read;
        if lend_read && !reader.is_drained() {
            // The start of a request, buffered: the worker that reads next
            // completes it (if none does, it comes back with the read side).
            if let Some(lane) = pool_lane {
                lane.answers.seed(|inbox| reader.hand_partial(inbox));
            }
        }
        if lend_read {
            arm(
                timer.as_mut(),
                &mut armed,
                tokio::time::Instant::now() + LENT_READ_TICK,
            );
        }
        tokio::select! {
            biased;
            written = outbox.writable(), if !outbox.is_empty() => {
                if let Err(e) = written {
                    close.set(e);
                    break;
                }
            }
            next = reader.next(), if can_read && !lend_read => match next {
                Ok(Some(Inbound::Frame(frame, reserved))) => next_frame = Some((frame, reserved)),
                Ok(Some(Inbound::TooLarge { header, max })) => {
                    answer_too_large(&ctx, &peer, &header, max, &mut outbox);
                }
                Ok(None) => {
                    close.set("the client closed the connection");
                    break;
                }
                Err(e) => {
                    warn!(%peer, error = %e, "closing connection: bad input from client");
                    close.set(e.to_string());
                    break;
                }
            },
            Some((call, permit, outcome)) = async { direct.as_mut()?.next().await }, if direct.as_ref().is_some_and(|d| !d.is_empty()) => {
                call.finished(&ctx, outcome, &mut outbox);
                drop(permit);
                // Answer every other call that is done too, in the same batch.
                while let Some(Poll::Ready(Some((call, permit, outcome)))) = match direct.as_mut() {
                    Some(d) => Some(futures::poll!(d.next())),
                    None => None,
                } {
                    call.finished(&ctx, outcome, &mut outbox);
                    drop(permit);
                    if !outbox.has_room() {
                        break;
                    }
                }
            }
            // Only while the outbox has room: frames waiting in the streams'
            // backlog make this ready at once, and with a full outbox the
            // branch above (the socket taking bytes) is what must come first.
            _ = std::future::poll_fn(|cx| streams.poll_streams(cx)), if !streams.is_idle() && outbox.has_room() => {
                streams.write_into(&mut outbox);
            }
            _ = pool_news(
                pool_lane.map(|l| &l.answers),
                || pool_lane.is_some_and(|l| l.pool.tasks_in_flight() == 1),
                lend,
                pool_lane.filter(|_| lend_read).map(|l| l.pool),
            ) => {
                // The read side came back (or could not be lent): this task
                // reads for at least one turn, so a refused loan is not
                // asked again at once.
                read_side_back = lend_read;
                if let Some(pooled) = pooled {
                    outbox.take_pooled(pooled);
                }
            }
            _ = &mut timer, if armed.is_some() => timer_fired = true,
            _ = in_flight.changed.notified(), if !can_read || stopping => {}
            event = std::future::poll_fn(|cx| watch.poll_stop(cx, was_stopping)) => match event {
                Stop::Forced => {
                    close.set(FORCED_CLOSE);
                    break;
                }
                Stop::Stopping => stopping = true,
                Stop::Evicted => {
                    evicted = true;
                    stopping = true;
                }
            },
            // Last, so only when nothing above is ready: a client in rhythm
            // is polled for instead of parking (see `rpc_transport::busy_poll`).
            _ = tokio::task::yield_now(), if polling && !lend_read => polled = reader.read_now(),
        }
    }
    // The pool side as it ended: the loop may have left in the batch whose
    // first request made it.
    pool_side_made = pool_side.as_ref().and_then(LazyPoolSide::get);
    let pooled = pool_side_made.map(|side| &*side.lane.answers);
    // The socket back from the workers, and what they left first in line;
    // the calls they started join the table (cancelled with it below).
    // Bytes a loan ended with (a loop that stopped while it lent, at an
    // idle timeout or a forced stop) go back into the reader, drained
    // while it lent, so a lingering close goes on from them.
    if let Some(side) = pool_side_made {
        side.take_back(&ctx, &mut outbox, &mut reader, &mut live, true);
    }
    // A batch the loop left on bad input never reached the pool: its calls
    // did not run, and are counted done now (their callers see the close).
    batch.get_mut().release();
    // Calls still running here are abandoned (a forced stop, a broken
    // connection): the server may have run them, so the client must not be
    // told "not run" (`TooManyConnections`) for them.
    let abandoned = calls(&streams, pooled) > 0;
    // Whatever still runs has nobody to answer: handlers that look see
    // their context cancelled.
    live.cancel_all();
    drop(direct);
    // After every answer, a connection-level "not run" for whatever is still
    // pending at the client (sent but not read here, or read during the
    // linger): nothing pending then is a call the server ran, so the
    // client may retry it anywhere. Like HTTP/2's GOAWAY. Never after
    // abandoned calls, which may have run.
    let goodbye = if evicted {
        (!abandoned).then(|| ticket.eviction_error())
    } else {
        drained.then_some(RpcError::ShuttingDown)
    };
    // Boxed: what the close awaits is made once, when the connection
    // ends, instead of taking room in every connection's future.
    let closing = Closing {
        ctx: &ctx,
        peer: &peer,
        outbox: &mut outbox,
        reader: &mut reader,
        streams: &mut streams,
        pooled,
        goodbye,
    };
    Box::pin(closing.finish(&mut close)).await;
}

/// Sets the connection's one timer for `at`, unless it is armed for
/// sooner already.
fn arm(timer: Pin<&mut Sleep>, armed: &mut Option<tokio::time::Instant>, at: tokio::time::Instant) {
    if armed.is_none_or(|armed_at| at < armed_at) {
        timer.reset(at);
        *armed = Some(at);
    }
}

/// Bytes received on the connection: by its reader, and by the workers it
/// lent its read side to (the idle watch's measure of activity).
fn bytes_in<R: AsyncRead + Unpin>(reader: &FrameReader<R>, pooled: Option<&PoolAnswers>) -> u64 {
    reader.bytes_read() + pooled.map_or(0, PoolAnswers::worker_bytes)
}

/// What the connection's one timer serves (see `serve_halves`).
struct Timers<'t, 'a> {
    live: &'t mut LiveCalls<'a>,
    expired: &'t mut Vec<Live<'a>>,
    idle: &'t mut IdleWatch,
}

impl Timers<'_, '_> {
    /// The timer came round: answers the calls past their deadline
    /// `DeadlineExceeded`, gives back the frame budget held by answers the
    /// client has not taken for a while, and checks for idleness (what to
    /// do about it is the caller's).
    fn fired<W: AsyncWrite + Unpin>(
        self,
        ctx: &ServerCtx,
        peer: &str,
        outbox: &mut Outbox<W>,
        bytes_read: u64,
    ) -> Check {
        let now = tokio::time::Instant::now();
        self.live.expire(now.into_std(), self.expired);
        for call in self.expired.drain(..) {
            answer_expired(ctx, call, outbox);
        }
        if outbox.budget_stall().is_some_and(|at| at <= now) {
            let n = outbox.give_back_budget();
            warn!(%peer, reservations = n,
                "the client took no answer for a while: its share of the frame budget goes back");
        }
        self.idle.check(now, bytes_read)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rpc_core::modes::Dispatch;

    use crate::listener::Accepted;
    use crate::router::Router;
    use crate::test_support::server;

    /// An idle connection is its task's future (and its socket): tokio
    /// allocates the future in a cell aligned to 128 bytes, so every
    /// 128-byte step of the future is a step of every idle connection's
    /// memory (`examples/idle_connections.rs`). Printed, for a change to
    /// compare (BENCHMARKS.md keeps the figures); bounded a little above its
    /// size, so a step up is a choice, not an accident. A new compiler can
    /// move the layout too: then measure `idle_connections` and set the
    /// bound again.
    #[tokio::test]
    async fn the_connection_future_stays_small() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (stream, peer) = listener.accept().await.unwrap();
        let (ctx, ticket) = server(Dispatch::Pool, Router::new());
        let served = super::serve_connection(Accepted::Tcp(stream, peer), Arc::clone(&ctx), ticket);
        let size = std::mem::size_of_val(&served);
        println!("connection future: {size} bytes");
        assert!(size <= 2400, "the connection future grew to {size} bytes");
    }
}
