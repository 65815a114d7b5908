//! The `rpc.client` span: one `tracing` span per call, around every try
//! (opened in `Client::invoke`, where the typed, the untyped and the
//! interceptor paths meet).
//!
//! Fields: `rpc.system` (`brisk`), `rpc.service`, `rpc.method`, `net.peer`
//! (the server of the last try), `trace_id` (of the `traceparent` the request
//! carries), and when it ends `rpc.code`, `otel.status_code` and
//! `duration_us`. With the `otel` feature the span writes its own context
//! into the request's `traceparent` (see `rpc_core::trace`), so the server's
//! span is its child.
//!
//! At `DEBUG` level: when no subscriber wants that level, a call pays one
//! load of the global level filter ([`wanted`]) and nothing else.

use rpc_core::{trace, Metadata};
use tracing::field::Empty;
use tracing::Span;

/// Whether any subscriber may want a call span: the global level filter
/// lets `DEBUG` through (checked before a span value is built).
#[inline]
pub(crate) fn wanted() -> bool {
    tracing::level_enabled!(tracing::Level::DEBUG)
}

/// The span of a call to `service.method` (disabled when nobody listens).
pub(crate) fn open(service: &str, method: &str) -> Span {
    tracing::debug_span!(
        "rpc.client",
        otel.kind = "client",
        rpc.system = "brisk",
        rpc.service = service,
        rpc.method = method,
        net.peer = Empty,
        trace_id = Empty,
        rpc.code = Empty,
        otel.status_code = Empty,
        duration_us = Empty,
    )
}

/// Writes the span's trace context into the request's metadata (feature
/// `otel`) and records the trace id the request carries.
pub(crate) fn propagate(span: &Span, metadata: &mut Metadata) {
    trace::propagate(span, metadata);
    if let Some(id) = trace::trace_id(metadata) {
        span.record("trace_id", id);
    }
}
