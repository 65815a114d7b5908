//! [`WorkerReads`]: the connection's side of a read lent to a worker
//! (`reply::pool_reads`) — how a request that a worker read becomes a pooled
//! call, and how the connection task learns of it.
//!
//! A worker-read request goes the way of one the task read: [`admit`]
//! routes it and opens it (or gives the error its caller gets), a
//! [`PoolJob`] runs it, its [`AnswerSlot`](crate::reply::AnswerSlot)
//! answers it. What the task would have done itself is recorded for it:
//! the call goes into [`WorkerReads::started`], which the task moves into
//! its live-call table (deadlines, `Cancel` frames) as soon as it takes its
//! read side back — before it reads anything after it — and the admission
//! table marks the connection busy.
//!
//! While the read side is lent the task sleeps, so a deadline of a call a
//! worker started is watched from the task's next turn: the task takes its
//! read side back at least every [`LENT_READ_TICK`], so a call that runs
//! longer (a handler that blocks, or awaits) is in the table by then, and a
//! `Cancel` or a second call behind it is read within that tick.
//!
//! A worker does not know of a graceful stop or an eviction that the task
//! has not seen yet: a request it reads in that moment runs and is answered,
//! as one the task read just before it looked would be (the task takes its
//! read side back on its next turn, which the stop wakes it for).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rpc_codec::Frame;
use rpc_core::{CancelSignal, RpcError};

use super::live::{Live, LiveCalls};
use super::on_frame::{admit, Admitted};
use crate::admission::QuietMarker;
use crate::ctx::ServerCtx;
use crate::dispatch::{PoolJob, Reply};
use crate::reply::{PoolAnswers, ReplyTo, TakeRequest};
use crate::router::Route;

/// How long the connection task lets its read side stay lent before it
/// takes it back for a turn (see the module docs).
pub(super) const LENT_READ_TICK: Duration = Duration::from_millis(1);

/// A call a worker started, for the connection task's live-call table.
pub(super) struct Started {
    cancel: CancelSignal,
    route: Route,
    reply_to: ReplyTo,
    deadline: Option<(Instant, Duration)>,
}

/// How requests a worker read become calls of this connection.
pub(super) struct WorkerReads {
    ctx: Arc<ServerCtx>,
    peer: Option<SocketAddr>,
    quiet: QuietMarker,
    /// Calls workers started since the task last looked.
    started: Arc<Mutex<Vec<Started>>>,
}

impl WorkerReads {
    /// The taker for a connection from `peer`, and the list of the calls it
    /// starts, which the task drains with [`drain_started`].
    pub(super) fn new(
        ctx: Arc<ServerCtx>,
        peer: Option<SocketAddr>,
        quiet: QuietMarker,
    ) -> (Self, Arc<Mutex<Vec<Started>>>) {
        let started = Arc::new(Mutex::new(Vec::new()));
        let reads = WorkerReads {
            ctx,
            peer,
            quiet,
            started: started.clone(),
        };
        (reads, started)
    }
}

/// Moves the calls workers started into the task's table (their routes
/// borrowed from the router, as the task's own calls are).
pub(super) fn drain_started<'a>(
    ctx: &'a ServerCtx,
    started: &Mutex<Vec<Started>>,
    live: &mut LiveCalls<'a>,
) {
    let mut started = started.lock();
    // Most have ended already (answered in rhythm): only the rest can still
    // end early.
    for call in started.drain(..).filter(|call| call.cancel.is_running()) {
        // Routed a moment ago by the same router: found again.
        if let Ok(route) = ctx.router.route_ref(call.route.service, call.route.method) {
            live.insert(Live {
                cancel: call.cancel,
                route,
                reply_to: call.reply_to,
                deadline: call.deadline,
            });
        }
    }
}

impl TakeRequest for WorkerReads {
    fn take(
        &self,
        frame: Frame,
        received: Instant,
        answers: &Arc<PoolAnswers>,
    ) -> Box<dyn FnOnce() + Send> {
        let ctx = &self.ctx;
        ctx.stats.requests.fetch_add(1, Ordering::Relaxed);
        match admit(ctx, frame, received, self.peer, None) {
            Ok(Admitted {
                route,
                reply_to,
                req,
                deadline,
            }) => {
                self.started.lock().push(Started {
                    cancel: req.cx.cancellation().clone(),
                    route: route.clone(),
                    reply_to,
                    deadline,
                });
                self.quiet.call_started();
                let job = PoolJob {
                    ctx: ctx.clone(),
                    route: route.clone(),
                    req,
                    received,
                    reply: Reply::Frame(answers.reserve(reply_to, None)),
                };
                let answers = answers.clone();
                let end = job.req.cx.cancellation().clone();
                Box::new(move || {
                    let (ctx, route) = (job.ctx.clone(), job.route.clone());
                    let refused = match ctx.dispatcher.pool() {
                        Some(pool) => job.submit(pool, &ctx, &route, true).err(),
                        // Only pool dispatch lends; a call is answered even so.
                        None => Some(RpcError::ShuttingDown),
                    };
                    // Refused (its slot went with the job): answered here,
                    // once — the call's end is claimed first, so the task's
                    // live-call table, which has it, does not answer its
                    // deadline as well.
                    if let Some(refused) = refused {
                        if end.finish() {
                            answers.reserve(reply_to, None).answer(Err(refused));
                        }
                    }
                })
            }
            Err((reply_to, e)) => {
                ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
                let slot = answers.reserve(reply_to, None);
                Box::new(move || slot.answer(Err(e)))
            }
        }
    }
}
