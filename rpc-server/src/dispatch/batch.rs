//! [`PoolBatch`]: the pooled calls of one read batch of a connection,
//! handed to the worker pool together when the batch ends.
//!
//! # Why a batch
//!
//! Submitted one by one, every pooled call took the pool's queue lock and
//! added to the pool's count of unfinished tasks — two cache lines the
//! workers write too, as they take and finish tasks on the other core, so
//! a submit could find both there while a worker drained the batch's
//! first calls. Together, a batch's calls take the lock once and count
//! once ([`WorkerPool::submit_batch`]): fewer instructions a call
//! (BENCHMARKS.md, "A read batch's calls handed to the pool together").
//! Their worker is woken after the batch anyway (the calls went in quietly
//! before), so a parked worker starts no later; a worker already awake
//! starts on them at the batch's end instead of as they come.
//!
//! # Invariants
//!
//! - The pool accepts a prefix of the batch, as submits one after another
//!   would. Each call it refuses has its job dropped unrun (its answer slot
//!   counts it done) and is claimed — ended as answered, so the
//!   connection's table of live calls, where the call went when it was
//!   read, answers nothing more for it — then answered `ServerBusy` by the
//!   connection ([`submit`](PoolBatch::submit)'s `refused`) and counted in
//!   the server's stats and its method's metrics. One its caller cancelled
//!   while it was in the batch is neither answered nor counted.
//! - Nothing is left behind: `submit` empties the batch. A batch the
//!   connection drops without submitting (it ended on bad input mid-batch)
//!   drops its calls unrun, and their callers see the connection close, as
//!   those of calls on the pool then do.
//! - The buffers are kept from batch to batch and given back when the
//!   connection idles ([`release`](PoolBatch::release)).

use std::sync::atomic::Ordering;

use rpc_core::RpcError;

use super::job_box::JobBox;
use super::{PoolJob, Rejected};
use crate::ctx::ServerCtx;
use crate::pool::{Task, WorkerPool};
use crate::reply::ReplyTo;
use crate::router::RouteEntry;

/// The pooled calls of one read batch, not submitted yet (see the module
/// docs). One pointer until the connection's first pooled call: it lives
/// in the connection's future, which every idle connection holds too.
#[derive(Default)]
pub(crate) struct PoolBatch(Option<Box<Buffers>>);

/// A batch's buffers, kept from batch to batch.
#[derive(Default)]
struct Buffers {
    /// Each call, boxed for the pool.
    tasks: Vec<Task>,
    /// Each call's request id (index for index with `tasks`): a call the
    /// pool refuses is found by it where the connection keeps it.
    ids: Vec<u64>,
}

impl PoolBatch {
    /// Adds `job`, call `id`. Inlined where the job is built: passed to a
    /// call, its hundreds of bytes would be copied once more on their way
    /// into their box.
    #[inline(always)]
    pub(crate) fn push(&mut self, job: PoolJob, id: u64) {
        // Boxed first: kept on the stack across the call below, it would be
        // copied there.
        let task = JobBox::task(job);
        let buffers = match &mut self.0 {
            Some(buffers) => buffers,
            None => self.buffers(),
        };
        buffers.tasks.push(task);
        buffers.ids.push(id);
    }

    /// The buffers, made for the connection's first pooled call.
    #[cold]
    #[inline(never)]
    fn buffers(&mut self) -> &mut Buffers {
        self.0.get_or_insert_with(Box::default)
    }

    /// Calls added since the last [`submit`](Self::submit).
    pub(crate) fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |buffers| buffers.tasks.len())
    }

    /// Hands every call to `pool`, quietly (the caller wakes it after,
    /// [`WorkerPool::wake_idle`]). Each call it refuses is offered to
    /// `claim` (by its request id), which ends it as answered where the
    /// connection keeps its live calls and says whom it answers and for
    /// which method — `None` when its caller cancelled it meanwhile — and,
    /// claimed, goes to `refused` with its `ServerBusy` error, counted.
    /// Returns how many it accepted.
    pub(crate) fn submit<'r>(
        &mut self,
        pool: &WorkerPool,
        ctx: &ServerCtx,
        mut claim: impl FnMut(u64) -> Option<(ReplyTo, &'r RouteEntry)>,
        mut refused: impl FnMut(ReplyTo, RpcError),
    ) -> usize {
        let Some(buffers) = self.0.as_deref_mut() else {
            return 0;
        };
        let accepted = pool.submit_batch(&mut buffers.tasks);
        if !buffers.tasks.is_empty() {
            // Dropped unrun: each answer slot counts its call done.
            buffers.tasks.clear();
            let s = pool.stats();
            for id in buffers.ids.drain(accepted..) {
                let Some((reply_to, route)) = claim(id) else {
                    // Its caller cancelled it while it was in the batch.
                    continue;
                };
                ctx.stats.busy_rejections.fetch_add(1, Ordering::Relaxed);
                ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
                let busy = Rejected {
                    active: s.active,
                    queued: s.queued,
                };
                refused(reply_to, busy.error(route));
            }
        }
        buffers.ids.clear();
        accepted
    }

    /// Gives the buffers back (the connection idles); the batch is empty.
    pub(crate) fn release(&mut self) {
        self.0 = None;
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::{mpsc, Arc};
    use std::time::{Duration, Instant};

    use bytes::{Bytes, BytesMut};
    use rpc_core::{CancelSignal, Context, RpcRequest, SerializerKind};

    use super::*;
    use crate::dispatch::Reply;
    use crate::reply::PoolAnswers;
    use crate::router::Router;
    use crate::test_support::{one_thread_pool, EmptyAnswers};

    const WAIT: Duration = Duration::from_secs(10);

    /// A pool-dispatch server serving `S.m`, its pool one thread and
    /// room for two unfinished calls.
    fn server() -> Arc<ServerCtx> {
        let mut router = Router::new();
        router.add(Arc::new(EmptyAnswers("S", &["m"])));
        one_thread_pool(router)
    }

    /// Call `id` of `S.m`, answered into `answers`, and its cancel signal.
    fn call(ctx: &Arc<ServerCtx>, answers: &Arc<PoolAnswers>, id: u64) -> (PoolJob, ReplyTo) {
        let route = ctx.router.route("S", "m").unwrap();
        let reply_to = ReplyTo {
            id,
            serializer: SerializerKind::MsgPack as u8,
            answer_in: rpc_core::Compression::None,
        };
        let job = PoolJob {
            ctx: ctx.clone(),
            req: RpcRequest {
                service: Cow::Borrowed(route.service),
                method: Cow::Borrowed(route.method),
                body: Bytes::new(),
                cx: Context::new(id, SerializerKind::MsgPack),
            },
            route,
            received: Instant::now(),
            reply: Reply::Frame(answers.reserve(reply_to, None)),
        };
        (job, reply_to)
    }

    #[test]
    fn the_calls_the_pool_refuses_are_claimed_answered_busy_and_counted_but_a_cancelled_one() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _runtime = rt.enter();
        let ctx = server();
        let pool = ctx.dispatcher.pool().unwrap().clone();
        let route = ctx.router.route("S", "m").unwrap();
        let answers = Arc::new(PoolAnswers::new(1 << 20));

        // The one thread blocked: room for one more call.
        let (started_tx, started) = mpsc::channel();
        let (open, gate) = mpsc::channel::<()>();
        pool.execute(move || {
            started_tx.send(()).ok();
            let _ = gate.recv_timeout(WAIT);
        })
        .unwrap();
        started.recv_timeout(WAIT).unwrap();

        let mut batch = PoolBatch::default();
        let mut signals: Vec<CancelSignal> = Vec::new();
        let mut replies = Vec::new();
        for id in 1..=4 {
            let (job, reply_to) = call(&ctx, &answers, id);
            signals.push(job.req.cx.cancellation().clone());
            replies.push(reply_to);
            batch.push(job, reply_to.id);
        }
        assert_eq!(batch.len(), 4);
        // The last one's caller sent its `Cancel` in the same read.
        assert!(signals[3].give_up());
        let mut refused = Vec::new();
        let accepted = batch.submit(
            &pool,
            &ctx,
            |id| {
                let i = id as usize - 1;
                signals[i].finish().then_some((replies[i], &*route))
            },
            |reply_to, error| refused.push((reply_to.id, error)),
        );
        assert_eq!(accepted, 1, "the first call, as submits in turn");
        assert_eq!(batch.len(), 0, "nothing is left in the batch");
        let ids: Vec<u64> = refused.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, vec![2, 3], "the tail, in order, but the cancelled one");
        assert!(refused
            .iter()
            .all(|(_, e)| matches!(e, RpcError::ServerBusy(_))));
        assert!(signals[0].is_running(), "the accepted call waits its turn");
        assert!(
            !signals[1].finish() && !signals[2].finish(),
            "the refused calls are claimed: no deadline answers them again"
        );
        assert_eq!(ctx.stats.busy_rejections.load(Ordering::Relaxed), 2);
        assert_eq!(
            route.metrics.errors(),
            2,
            "counted in their method's metrics"
        );
        assert_eq!(
            answers.in_flight(),
            1,
            "only the accepted one is unanswered"
        );

        // The gate opens: the accepted call runs and is answered.
        drop(open);
        pool.wake_idle();
        let (mut out, mut held) = (BytesMut::new(), Vec::new());
        let deadline = Instant::now() + WAIT;
        while !answers.take(&mut out, &mut held, 1 << 16) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(answers.in_flight(), 0);
        assert!(!out.is_empty(), "the accepted call was answered");
    }
}
