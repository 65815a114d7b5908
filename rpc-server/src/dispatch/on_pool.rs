//! A pooled call on its worker: polled once, and, when its handler waits
//! (an `.await` on I/O, a timer, another service), a task of the worker pool
//! that holds no thread while it waits.
//!
//! # Why it is shaped so
//!
//! A handler that waits used to keep its worker in `block_on` until it
//! finished: with `max_threads` handlers awaiting a database, the pool was
//! full and every other call queued behind them or was refused
//! `ServerBusy`, with the CPU idle. Here a waiting handler becomes an
//! [`async_task`] task whose waker hands its next poll back to the pool
//! ([`WorkerPool::resume`](crate::pool::WorkerPool::resume)): every poll still runs on a worker thread (a
//! handler that blocks between two awaits still occupies one worker and
//! stalls nothing else: the Tomcat guarantee), but between polls the call
//! holds no worker, so the other calls run on it.
//!
//! The first poll is made on the worker that took the call, with the
//! handler's future where it is — no task allocated — because most handlers
//! finish without waiting; only a handler still pending after it is moved
//! into a task, and polled again at once by that task (the first poll's
//! waker did nothing: a wake-up registered then would be lost).
//!
//! # Bounds and the end of a call
//!
//! A waiting call counts against the pool's admission bound
//! ([`WorkerPool::park`](crate::pool::WorkerPool)): new calls are refused
//! `ServerBusy` while unfinished tasks and waiting calls together exceed
//! `queue_size + max_threads`, as when each waiting call held a worker. Its
//! next poll, once woken, goes past that bound and ahead of the queued
//! calls (`WorkerPool::resume`): it is work the pool accepted, further
//! along than anything queued. When the call is given up (its deadline
//! answered by the connection, a `Cancel`, the connection gone) it is
//! woken, and its next poll drops the handler's future (the handler may
//! take one more step first: it is polled before the give-up is seen). A
//! task that a shut-down pool refuses is dropped with its handler, inside
//! the runtime's context (a handler's drop may need it); its [`Reply`]
//! then counts the call done without answering (the server closed its
//! connection first).
//!
//! The select on the give-up is also what keeps the task alive while it
//! waits: every `Pending` of [`finish`] leaves a waker with the call's
//! `CancelSignal`, so the task is never left with no waker and its future
//! never freed without being dropped.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use futures::future::CatchUnwind;
use futures::FutureExt;
use rpc_core::{CancelSignal, RpcRequest};

use super::{finish_call, start_call, CallFuture, Reply};
use crate::ctx::ServerCtx;
use crate::router::Route;

/// A call's handler, its panics caught.
type Handler<'a> = CatchUnwind<AssertUnwindSafe<CallFuture<'a>>>;

/// Runs `req` on this worker thread and delivers its answer through `reply`
/// — now, when the handler finishes at its first poll, or from the worker
/// that polls it last.
#[inline(always)]
pub(super) fn run_call(
    ctx: Arc<ServerCtx>,
    route: Route,
    req: RpcRequest,
    started: Instant,
    end: CancelSignal,
    reply: Reply,
) {
    let mut handler = AssertUnwindSafe(start_call(&ctx, &route, req)).catch_unwind();
    // Inside the server's runtime: a worker thread enters it for its life
    // (`WorkerPool::in_runtime`).
    let first = handler.poll_unpin(&mut Context::from_waker(Waker::noop()));
    let outcome = match first {
        Poll::Ready(outcome) => outcome,
        Poll::Pending => {
            // SAFETY: `start_call`'s future borrows nothing but `*ctx` and
            // `*route` (its signature ties its lifetime to those two
            // borrows; the request is moved in). Both live in `Arc`
            // allocations that `Waiting` owns beside the future and drops
            // after it (fields drop in declaration order), and an `Arc`'s
            // pointee does not move when the `Arc` does, so the borrows stay
            // valid for as long as the future exists.
            let handler = unsafe { std::mem::transmute::<Handler<'_>, Handler<'static>>(handler) };
            wait(Waiting {
                handler,
                ctx,
                route,
                started,
                end,
                reply,
            });
            return;
        }
    };
    let result = finish_call(&ctx, &route, ended_since(started), outcome);
    reply.end(&end, result);
}

/// A call whose handler waits, with what its future borrows.
struct Waiting {
    /// Declared first, so dropped first: it borrows from `ctx` and `route`.
    handler: Handler<'static>,
    ctx: Arc<ServerCtx>,
    route: Route,
    started: Instant,
    end: CancelSignal,
    reply: Reply,
}

/// Makes `call` a task of the worker pool and polls it once more, here.
fn wait(call: Waiting) {
    let Some(pool) = call.ctx.dispatcher.pool() else {
        // Only pooled calls come here; a call cannot be lost even so.
        debug_assert!(false, "a waiting call without a worker pool");
        let runtime = call.ctx.runtime.clone();
        let _runtime = runtime.enter();
        drop(call);
        return;
    };
    let parked = pool.park();
    // Weak: the task's future holds the pool already (through `ctx`).
    let pool = Arc::downgrade(pool);
    let runtime = call.ctx.runtime.clone();
    let schedule = move |runnable: async_task::Runnable| {
        // First, so left last: a call that a shut-down pool refuses is
        // dropped here, with its handler, on whatever thread woke it, and
        // inside the runtime's context (a handler's drop may need it).
        let _runtime = runtime.enter();
        // Run by a worker, inside the runtime already.
        let resumed = Box::new(move || {
            runnable.run();
        });
        if let Some(pool) = pool.upgrade() {
            let _ = pool.resume(resumed);
        }
    };
    let (runnable, task) = async_task::spawn(finish(call, parked), schedule);
    task.detach();
    runnable.run();
}

/// The rest of a waiting call: its handler to the end, unless the call is
/// given up first, then its answer. `_parked` counts it against the
/// pool's bound until it ends.
async fn finish(mut call: Waiting, _parked: crate::pool::Parked) {
    let outcome = tokio::select! {
        biased;
        outcome = &mut call.handler => Some(outcome),
        // Nobody waits for its answer (the connection answered already):
        // this drops the handler.
        _ = call.end.given_up() => None,
    };
    // The handler first: it borrows from the fields left behind it.
    drop(call.handler);
    if let Some(outcome) = outcome {
        let result = finish_call(&call.ctx, &call.route, ended_since(call.started), outcome);
        call.reply.end(&call.end, result);
    }
}

/// How long a call that `started` took, read as it ends on this worker
/// (the start of the worker's next call, `pool::streak`).
fn ended_since(started: Instant) -> std::time::Duration {
    crate::pool::streak::end().saturating_duration_since(started)
}
