//! Running one streaming call: interceptors, the handler, its deadline, and
//! the one end its caller reads.
//!
//! A stream runs as a future on its connection's task (see the module
//! above), whatever the dispatch mode, and on a task of its own when the
//! HTTP gateway serves it. A stream may last for hours and spends most of
//! its life waiting — for credit, for its caller's next item, for the
//! events it forwards — which is what futures are for; a worker-pool
//! thread held per open stream would let a hundred watches take every
//! worker and starve the unary calls. A handler that must block should do
//! so in `tokio::task::spawn_blocking`.
//!
//! # Exactly one end
//!
//! The call's [`CancelSignal`](rpc_core::CancelSignal) decides, as for unary
//! calls: the handler's own end claims it with `finish`, the deadline with
//! `give_up` (then the caller reads `DeadlineExceeded`), and a caller's
//! `Cancel` or a closed connection gives up first (then nothing is sent:
//! nobody reads it). Only the winner's end goes out, after every item the
//! handler sent before it (they share one queue).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use futures::FutureExt;
use parking_lot::Mutex;
use rpc_core::stream::StreamPeer;
use rpc_core::{Code, Endpoint, Next, RpcError, RpcRequest, RpcResponse, Status, StreamIo};
use tracing::Instrument;

use crate::ctx::ServerCtx;
use crate::panic::panic_message;
use crate::router::RouteEntry;

/// The end of the interceptor chain for a stream: runs the handler with the
/// call's flows (an interceptor that refuses the call never gets there).
struct StreamEndpoint<'a> {
    route: &'a RouteEntry,
    io: Mutex<Option<StreamIo>>,
}

#[async_trait]
impl Endpoint for StreamEndpoint<'_> {
    async fn call(&self, req: RpcRequest) -> Result<RpcResponse, RpcError> {
        let Some(io) = self.io.lock().take() else {
            return Err(RpcError::Handler(
                "an interceptor ran a stream's handler twice".into(),
            ));
        };
        let route = self.route;
        match route
            .handler
            .stream(route.index, req.cx, req.body, io)
            .await
        {
            Ok(()) => Ok(RpcResponse::default()),
            Err(status) => Err(RpcError::Status(status)),
        }
    }
}

/// The status a stream's caller reads for `err`.
fn status_of(err: RpcError) -> Status {
    match err {
        RpcError::Status(status) => status,
        other => Status::from(&other),
    }
}

/// Runs `req` as a stream on `route`, its items going out through `peer`
/// as stream `id`'s; returns once the call has ended, its end sent (or not:
/// see the module docs).
pub(crate) async fn run_stream(
    ctx: Arc<ServerCtx>,
    route: Arc<RouteEntry>,
    req: RpcRequest,
    io: StreamIo,
    peer: Arc<dyn StreamPeer>,
    serializer: u8,
) {
    let id = req.cx.request_id();
    let cancel = req.cx.cancellation().clone();
    let deadline = req.cx.deadline();
    let started = Instant::now();
    // The stream's `rpc.server` span: the handler runs inside it.
    let span = match crate::call_span::wanted() {
        true => crate::call_span::open(&route, &req.cx),
        false => tracing::Span::none(),
    };
    let work = async {
        if ctx.interceptors.is_empty() {
            route
                .handler
                .stream(route.index, req.cx, req.body, io)
                .await
        } else {
            let endpoint = StreamEndpoint {
                route: &route,
                io: Mutex::new(Some(io)),
            };
            Next::new(&ctx.interceptors, &endpoint)
                .run(req)
                .await
                .map(|_| ())
                .map_err(status_of)
        }
    }
    .instrument(span.clone());
    let expiry = async {
        match deadline {
            Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
            None => std::future::pending().await,
        }
    };
    let end = tokio::select! {
        biased;
        outcome = AssertUnwindSafe(work).catch_unwind() => {
            let end = outcome.unwrap_or_else(|panic| Err(Status::new(
                Code::Handler,
                format!("handler {}.{} panicked: {}", route.service, route.method,
                    panic_message(panic.as_ref())),
            )));
            cancel.finish().then_some(end)
        }
        _ = cancel.given_up() => None,
        _ = expiry => cancel.give_up().then(|| Err(Status::new(
            Code::DeadlineExceeded,
            format!("{}.{}: the stream's deadline passed", route.service, route.method),
        ))),
    };
    let code = match &end {
        Some(Ok(())) => Code::Ok,
        Some(Err(status)) => status.code(),
        None => Code::Cancelled,
    };
    rpc_core::trace::record_code(&span, code, started);
    match end {
        Some(end) => {
            route.metrics.record(started.elapsed(), end.is_ok());
            if end.is_err() {
                ctx.stats
                    .errors
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            peer.send_end(id, serializer, end);
        }
        None => route.metrics.record_cancelled(),
    }
}
