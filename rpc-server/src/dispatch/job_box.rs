//! [`JobBox`]: the box a pooled call travels to its worker in, kept for a
//! next call instead of freed.
//!
//! A call submitted to the pool is boxed by the connection task and run —
//! and its box dropped — by a worker: one allocation a call, made on one
//! thread and freed on another, which glibc serves through its shared arena
//! under a lock (see `rpc_core::spares`). So the worker takes the call out
//! of its box and keeps the empty box among the [`Spares`], which hand it,
//! with a batch of others, to the next thread that boxes calls and has none
//! left (a connection's).
//!
//! An emptied box holds no call: nothing of a call outlives its run here.
//! A box (288 bytes) is kept at most 32 to a thread and 256 in the shared
//! depot; a task the pool refuses is dropped with its call, box and all.

use std::cell::RefCell;

use rpc_core::spares::Spares;

use super::PoolJob;
use crate::pool::{Job, Task};

/// A pooled call, boxed for the pool; empty once it ran.
pub(super) struct JobBox(Option<PoolJob>);

thread_local! {
    /// This thread's empty boxes (their allocations are what is kept).
    #[allow(clippy::vec_box)]
    static STOCK: RefCell<Vec<Box<JobBox>>> = const { RefCell::new(Vec::new()) };
}

/// Empty boxes, for the next call submitted.
static EMPTY: Spares<Box<JobBox>> = Spares::new(&STOCK);

impl JobBox {
    /// `job`, boxed for the pool — in an emptied box when there is one.
    #[inline]
    pub(super) fn task(job: PoolJob) -> Task {
        match EMPTY.take() {
            Some(mut boxed) => {
                boxed.0 = Some(job);
                boxed
            }
            None => Box::new(JobBox(Some(job))),
        }
    }
}

impl Job for JobBox {
    #[inline]
    fn run(mut self: Box<Self>) {
        let job = self.0.take();
        EMPTY.keep(self);
        if let Some(job) = job {
            job.run();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::Arc;
    use std::time::Instant;

    use bytes::{Bytes, BytesMut};
    use rpc_core::{
        Context, HandlerFuture, RpcRequest, RpcResponse, SerializerKind, ServiceHandler,
    };

    use super::*;
    use crate::config::ServerConfig;
    use crate::ctx::ServerCtx;
    use crate::dispatch::Reply;
    use crate::reply::{PoolAnswers, ReplyTo};
    use crate::router::Router;

    /// Method 0 echoes; method 1 panics.
    struct EchoOrPanic;

    impl ServiceHandler for EchoOrPanic {
        fn service_name(&self) -> &'static str {
            "S"
        }
        fn method_names(&self) -> &'static [&'static str] {
            &["echo", "panic"]
        }
        fn call(&self, method: usize, _: Context, body: Bytes) -> HandlerFuture<'_> {
            Box::pin(async move {
                assert_eq!(method, 0, "the handler panics");
                Ok(RpcResponse::new(body))
            })
        }
    }

    /// A pooled call of `method`, answered into `answers`.
    fn job(ctx: &Arc<ServerCtx>, answers: &Arc<PoolAnswers>, id: u64, method: &str) -> PoolJob {
        let route = ctx.router.route("S", method).unwrap();
        let reply_to = ReplyTo {
            id,
            serializer: SerializerKind::MsgPack as u8,
            answer_in: rpc_core::Compression::None,
        };
        PoolJob {
            ctx: ctx.clone(),
            req: RpcRequest {
                service: Cow::Borrowed(route.service),
                method: Cow::Borrowed(route.method),
                body: Bytes::from_static(b"hi"),
                cx: Context::new(id, SerializerKind::MsgPack),
            },
            route,
            received: Instant::now(),
            reply: Reply::Frame(answers.reserve(reply_to, None)),
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A pool-dispatch server's context (inside a runtime) serving
    /// [`EchoOrPanic`], a connection's answers, and this thread's stock of
    /// boxes emptied.
    fn server() -> (Arc<ServerCtx>, Arc<PoolAnswers>) {
        let mut router = Router::new();
        router.add(Arc::new(EchoOrPanic));
        let config = ServerConfig::default();
        let ctx = ServerCtx::new(config, router, Vec::new(), Default::default()).unwrap();
        STOCK.with(|stock| stock.borrow_mut().clear());
        (Arc::new(ctx), Arc::new(PoolAnswers::new(1 << 20)))
    }

    /// The address of a task's box.
    fn address(task: &Task) -> *const u8 {
        &**task as *const dyn Job as *const u8
    }

    #[test]
    fn a_run_call_s_box_is_kept_empty_and_boxes_the_thread_s_next_call() {
        let rt = runtime();
        let _runtime = rt.enter();
        let (ctx, answers) = server();

        let first = JobBox::task(job(&ctx, &answers, 1, "echo"));
        let boxed_at = address(&first);
        first.run();
        STOCK.with(|stock| {
            let stock = stock.borrow();
            assert_eq!(stock.len(), 1, "the box was kept");
            assert!(stock[0].0.is_none(), "empty: its call ran and is gone");
        });
        let second = JobBox::task(job(&ctx, &answers, 2, "panic"));
        assert_eq!(
            address(&second),
            boxed_at,
            "the kept box boxes the next call"
        );
        // A handler that panics is answered with an error; the box is kept.
        second.run();
        STOCK.with(|stock| assert_eq!(stock.borrow().len(), 1));

        let (mut out, mut held) = (BytesMut::new(), Vec::new());
        assert!(answers.take(&mut out, &mut held, 1 << 16), "both answered");
        let route = ctx.router.route("S", "echo").unwrap();
        assert_eq!(route.metrics.calls(), 1);
        let route = ctx.router.route("S", "panic").unwrap();
        assert_eq!((route.metrics.calls(), route.metrics.errors()), (1, 1));
    }

    #[test]
    fn a_refused_task_drops_its_call_unrun_and_its_box() {
        let rt = runtime();
        let _runtime = rt.enter();
        let (ctx, answers) = server();
        let refused = JobBox::task(job(&ctx, &answers, 1, "echo"));
        let holders = Arc::strong_count(&ctx);
        drop(refused);
        assert_eq!(Arc::strong_count(&ctx), holders - 1, "its call was dropped");
        assert_eq!(answers.in_flight(), 0, "its answer slot counted it done");
        STOCK.with(|stock| assert!(stock.borrow().is_empty(), "a full box is not kept"));
        let route = ctx.router.route("S", "echo").unwrap();
        assert_eq!(route.metrics.calls(), 0, "not run");
    }
}
