//! The `rpc.client` and `rpc.server` spans every call runs in (without the
//! `otel` feature): what they record, and that a trace id a caller sets in
//! `traceparent` is seen by the handler's span, by the nested call the
//! handler makes and by that call's server span — on both dispatch modes.

mod common;
mod tracing_support;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use brisk::{CallOptions, Dispatch};
use common::*;
use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// A closed span: its name and fields.
#[derive(Debug, Clone, Default)]
struct Recorded {
    name: String,
    fields: HashMap<String, String>,
}

impl Recorded {
    fn get(&self, field: &str) -> Option<&str> {
        self.fields.get(field).map(String::as_str)
    }
}

impl Visit for Recorded {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.fields
            .insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields
            .insert(field.name().to_owned(), value.to_owned());
    }
}

/// Records every span, with its fields, when it closes.
struct Capture(Arc<Mutex<Vec<Recorded>>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: LayerContext<'_, S>) {
        let mut recorded = Recorded {
            name: attrs.metadata().name().to_owned(),
            ..Recorded::default()
        };
        attrs.record(&mut recorded);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(recorded);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: LayerContext<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(recorded) = span.extensions_mut().get_mut::<Recorded>() {
                values.record(recorded);
            }
        }
    }

    fn on_close(&self, id: Id, ctx: LayerContext<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            if let Some(recorded) = span.extensions_mut().remove::<Recorded>() {
                self.0.lock().push(recorded);
            }
        }
    }
}

/// The spans closed so far (one global subscriber for the whole file: the
/// servers' tasks and worker threads must see it).
fn spans() -> &'static Arc<Mutex<Vec<Recorded>>> {
    static SPANS: OnceLock<Arc<Mutex<Vec<Recorded>>>> = OnceLock::new();
    SPANS.get_or_init(|| {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(
            Capture(spans.clone()).with_filter(tracing_subscriber::filter::LevelFilter::DEBUG),
        );
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
        spans
    })
}

/// The closed spans of `trace`, once there are `n` of them (bounded wait:
/// a server span closes just after its answer is written).
async fn spans_of(trace: &str, n: usize) -> Vec<Recorded> {
    let of = || -> Vec<Recorded> {
        spans()
            .lock()
            .iter()
            .filter(|s| s.get("trace_id") == Some(trace))
            .cloned()
            .collect()
    };
    wait_until(Duration::from_secs(5), || of().len() >= n).await;
    of()
}

fn find<'a>(spans: &'a [Recorded], name: &str, method: &str) -> &'a Recorded {
    spans
        .iter()
        .find(|s| s.name == name && s.get("rpc.method") == Some(method))
        .unwrap_or_else(|| panic!("no {name} span of {method} in {spans:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_trace_id_reaches_the_handler_and_its_nested_call() {
    spans();
    bounded(30, async {
        for (n, dispatch) in [Dispatch::Direct, Dispatch::Pool].into_iter().enumerate() {
            let (server, relay) = tracing_support::start(dispatch).await;
            let trace = format!("4bf92f3577b34da6a3ce929d0e0e473{n}");
            let options = CallOptions::default()
                .with_metadata("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"));
            assert_eq!(relay.with_options(options).relay(20, 22).await.unwrap(), 42);

            let spans = spans_of(&trace, 4).await;
            let outer_client = find(&spans, "rpc.client", "relay");
            let outer_server = find(&spans, "rpc.server", "relay");
            let nested_client = find(&spans, "rpc.client", "add");
            let nested_server = find(&spans, "rpc.server", "add");
            let addr = server.local_addr().to_string();
            for span in [outer_client, outer_server, nested_client, nested_server] {
                assert_eq!(
                    span.get("rpc.system"),
                    Some("brisk"),
                    "{dispatch}: {span:?}"
                );
                assert_eq!(span.get("rpc.code"), Some("ok"), "{dispatch}: {span:?}");
                assert!(span.get("otel.status_code").is_none(), "{span:?}");
                assert!(span.get("duration_us").is_some(), "{span:?}");
            }
            assert_eq!(outer_client.get("rpc.service"), Some("Relay"));
            assert_eq!(nested_server.get("rpc.service"), Some("Calc"));
            assert_eq!(outer_client.get("net.peer"), Some(addr.as_str()));
            assert!(outer_server
                .get("net.peer")
                .is_some_and(|p| p.starts_with("127.0.0.1:")));
            assert_eq!(outer_client.get("otel.kind"), Some("client"));
            assert_eq!(outer_server.get("otel.kind"), Some("server"));
            server.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_call_is_recorded_with_its_code() {
    spans();
    bounded(30, async {
        let (server, _) = start(server_config(Dispatch::Direct, brisk::QueueKind::Transfer)).await;
        let calc = CalcClient::new(
            brisk::Client::builder()
                .addr(server.local_addr())
                .build()
                .await
                .unwrap(),
        );
        let trace = "0af7651916cd43dd8448eb211c80319c";
        let options = CallOptions::default()
            .with_metadata("traceparent", format!("00-{trace}-b7ad6b7169203331-01"));
        calc.with_options(options)
            .fail("no".into())
            .await
            .unwrap_err();
        let spans = spans_of(trace, 2).await;
        for name in ["rpc.client", "rpc.server"] {
            let span = find(&spans, name, "fail");
            assert_eq!(span.get("rpc.code"), Some("handler"), "{span:?}");
            assert_eq!(span.get("otel.status_code"), Some("error"), "{span:?}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_runs_in_a_server_span_of_its_callers_trace() {
    use futures::StreamExt;
    spans();
    bounded(30, async {
        let (server, relay) = tracing_support::start(Dispatch::Pool).await;
        let trace = "5bf92f3577b34da6a3ce929d0e0e4736";
        let options = CallOptions::default()
            .with_metadata("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"));
        let items: Vec<u64> = relay
            .with_options(options)
            .count(5)
            .await
            .unwrap()
            .map(|item| item.unwrap())
            .collect()
            .await;
        assert_eq!(items, vec![0, 1, 2, 3, 4]);
        let spans = spans_of(trace, 1).await;
        let span = find(&spans, "rpc.server", "count");
        assert_eq!(span.get("rpc.code"), Some("ok"), "{span:?}");
        assert_eq!(span.get("rpc.service"), Some("Relay"));
        server.shutdown().await;
    })
    .await;
}
