//! Handling one frame read from a connection: a request is admitted
//! (`admit`: routed, given its [`Context`](rpc_core::Context) — metadata,
//! peer, deadline) and handed on — to the worker pool, or started for the
//! connection task to poll (direct dispatch) — and what
//! needs no handler (pings, cancels, refusals, oversize requests, expired
//! deadlines) is answered here.
//!
//! The connection task owns the loop and the socket (`mod.rs`); this file
//! owns what one frame or one call turns into, so the loop reads as a loop.

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::CatchUnwind;
use futures::FutureExt;
use rpc_codec::{Frame, FrameKind, Header, OutFrame};
use rpc_core::{CancelSignal, RpcError};
use rpc_transport::{Inbound, Reserved};
use tokio::io::AsyncWrite;
use tracing::{trace, warn};

use super::admit::{admit, Admitted};
use super::live::{Live, LiveCalls};
use super::pool_side::LazyPoolSide;
use crate::admission::Ticket;
use crate::ctx::ServerCtx;
use crate::dispatch::{
    deadline_error, finish_call, start_call, CallFuture, PoolBatch, PoolJob, Reply,
};
use crate::reply::{Outbox, ReplyTo};
use crate::router::RouteEntry;
use crate::stream::ConnStreams;

/// Answers a request whose header announced more than `max` bytes with
/// `FrameTooLarge` (the reader skips its bytes); other kinds are only logged.
pub(super) fn answer_too_large<W: AsyncWrite + Unpin>(
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
        ctx.stats.requests.add(1);
        ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
        let err = Inbound::too_large_error(header, max);
        outbox.push(OutFrame::error(id, header.serializer, &err));
    }
}

/// Answers `DeadlineExceeded`, now, a call whose deadline passed (the
/// table cancelled it, so its handler's late answer will be discarded).
pub(super) fn answer_expired<W: AsyncWrite + Unpin>(
    ctx: &ServerCtx,
    call: Live<'_>,
    outbox: &mut Outbox<W>,
) {
    let timeout = call.deadline.map_or(Duration::ZERO, |(_, t)| t);
    ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
    call.route.metrics.record(timeout, false);
    outbox.push(call.reply_to.error(&deadline_error(call.route, timeout)));
}

/// A direct call's handler, started, its panics caught.
pub(super) type Running<'a> = CatchUnwind<AssertUnwindSafe<CallFuture<'a>>>;

/// A call run on the connection task (direct dispatch), minus its request.
pub(super) struct DirectCall<'a> {
    pub(super) route: &'a RouteEntry,
    reply_to: ReplyTo,
    started: Instant,
    /// When the caller stops waiting, and what it allowed.
    deadline: Option<(Instant, Duration)>,
    /// The call's end, once it is in `LiveCalls` (still pending after its
    /// first poll): its answer must claim it.
    live: Option<CancelSignal>,
    /// A large request's share of the frame budget, held until its answer is written.
    reserved: Option<Reserved>,
}

impl<'a> DirectCall<'a> {
    /// The call is still pending after its first poll: it goes into `live`,
    /// to be cancelled by its deadline or a `Cancel` frame through `cancel`.
    pub(super) fn wait_in(&mut self, live: &mut LiveCalls<'a>, cancel: &CancelSignal) {
        live.insert(Live {
            cancel: cancel.clone(),
            route: self.route,
            reply_to: self.reply_to,
            deadline: self.deadline,
        });
        self.live = Some(cancel.clone());
    }

    /// A pending call ended: answers it, unless it was cancelled first (its
    /// deadline was answered already, or the client wants no answer).
    pub(super) fn finished<W: AsyncWrite + Unpin>(
        self,
        ctx: &ServerCtx,
        outcome: Option<std::thread::Result<Result<rpc_core::RpcResponse, RpcError>>>,
        outbox: &mut Outbox<W>,
    ) {
        let mine = self.live.as_ref().is_none_or(|signal| signal.finish());
        match outcome {
            Some(outcome) if mine => {
                let elapsed = self.started.elapsed();
                self.answer(ctx, elapsed, outcome, outbox);
            }
            // Dropped: its context was cancelled; the connection answered
            // its deadline, or the client does not want an answer.
            _ => {}
        }
    }

    /// Records the call's outcome and encodes its answer.
    pub(super) fn answer<W: AsyncWrite + Unpin>(
        self,
        ctx: &ServerCtx,
        elapsed: Duration,
        outcome: std::thread::Result<Result<rpc_core::RpcResponse, RpcError>>,
        outbox: &mut Outbox<W>,
    ) {
        let result = finish_call(ctx, self.route, elapsed, outcome);
        outbox.push(self.reply_to.answer(result, &ctx.config.compression));
        outbox.hold(self.reserved);
    }
}

/// What handling one frame needs to know of its connection.
pub(super) struct Conn<'a, 'b> {
    pub(super) ctx: &'a Arc<ServerCtx>,
    /// Pool dispatch only: the connection's side of the pool, made for its
    /// first request.
    pub(super) pool_side: Option<&'b LazyPoolSide<'a>>,
    /// The peer's address; none on a Unix socket.
    pub(super) peer: Option<SocketAddr>,
    pub(super) stopping: bool,
    /// Set when the connection was evicted: new requests are answered its
    /// eviction error.
    pub(super) evicted: Option<&'b Ticket>,
    /// The batch's calls that go to the pool, handed over when the batch
    /// ends (`dispatch::PoolBatch`).
    pub(super) batch: &'b std::cell::RefCell<PoolBatch>,
}

impl<'a> Conn<'a, '_> {
    /// Refuses a request (or a stream's open, answered as the stream's end).
    fn reply_error<W: AsyncWrite + Unpin>(
        &self,
        reply_to: ReplyTo,
        stream: bool,
        err: RpcError,
        answers: &mut Outbox<W>,
    ) {
        self.ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
        answers.push(match stream {
            false => reply_to.error(&err),
            true => reply_to.stream_error(&err),
        });
    }

    /// Handles one frame (received at `received`); returns a call started
    /// for the caller to poll when dispatch is direct: its answer's
    /// particulars, its end, and its handler's future. Answers that need no
    /// handler (pongs, errors) go into `answers`.
    ///
    /// Inlined into its one caller, the connection's loop: out of line, its
    /// result would go through a return slot and be moved once more for
    /// every call.
    #[inline(always)]
    pub(super) fn on_frame<W: AsyncWrite + Unpin>(
        &self,
        frame: Frame,
        reserved: Option<Reserved>,
        received: Instant,
        answers: &mut Outbox<W>,
        live: &mut LiveCalls<'a>,
        streams: &mut ConnStreams,
    ) -> Option<(DirectCall<'a>, CancelSignal, Running<'a>)> {
        let id = frame.header.request_id;
        match frame.header.kind {
            FrameKind::Request | FrameKind::StreamOpen => {}
            FrameKind::StreamData
            | FrameKind::StreamEnd
            | FrameKind::StreamError
            | FrameKind::Credit => {
                streams.on_frame(frame);
                return None;
            }
            FrameKind::Ping => {
                answers.push(OutFrame::control(FrameKind::Pong, id));
                return None;
            }
            FrameKind::Pong => return None,
            FrameKind::Cancel => {
                // A call not running has ended already (or never was):
                // nothing to do. One that is ends here, unanswered.
                if streams.cancel(id) {
                    trace!(peer = ?self.peer, request_id = id, "stream cancelled by the client");
                } else if let Some(call) = live.cancel(id) {
                    trace!(peer = ?self.peer, request_id = id, "call cancelled by the client");
                    call.route.metrics.record_cancelled();
                }
                return None;
            }
            FrameKind::Response => {
                warn!(peer = ?self.peer, request_id = id, "a client sent a response frame: ignored");
                return None;
            }
        }
        self.ctx.stats.requests.add(1);
        let stream = frame.header.kind == FrameKind::StreamOpen;
        // The pool side, made for the connection's first unary request
        // (refused ones too, but not while stopping, which refuses every
        // request). Looked up before the request is opened, so the call's
        // parts are built where they stay.
        let side = match stream || self.stopping {
            false => self
                .pool_side
                .and_then(|side| side.get_or_make(self.ctx, self.peer)),
            true => None,
        };
        let refusal = self.stopping.then(|| {
            self.evicted
                .map_or(RpcError::ShuttingDown, Ticket::eviction_error)
        });
        let ctx: &'a ServerCtx = self.ctx;
        let Admitted {
            route,
            reply_to,
            req,
            deadline,
        } = match admit(ctx, frame, received, self.peer, refusal) {
            Ok(admitted) => admitted,
            Err((reply_to, e)) => {
                self.reply_error(reply_to, stream, e, answers);
                return None;
            }
        };
        if stream {
            if let Err(e) = streams.start(self.ctx, route.clone(), req, reply_to.serializer) {
                self.reply_error(reply_to, stream, e, answers);
            }
            return None;
        }
        debug_assert_eq!(
            side.is_some(),
            self.pool_side.is_some(),
            "a pooled connection's unary call goes to its pool"
        );
        match side {
            Some(side) => {
                let lane = &side.lane;
                let cancel = req.cx.cancellation().clone();
                let reply = Reply::Frame(lane.answers.reserve(reply_to, reserved));
                // The batch borrowed first and the job built in the call:
                // held across the borrow, the job (hundreds of bytes) would
                // be copied once more.
                let mut batch = self.batch.borrow_mut();
                let job = PoolJob {
                    ctx: self.ctx.clone(),
                    route: route.clone(),
                    req,
                    received,
                    reply,
                };
                batch.push(job, reply_to.id);
                drop(batch);
                live.insert(Live {
                    cancel,
                    route,
                    reply_to,
                    deadline,
                });
                None
            }
            None => {
                // Started here, so the request (hundreds of bytes) goes
                // straight into its handler's future, not through the
                // connection's loop.
                let cancel = req.cx.cancellation().clone();
                let running = AssertUnwindSafe(start_call(ctx, route, req)).catch_unwind();
                let call = DirectCall {
                    route,
                    reply_to,
                    started: received,
                    deadline,
                    live: None,
                    reserved,
                };
                Some((call, cancel, running))
            }
        }
    }
}
