//! Tracing a call across processes: the W3C trace context a call carries
//! in its metadata (`traceparent`, `tracestate`), read into the `tracing`
//! spans brisk opens for every call (`rpc.client` on the caller,
//! `rpc.server` around the handler) and written from them.
//!
//! Without the `otel` feature brisk only forwards the context: a call made
//! from a handler with `CallOptions::from(&cx)` carries its caller's
//! `traceparent` on, and both spans record its `trace_id`, so the logs of one
//! request can be joined across services. With `otel`, the spans are
//! OpenTelemetry spans (through `tracing-opentelemetry`): a server span's
//! parent is the caller's span named in `traceparent`, and a client span
//! writes its own context into the request, through the global propagator
//! (`opentelemetry::global::set_text_map_propagator`), so every hop is a
//! child of the one before.
//!
//! Both spans are at `DEBUG` level: under the usual `info` filter they are
//! never built, and a call pays one check of the filter for each.

use crate::Metadata;

/// The W3C `traceparent` metadata key.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C `tracestate` metadata key.
pub const TRACESTATE: &str = "tracestate";

/// The trace id (32 lowercase hex digits) of a well-formed `traceparent`
/// in `metadata` (`00-<trace id>-<parent id>-<flags>`); `None` when there is
/// none, or it is malformed or the all-zero (invalid) id.
///
/// ```
/// use rpc_core::{trace, Metadata};
/// let mut m = Metadata::new();
/// m.insert("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
/// assert_eq!(trace::trace_id(&m), Some("0af7651916cd43dd8448eb211c80319c"));
/// ```
pub fn trace_id(metadata: &Metadata) -> Option<&str> {
    let value = metadata.get(TRACEPARENT)?;
    let mut parts = value.split('-');
    let version = parts.next()?;
    let trace = parts.next()?;
    let parent = parts.next()?;
    let flags = parts.next()?;
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let valid = hex(version, 2)
        && version != "ff"
        && hex(trace, 32)
        && hex(parent, 16)
        && hex(flags, 2)
        && trace.bytes().any(|b| b != b'0')
        && parent.bytes().any(|b| b != b'0');
    valid.then_some(trace)
}

/// Makes `span` continue the trace named in `metadata` (feature `otel`:
/// its OpenTelemetry parent is the remote span; without it, nothing).
pub fn continue_trace(span: &tracing::Span, metadata: &Metadata) {
    #[cfg(feature = "otel")]
    otel::continue_trace(span, metadata);
    #[cfg(not(feature = "otel"))]
    let _ = (span, metadata);
}

/// Writes `span`'s trace context into `metadata` (feature `otel`, through
/// the global propagator; without it, nothing: metadata passed on stays).
pub fn propagate(span: &tracing::Span, metadata: &mut Metadata) {
    #[cfg(feature = "otel")]
    otel::propagate(span, metadata);
    #[cfg(not(feature = "otel"))]
    let _ = (span, metadata);
}

/// Records how a call ended on its span (opened with the empty fields
/// `rpc.code`, `otel.status_code` and `duration_us`): the status table's
/// code name, `error` for OpenTelemetry when it failed, and its duration.
pub fn record_outcome<T>(
    span: &tracing::Span,
    result: &Result<T, crate::RpcError>,
    started: std::time::Instant,
) {
    let code = match result {
        Ok(_) => crate::Code::Ok,
        Err(e) => e.code(),
    };
    record_code(span, code, started);
}

/// [`record_outcome`] for an end known by its code (a stream's).
pub fn record_code(span: &tracing::Span, code: crate::Code, started: std::time::Instant) {
    span.record("rpc.code", code.name());
    if code != crate::Code::Ok {
        span.record("otel.status_code", "error");
    }
    span.record("duration_us", started.elapsed().as_micros() as u64);
}

#[cfg(feature = "otel")]
mod otel {
    use opentelemetry::propagation::{Extractor, Injector};
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    use crate::Metadata;

    struct Reader<'a>(&'a Metadata);

    impl Extractor for Reader<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.0.get(key)
        }

        fn keys(&self) -> Vec<&str> {
            self.0.iter().map(|(k, _)| k).collect()
        }
    }

    struct Writer<'a>(&'a mut Metadata);

    impl Injector for Writer<'_> {
        fn set(&mut self, key: &str, value: String) {
            self.0.insert(key, value);
        }
    }

    pub(super) fn continue_trace(span: &tracing::Span, metadata: &Metadata) {
        if metadata.get(super::TRACEPARENT).is_none() {
            return;
        }
        let parent =
            opentelemetry::global::get_text_map_propagator(|p| p.extract(&Reader(metadata)));
        // Fails only when the span is already closed or has no OpenTelemetry layer.
        let _ = span.set_parent(parent);
    }

    pub(super) fn propagate(span: &tracing::Span, metadata: &mut Metadata) {
        let context = span.context();
        opentelemetry::global::get_text_map_propagator(|p| {
            p.inject_context(&context, &mut Writer(metadata))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_ids_of_well_and_badly_formed_traceparents() {
        let id = |v: &str| {
            let mut m = Metadata::new();
            m.insert(TRACEPARENT, v);
            trace_id(&m).map(str::to_owned)
        };
        assert_eq!(
            id("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_eq!(
            id("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"),
            None
        );
        assert_eq!(
            id("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
            None
        );
        assert_eq!(
            id("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            None
        );
        assert_eq!(
            id("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"),
            None
        );
        assert_eq!(
            id("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            None
        );
        assert_eq!(id("garbage"), None);
        assert_eq!(trace_id(&Metadata::new()), None);
    }
}
