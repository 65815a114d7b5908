//! Running one call: interceptors and handler, panic containment, the
//! outcome turned into an answer — on the task that read the call, or on the
//! worker pool.
//!
//! # Invariants
//!
//! - Whatever happens inside a handler — an error, a panic — becomes an error
//!   response to that one caller; the connection and the server carry on.
//! - A call whose deadline passed before it started is answered
//!   `DeadlineExceeded` without running, and a call cancelled while it
//!   queued is not run at all: the caller has given up, running it would
//!   only waste a worker.
//! - A running pooled call whose context is cancelled (its deadline, its
//!   caller's `Cancel`): an async handler's future is dropped at its next
//!   await; a handler that blocks its worker sees `cx.cancelled()` and its
//!   late answer is discarded (the connection answered already).
//! - A pooled call is answered exactly once, through its [`Reply`]: into its
//!   connection's `PoolAnswers`, or to an in-process waiter — and only when
//!   its answer wins the call's `CancelSignal` (a deadline answered by the
//!   connection, a cancel, came first otherwise).
//!
//! # Why it is shaped so
//!
//! The protocols (the binary connection task, the HTTP gateway) own their
//! request parsing and answer writing; this module owns what lies between, so
//! both run calls alike. A connection task polls [`start_call`] itself, to try
//! each call once inline and answer it in the same batch, then calls
//! [`finish_call`] with its own clock reading; the HTTP gateway runs both in one. A pool
//! thread polls its call once where it is, because most handlers finish
//! without waiting on anything; a handler that waits becomes a task of the
//! pool that holds no worker while it waits (`on_pool`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rpc_core::{CancelSignal, Endpoint, HandlerFuture, Next, RpcError, RpcRequest, RpcResponse};
#[cfg(feature = "http")]
use tokio::sync::oneshot;

use crate::ctx::ServerCtx;
use crate::panic::panic_message;
use crate::pool::WorkerPool;
use crate::reply::{AnswerSlot, ReplyTo};
use crate::router::{Route, RouteEntry};

mod batch;
mod job_box;
mod on_pool;
pub(crate) mod run;

pub(crate) use batch::PoolBatch;

/// The end of the server's interceptor chain: the routed method.
struct HandlerEndpoint<'a>(&'a RouteEntry);

#[async_trait]
impl Endpoint for HandlerEndpoint<'_> {
    async fn call(&self, req: RpcRequest) -> Result<RpcResponse, RpcError> {
        let route = self.0;
        route.handler.call(route.index, req.cx, req.body).await
    }
}

/// A call in progress: the handler's (or the interceptor chain's) future.
pub(crate) type CallFuture<'a> = HandlerFuture<'a>;

/// The error of a call whose deadline passed (`timeout` is what the caller
/// allowed it).
pub(crate) fn deadline_error(route: &RouteEntry, timeout: Duration) -> RpcError {
    RpcError::Timeout {
        service: route.service.into(),
        method: route.method.into(),
        timeout,
    }
}

/// Starts `req` through the interceptors, the tower layers and the handler,
/// borrowing nothing but `*ctx` and `*route` (`on_pool` relies on that to
/// keep a waiting call's future beside the `Arc`s of both: keep it so),
/// inside its `rpc.server` span when a subscriber wants it. Without
/// middleware or tracing this is the handler's own future, with no extra
/// allocation.
pub(crate) fn start_call<'a>(
    ctx: &'a ServerCtx,
    route: &'a RouteEntry,
    req: RpcRequest,
) -> CallFuture<'a> {
    if crate::call_span::wanted() {
        return start_traced(ctx, route, req);
    }
    run_call(ctx, route, req)
}

/// [`start_call`] when a subscriber may want the call's span: out of line,
/// so the untraced path is one load and one branch.
#[cold]
#[inline(never)]
fn start_traced<'a>(ctx: &'a ServerCtx, route: &'a RouteEntry, req: RpcRequest) -> CallFuture<'a> {
    let span = crate::call_span::open(route, &req.cx);
    if span.is_disabled() {
        return run_call(ctx, route, req);
    }
    crate::call_span::around(span, run_call(ctx, route, req))
}

/// The call's interceptors, layers and handler. Inlined into both of
/// `start_call`'s paths: a function of its own moved the request once more
/// per call (callgrind: ~30 instructions).
#[inline(always)]
fn run_call<'a>(ctx: &'a ServerCtx, route: &'a RouteEntry, req: RpcRequest) -> CallFuture<'a> {
    if !ctx.has_middleware() {
        return route.handler.call(route.index, req.cx, req.body);
    }
    Box::pin(async move {
        #[cfg(feature = "tower")]
        if let Some(stack) = &ctx.layers {
            let endpoint = crate::layers::LayeredEndpoint { stack, route };
            return Next::new(&ctx.interceptors, &endpoint).run(req).await;
        }
        Next::new(&ctx.interceptors, &HandlerEndpoint(route))
            .run(req)
            .await
    })
}

/// Turns a call's outcome into its answer: a panic becomes a `Handler` error,
/// an answer over `max_frame_size` a `FrameTooLarge` error (it would otherwise
/// be dropped by the writer and leave the caller waiting for its timeout), and
/// the outcome is recorded in the method's metrics with the call's `elapsed`
/// time (the caller reads the clock: a connection task chains one reading per
/// call, the end of one call being the start of the next).
pub(crate) fn finish_call(
    ctx: &ServerCtx,
    route: &RouteEntry,
    elapsed: Duration,
    outcome: std::thread::Result<Result<RpcResponse, RpcError>>,
) -> Result<RpcResponse, RpcError> {
    let result = match outcome {
        // A handler's own "not run" error (a gateway passing on a downstream
        // refusal, say) must not tell the caller this call did not run here:
        // the caller would retry a call that ran. Only the server's own
        // refusals send those statuses.
        Ok(Err(e)) if e.server_did_not_run() => Err(RpcError::Handler(e.to_string())),
        Ok(r) => r,
        Err(panic) => Err(RpcError::Handler(format!(
            "handler {}.{} panicked: {}",
            route.service,
            route.method,
            panic_message(panic.as_ref())
        ))),
    };
    let max = ctx.config.transport.max_frame_size;
    let result = result.and_then(|answer| {
        let meta: usize = answer
            .metadata
            .iter()
            .map(|(k, v)| 4 + k.len() + v.len())
            .sum();
        let size = rpc_codec::HEADER_LEN + meta + answer.body.len();
        if size > max {
            Err(RpcError::FrameTooLarge {
                size: size as u64,
                max: max as u64,
            })
        } else {
            Ok(answer)
        }
    });
    route.metrics.record(elapsed, result.is_ok());
    if result.is_err() {
        ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
    }
    result
}

/// Completion bookkeeping of one call polled by its connection task (direct
/// dispatch): when dropped (answered, or the call lost), the connection may
/// read again.
pub(crate) struct InFlightPermit(pub Arc<InFlight>);

impl Drop for InFlightPermit {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
        self.0.changed.notify_one();
    }
}

/// Per-connection count of calls in progress on the connection task.
#[derive(Default)]
pub(crate) struct InFlight {
    pub count: std::sync::atomic::AtomicUsize,
    pub changed: tokio::sync::Notify,
}

impl InFlight {
    pub fn acquire(self: &Arc<Self>) -> InFlightPermit {
        self.count.fetch_add(1, Ordering::AcqRel);
        InFlightPermit(self.clone())
    }

    pub fn get(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }
}

/// Where a pooled call's outcome goes.
pub(crate) enum Reply {
    /// A binary-protocol connection: an answer frame, encoded into the
    /// connection's [`PoolAnswers`](crate::reply::PoolAnswers).
    Frame(AnswerSlot),
    /// An in-process waiter (the HTTP gateway).
    #[cfg(feature = "http")]
    Channel(oneshot::Sender<Result<RpcResponse, RpcError>>),
}

impl Reply {
    /// Whom the answer goes to, for a connection's call.
    pub(crate) fn reply_to(&self) -> Option<ReplyTo> {
        match self {
            Reply::Frame(slot) => Some(slot.reply_to()),
            #[cfg(feature = "http")]
            Reply::Channel(_) => None,
        }
    }

    /// Delivers from a worker thread if the answer ends the call: a deadline
    /// answered (or a cancel) in the meantime came first otherwise, and
    /// nobody waits for it.
    fn end(self, end: &CancelSignal, result: Result<RpcResponse, RpcError>) {
        if end.finish() {
            self.deliver(result);
        }
    }

    /// Delivers from a worker thread. A caller that has gone away is not an error.
    fn deliver(self, result: Result<RpcResponse, RpcError>) {
        match self {
            Reply::Frame(slot) => slot.answer(result),
            #[cfg(feature = "http")]
            Reply::Channel(tx) => {
                let _ = tx.send(result);
            }
        }
    }
}

/// One call handed to the worker pool.
pub(crate) struct PoolJob {
    pub ctx: Arc<ServerCtx>,
    pub route: Route,
    pub req: RpcRequest,
    pub received: Instant,
    pub reply: Reply,
}

impl PoolJob {
    /// Runs on a worker thread.
    fn run(self) {
        let PoolJob {
            ctx,
            route,
            req,
            received,
            reply,
        } = self;
        // When it started: where the call of this worker's task before it
        // ended, if that task ended one (`pool::streak`).
        let started = crate::pool::streak::start(received);
        let end = req.cx.cancellation().clone();
        if !end.is_running() {
            // Its caller gave up while it queued (the connection answered
            // or dropped it already): not run, not answered.
            drop(reply);
            return;
        }
        if let Some(deadline) = req.cx.deadline().filter(|d| *d <= started) {
            // The caller has given up already: do not spend a worker on it.
            ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
            route.metrics.record(Duration::ZERO, false);
            let result = Err(deadline_error(
                &route,
                deadline.saturating_duration_since(received),
            ));
            reply.end(&end, result);
            return;
        }
        on_pool::run_call(ctx, route, req, started, end, reply);
    }

    /// Submits to the pool. When the pool is full the job is dropped unrun
    /// (its answer slot counts the call done without answering), the
    /// rejection is counted in `ctx`'s stats, and [`Rejected`] says so: its
    /// [`error`](Rejected::error), for the caller to answer right away,
    /// counts the call in its route's metrics too. The route is the
    /// caller's to give there, borrowed rather than cloned out of the job:
    /// its `Arc`, like `ctx`'s, is shared by every connection and worker
    /// thread. `batched`: one call of a batch, after which the caller wakes
    /// the pool once ([`WorkerPool::wake_idle`]).
    pub fn submit(self, pool: &WorkerPool, ctx: &ServerCtx, batched: bool) -> Result<(), Rejected> {
        let task = job_box::JobBox::task(self);
        let submitted = if batched {
            pool.submit_quietly(task)
        } else {
            pool.submit(task)
        };
        match submitted {
            Ok(()) => Ok(()),
            Err(rejected) => {
                drop(rejected);
                ctx.stats.busy_rejections.fetch_add(1, Ordering::Relaxed);
                ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
                let s = pool.stats();
                Err(Rejected {
                    active: s.active,
                    queued: s.queued,
                })
            }
        }
    }
}

/// A job the worker pool refused, full (see [`PoolJob::submit`]).
#[must_use = "the caller of a rejected job answers it with `error`"]
#[derive(Debug)]
pub(crate) struct Rejected {
    active: usize,
    queued: usize,
}

impl Rejected {
    /// The `ServerBusy` its caller gets; counts the call, failed, in the
    /// metrics of `route` (the method it was for).
    pub fn error(self, route: &RouteEntry) -> RpcError {
        route.metrics.record(Duration::ZERO, false);
        RpcError::ServerBusy(format!(
            "worker pool full ({} threads busy, {} queued)",
            self.active, self.queued
        ))
    }
}
