//! Running one call: interceptors, handler, panic containment, the answer frame —
//! and handing calls to the worker pool.
//!
//! Whatever happens inside a handler — an error, a panic — becomes an error
//! response to that one caller; the connection and the server carry on. In pool
//! mode a call that waited in the queue past the caller's own timeout is answered
//! `Timeout` without running: the caller has given up, running it would only
//! waste a worker.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::FutureExt;
use rpc_codec::OutFrame;
use rpc_core::{
    Dispatch, Endpoint, Interceptor, Next, RpcError, RpcRequest, RpcResponse, ServiceHandler,
};
use rpc_transport::{FrameWriter, Outbound};
use tokio_util::sync::CancellationToken;

use crate::pool::WorkerPool;
use crate::router::{Route, Router};
use crate::stats::ServerStats;
use crate::ServerConfig;

/// Everything a connection task needs, shared by all of them.
pub(crate) struct ServerCtx {
    pub router: Router,
    pub interceptors: Vec<Arc<dyn Interceptor>>,
    pub pool: Option<Arc<WorkerPool>>,
    pub runtime: tokio::runtime::Handle,
    pub config: ServerConfig,
    /// Fired by graceful shutdown: stop taking new calls.
    pub stopping: CancellationToken,
    /// Fired when the grace period ran out: close everything now.
    pub force_close: CancellationToken,
    pub stats: Arc<ServerStats>,
}

impl ServerCtx {
    pub fn dispatch(&self) -> Dispatch {
        self.config.dispatch
    }
}

struct HandlerEndpoint<'a>(&'a dyn ServiceHandler);

#[async_trait]
impl Endpoint for HandlerEndpoint<'_> {
    async fn call(&self, req: RpcRequest) -> Result<RpcResponse, RpcError> {
        self.0.call(req).await.map(RpcResponse::new)
    }
}

/// Runs `req` through the interceptors and the handler; always yields a frame.
pub(crate) async fn execute(ctx: &ServerCtx, route: &Route, req: RpcRequest, id: u64) -> OutFrame {
    let ser = req.serializer.id();
    let call = async {
        if ctx.interceptors.is_empty() {
            route.handler.call(req).await
        } else {
            Next::new(&ctx.interceptors, &HandlerEndpoint(&*route.handler))
                .run(req)
                .await
                .map(|r| r.body)
        }
    };
    let result = match AssertUnwindSafe(call).catch_unwind().await {
        Ok(r) => r,
        Err(panic) => Err(RpcError::Handler(format!(
            "handler {}.{} panicked: {}",
            route.service,
            route.method,
            panic_message(&panic)
        ))),
    };
    // An answer too large to send would be dropped by the writer and leave the
    // caller waiting for its timeout: answer with the size error instead.
    let max = ctx.config.transport.max_frame_size;
    let result = result.and_then(|body| {
        let size = rpc_codec::HEADER_LEN + body.len();
        if size > max {
            Err(RpcError::FrameTooLarge {
                size: size as u64,
                max: max as u64,
            })
        } else {
            Ok(body)
        }
    });
    match result {
        Ok(body) => OutFrame::response(id, ser, body),
        Err(e) => {
            ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
            OutFrame::error(id, ser, &e)
        }
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// Completion bookkeeping of one in-flight call: when dropped (response queued,
/// or the task lost), the connection may read again.
pub(crate) struct InFlightPermit(pub Arc<InFlight>);

impl Drop for InFlightPermit {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
        self.0.changed.notify_one();
    }
}

/// Per-connection count of calls in progress.
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

/// One call handed to the worker pool.
pub(crate) struct PoolJob {
    pub ctx: Arc<ServerCtx>,
    pub route: Route,
    pub req: RpcRequest,
    pub id: u64,
    pub received: Instant,
    pub writer: FrameWriter,
    pub permit: InFlightPermit,
}

impl PoolJob {
    /// Runs on a worker thread.
    fn run(self) {
        let PoolJob {
            ctx,
            route,
            req,
            id,
            received,
            writer,
            permit,
        } = self;
        let expired = req.timeout.is_some_and(|t| received.elapsed() >= t);
        let frame = if expired {
            ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
            let timeout = req.timeout.unwrap_or(Duration::ZERO);
            OutFrame::error(
                id,
                req.serializer.id(),
                &RpcError::Timeout {
                    service: route.service.into(),
                    method: route.method.into(),
                    timeout,
                },
            )
        } else {
            ctx.runtime.block_on(execute(&ctx, &route, req, id))
        };
        // A closed connection is not an error here: the caller is gone.
        let _ = writer.blocking_send(Outbound::frame(frame));
        drop(permit);
    }

    /// Submits to the pool. When the pool is full the job is dropped unrun
    /// (releasing its in-flight permit) and the `ServerBusy` answer for its caller
    /// is returned, to be sent right away.
    pub fn submit(self, pool: &WorkerPool) -> Result<(), OutFrame> {
        let id = self.id;
        let ser = self.req.serializer.id();
        let stats = self.ctx.stats.clone();
        match pool.submit(Box::new(move || self.run())) {
            Ok(()) => Ok(()),
            Err(rejected) => {
                drop(rejected);
                stats.busy_rejections.fetch_add(1, Ordering::Relaxed);
                stats.errors.fetch_add(1, Ordering::Relaxed);
                let s = pool.stats();
                Err(OutFrame::error(
                    id,
                    ser,
                    &RpcError::ServerBusy(format!(
                        "worker pool full ({} threads busy, {} queued)",
                        s.active, s.queued
                    )),
                ))
            }
        }
    }
}
