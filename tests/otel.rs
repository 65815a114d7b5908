//! With the `otel` feature, brisk's spans are OpenTelemetry spans whose
//! context crosses the wire: a client span, the server span it caused, the
//! nested call the handler made and that call's server span form one trace,
//! each the parent of the next — checked on the spans the SDK exports.
#![cfg(feature = "otel")]

mod common;
mod tracing_support;

use std::time::Duration;

use brisk::otel::opentelemetry::trace::{SpanId, TraceId};
use brisk::otel::opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use brisk::Dispatch;
use common::*;
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

fn method_of(span: &SpanData) -> String {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == "rpc.method")
        .map(|kv| kv.value.to_string())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_across_the_call_and_its_nested_call() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(brisk::otel::layer(&provider))
        .with(tracing_subscriber::filter::LevelFilter::DEBUG);
    tracing::subscriber::set_global_default(subscriber).expect("one subscriber");

    bounded(30, async {
        for dispatch in [Dispatch::Direct, Dispatch::Pool] {
            exporter.reset();
            let (server, relay) = tracing_support::start(dispatch).await;
            let sum = relay
                .relay(20, 22)
                .instrument(tracing::info_span!("request"))
                .await
                .unwrap();
            assert_eq!(sum, 42);
            let finished = || exporter.get_finished_spans().unwrap_or_default();
            assert!(
                wait_until(Duration::from_secs(5), || finished().len() >= 5).await,
                "{dispatch}: {:#?}",
                finished()
            );
            let spans = finished();
            let find = |name: &str, method: &str| -> SpanData {
                spans
                    .iter()
                    .find(|s| s.name == name && method_of(s) == method)
                    .cloned()
                    .unwrap_or_else(|| panic!("{dispatch}: no {name} {method} in {spans:#?}"))
            };
            let root = spans.iter().find(|s| s.name == "request").unwrap().clone();
            let chain = [
                root,
                find("rpc.client", "relay"),
                find("rpc.server", "relay"),
                find("rpc.client", "add"),
                find("rpc.server", "add"),
            ];
            let trace: TraceId = chain[0].span_context.trace_id();
            assert_eq!(chain[0].parent_span_id, SpanId::INVALID);
            for pair in chain.windows(2) {
                let (parent, child) = (&pair[0], &pair[1]);
                assert_eq!(
                    child.span_context.trace_id(),
                    trace,
                    "{dispatch}: {child:#?}"
                );
                assert_eq!(
                    child.parent_span_id,
                    parent.span_context.span_id(),
                    "{dispatch}: {} {} is not the child of {} {}",
                    child.name,
                    method_of(child),
                    parent.name,
                    method_of(parent)
                );
            }
            // The server spans know their parent came over the wire.
            assert!(chain[2].parent_span_is_remote, "{dispatch}");
            assert!(chain[4].parent_span_is_remote, "{dispatch}");
            server.shutdown().await;
        }
    })
    .await;
    let _ = provider.shutdown();
}
