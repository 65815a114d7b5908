//! OpenTelemetry for brisk's call spans (feature `otel`).
//!
//! Every call runs in a `tracing` span — `rpc.client` on the caller,
//! `rpc.server` around the handler (see `rpc_core::trace`). With this feature
//! those spans carry OpenTelemetry context across the wire in the W3C
//! `traceparent` / `tracestate` metadata, through the global propagator, so a
//! trace follows a request through every service it reaches, nested calls
//! included. Exporting them is `tracing-opentelemetry`'s job: put its layer,
//! with a tracer from any `opentelemetry_sdk` provider, into your subscriber.
//!
//! [`stdout_provider`] is the short way for trying it out; for a collector,
//! build the provider with `opentelemetry-otlp`'s exporter instead and hand it
//! to [`layer`] the same way.
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! let provider = brisk::otel::stdout_provider("checkout");
//! tracing_subscriber::registry()
//!     .with(brisk::otel::layer(&provider))
//!     .init();
//! // … serve and call …
//! let _ = provider.shutdown(); // flushes what is left
//! ```

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetryLayer;
use tracing_subscriber::registry::LookupSpan;

pub use opentelemetry;
pub use opentelemetry_sdk;
pub use tracing_opentelemetry;

/// Makes W3C trace context (`traceparent`, `tracestate`) the global
/// propagator, which brisk reads calls' metadata with and writes it through.
/// [`stdout_provider`] and [`layer`] call it; call it yourself when you
/// build your layer another way.
pub fn propagate_w3c() {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
}

/// A tracer provider that prints every finished span to stdout
/// (`opentelemetry-stdout`), naming the process `service_name`.
pub fn stdout_provider(service_name: &'static str) -> SdkTracerProvider {
    SdkTracerProvider::builder()
        .with_simple_exporter(opentelemetry_stdout::SpanExporter::default())
        .with_resource(Resource::builder().with_service_name(service_name).build())
        .build()
}

/// The `tracing` layer that makes brisk's spans (and yours) OpenTelemetry
/// spans of `provider`, with W3C propagation installed.
pub fn layer<S>(provider: &SdkTracerProvider) -> OpenTelemetryLayer<S, SdkTracer>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    propagate_w3c();
    tracing_opentelemetry::layer().with_tracer(provider.tracer("brisk"))
}
