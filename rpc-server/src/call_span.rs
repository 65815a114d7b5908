//! The `rpc.server` span: one `tracing` span around each call's middleware
//! and handler, on every protocol and dispatch mode (it is opened where
//! every call starts, [`start_call`](crate::dispatch::start_call)).
//!
//! Fields: `rpc.system` (`brisk`), `rpc.service`, `rpc.method`, `net.peer`,
//! `trace_id` (from the call's `traceparent`), and when it ends `rpc.code`,
//! `otel.status_code` and `duration_us`. With the `otel` feature its
//! parent is the caller's span (see `rpc_core::trace`), and calls the
//! handler makes are its children: the handler runs inside it.
//!
//! At `DEBUG` level: when no subscriber wants that level, a call pays one
//! load of the global level filter ([`wanted`]) and runs exactly as without
//! tracing (no span value built, nothing boxed, nothing wrapped).

use std::time::Instant;

use rpc_core::{trace, Context, HandlerFuture};
use tracing::field::{display, Empty};
use tracing::{Instrument, Span};

use crate::router::RouteEntry;

/// Whether any subscriber may want a call span: the global level filter
/// lets `DEBUG` through. Checked before a span is built, because even a
/// disabled span is a value to build and drop (~60 instructions a call).
#[inline]
pub(crate) fn wanted() -> bool {
    tracing::level_enabled!(tracing::Level::DEBUG)
}

/// The span of a call to `route` (disabled when nobody listens).
pub(crate) fn open(route: &RouteEntry, cx: &Context) -> Span {
    let span = tracing::debug_span!(
        "rpc.server",
        otel.kind = "server",
        rpc.system = "brisk",
        rpc.service = route.service,
        rpc.method = route.method,
        net.peer = Empty,
        trace_id = Empty,
        rpc.code = Empty,
        otel.status_code = Empty,
        duration_us = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if let Some(peer) = cx.peer() {
        span.record("net.peer", display(peer));
    }
    if let Some(id) = trace::trace_id(cx.metadata()) {
        span.record("trace_id", id);
    }
    trace::continue_trace(&span, cx.metadata());
    span
}

/// `call`, run inside `span` (an enabled one), which records its outcome.
pub(crate) fn around(span: Span, call: HandlerFuture<'_>) -> HandlerFuture<'_> {
    let started = Instant::now();
    let inner = span.clone();
    Box::pin(
        async move {
            let result = call.await;
            trace::record_outcome(&inner, &result, started);
            result
        }
        .instrument(span),
    )
}
