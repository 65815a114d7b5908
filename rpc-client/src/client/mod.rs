//! [`Client`]: the untyped caller that typed clients are generated on.
//!
//! A call serializes its arguments once, runs through the client interceptors
//! (skipped entirely when there are none), and then the transport attempt loop:
//! choose a server (`Cluster::choose`: the balancer, skipping servers marked
//! down), acquire a connection to it per the connect type, send, wait for the
//! answer. A transport failure (connect refused, connection closed, write
//! failed) or a `ShuttingDown` answer marks that server down. The call is
//! tried again — on another server when there is one, up to `max_try_count`
//! attempts in all — only when the server cannot have run it (the connect
//! failed, the request never left, `ShuttingDown`) or when the method is
//! idempotent (`idempotent_methods`, `CallOptions::idempotent`): a call that
//! may have run is never run twice behind its caller's back. A handler error,
//! a busy answer or a timeout is returned as is. One deadline covers every
//! attempt, resolved as per-call > per-method > default.

use std::collections::HashSet;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rpc_codec::compression::{self, BodyCompressor};
use rpc_codec::{BodyCodec, OutFrame};
use rpc_core::{
    ConnectType, Context, Endpoint, Interceptor, Next, RpcError, RpcRequest, RpcResponse,
    SerializerKind, WriteMode,
};
use rpc_transport::{SendSpec, Started};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;
use tracing::Instrument;

use crate::call_span;
use crate::cluster::{is_server_failure, Cluster, EndpointStats, ServerEndpoint};
use crate::config::PoolHold;
use crate::{CallOptions, ClientConfig};
use rpc_registry::Registry;

struct Inner {
    config: ClientConfig,
    /// `Service` → `method` → timeout, resolved from `method_timeouts_ms`.
    method_timeouts: HashMap<String, HashMap<String, Duration>>,
    /// `idempotent_methods`: `Service.method` and `Service.*` entries.
    idempotent: HashSet<String>,
    cluster: Arc<Cluster>,
    interceptors: Vec<Arc<dyn Interceptor>>,
    /// `compression`, when on: what request bodies are compressed with, and
    /// the algorithm every request asks its answer in.
    compressor: Option<BodyCompressor>,
}

/// A client of one server or of a set of them (a static list or a registry).
/// Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// A builder with the default [`ClientConfig`].
    pub fn builder() -> ClientBuilder {
        ClientBuilder::new()
    }

    /// Calls `service.method` with `args` (a tuple of the method's arguments) and
    /// decodes the result as `R`.
    pub async fn call<A, R>(
        &self,
        service: &'static str,
        method: &'static str,
        args: &A,
        options: &CallOptions,
    ) -> Result<R, RpcError>
    where
        A: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        let serializer = options.serializer.unwrap_or(self.inner.config.serializer);
        let body = serializer.encode_body(args)?;
        let mut timeout = options
            .timeout
            .unwrap_or_else(|| self.timeout_for(service, method));
        if let Some(deadline) = options.deadline {
            timeout = timeout.min(deadline.saturating_duration_since(std::time::Instant::now()));
            if timeout.is_zero() {
                return Err(RpcError::Timeout {
                    service: service.into(),
                    method: method.into(),
                    timeout,
                });
            }
        }
        let settings = CallSettings {
            timeout,
            write_mode: options.write_mode.unwrap_or(self.inner.config.write_mode),
            hash_key: options.hash_key.as_deref(),
            idempotent: options.idempotent,
        };
        // The plain call awaits `send` in place, not through a local shared
        // with the select below: awaiting a local moves its future — most
        // of this one's size — once more per call (`perf`: 1.5 % of the
        // client's CPU at 10:100:1024).
        let response =
            match &options.cancel {
                None => {
                    self.send(service, method, serializer, body, options, &settings)
                        .await?
                }
                Some(parent) if parent.is_cancelled() => {
                    return Err(RpcError::Cancelled(format!(
                        "{service}.{method}: the call it was to be made for was cancelled"
                    )))
                }
                // Dropping the send drops its pending request, which sends the
                // server a `Cancel`. Boxed: the select stays out of the plain
                // call's future.
                Some(parent) => Box::pin(async {
                    tokio::select! {
                        biased;
                        r = self.send(service, method, serializer, body, options, &settings) => r,
                        _ = parent.cancelled() => Err(RpcError::Cancelled(format!(
                            "{service}.{method}: the call it was made for was cancelled"
                        ))),
                    }
                })
                .await?,
            };
        serializer.decode_bytes(&response.body)
    }

    /// Sends a call's serialized arguments: straight to the transport when
    /// there are no client interceptors (no `RpcRequest`, nothing boxed),
    /// through them otherwise.
    async fn send(
        &self,
        service: &'static str,
        method: &'static str,
        serializer: SerializerKind,
        body: bytes::Bytes,
        options: &CallOptions,
        settings: &CallSettings<'_>,
    ) -> Result<RpcResponse, RpcError> {
        if self.inner.interceptors.is_empty() {
            let mut frame = OutFrame::request(0, serializer.id(), service, method, body);
            if !options.metadata.is_empty() {
                frame.metadata = options.metadata.clone();
            }
            return self.invoke(frame, settings).await;
        }
        let req = RpcRequest {
            service: service.into(),
            method: method.into(),
            body,
            cx: Context::new(0, serializer)
                .with_metadata(options.metadata.clone())
                .with_timeout(settings.timeout),
        };
        let endpoint = TransportEndpoint {
            client: self,
            settings: *settings,
        };
        // Boxed: the chain's state stays out of the plain call's future.
        Box::pin(Next::new(&self.inner.interceptors, &endpoint).run(req)).await
    }

    /// Sends an already serialized request through the interceptors and the
    /// transport (what the HTTP gateway and generic tools use).
    pub async fn call_raw(&self, mut req: RpcRequest) -> Result<RpcResponse, RpcError> {
        if req.cx.deadline().is_none() {
            let timeout = self.timeout_for(&req.service, &req.method);
            req.cx
                .set_deadline(std::time::Instant::now().checked_add(timeout));
        }
        let endpoint = TransportEndpoint {
            client: self,
            settings: CallSettings {
                // The chain may change the request's timeout: read at its end.
                timeout: Duration::ZERO,
                write_mode: self.inner.config.write_mode,
                hash_key: None,
                idempotent: None,
            },
        };
        Next::new(&self.inner.interceptors, &endpoint)
            .run(req)
            .await
    }

    /// The timeout a call of `service.method` gets without a per-call override.
    pub fn timeout_for(&self, service: &str, method: &str) -> Duration {
        if self.inner.method_timeouts.is_empty() {
            return self.inner.config.request_timeout;
        }
        self.inner
            .method_timeouts
            .get(service)
            .and_then(|m| m.get(method))
            .copied()
            .unwrap_or(self.inner.config.request_timeout)
    }

    /// Whether `service.method` may run twice: the call's own say, else the
    /// config's `idempotent_methods`.
    fn is_idempotent(&self, service: &str, method: &str, per_call: Option<bool>) -> bool {
        if let Some(idempotent) = per_call {
            return idempotent;
        }
        let set = &self.inner.idempotent;
        !set.is_empty()
            && (set.contains(&format!("{service}.{method}"))
                || set.contains(&format!("{service}.*")))
    }

    /// The transport attempt loop, for one request frame and its whole budget.
    ///
    /// The frame is kept (not cloned) across tries: each try encodes it by
    /// reference under a fresh request id.
    async fn invoke(
        &self,
        mut frame: OutFrame,
        settings: &CallSettings<'_>,
    ) -> Result<RpcResponse, RpcError> {
        let span = match call_span::wanted() {
            true => call_span::open(&frame.service, &frame.method),
            false => tracing::Span::none(),
        };
        if span.is_disabled() {
            return self.tries(frame, settings, &span).await;
        }
        call_span::propagate(&span, &mut frame.metadata);
        let started = std::time::Instant::now();
        // Boxed: the traced path stays out of the plain call's future.
        let result = Box::pin(self.tries(frame, settings, &span).instrument(span.clone())).await;
        rpc_core::trace::record_outcome(&span, &result, started);
        result
    }

    /// The tries of [`invoke`](Self::invoke), each recording its server on
    /// `span` (a no-op when the span is disabled).
    async fn tries(
        &self,
        mut frame: OutFrame,
        settings: &CallSettings<'_>,
        span: &tracing::Span,
    ) -> Result<RpcResponse, RpcError> {
        // Compressed once, before the first try: retries send the same bytes.
        if let Some(compressor) = &self.inner.compressor {
            let (body, used) = compressor.compress(std::mem::take(&mut frame.body));
            frame.body = body;
            frame.flags = compression::flags(used, compressor.algorithm());
        }
        let timeout = settings.timeout;
        let deadline = Instant::now() + timeout;
        let max_tries = self.inner.config.max_try_count.max(1);
        let mut attempt = 1;
        // Servers this call failed on: a retry goes elsewhere when it can.
        let mut failed: Vec<String> = Vec::new();
        loop {
            // The first try has the whole budget (no second clock reading).
            let remaining = if attempt == 1 {
                timeout
            } else {
                deadline.saturating_duration_since(Instant::now())
            };
            let timed_out = |frame: &OutFrame| RpcError::Timeout {
                service: frame.service.to_string(),
                method: frame.method.to_string(),
                timeout,
            };
            if remaining.is_zero() {
                return Err(timed_out(&frame));
            }
            let endpoint = self
                .inner
                .cluster
                .choose(&frame.service, settings.hash_key, &failed)?;
            span.record("net.peer", endpoint.addr());
            let result = {
                let _in_flight = endpoint.begin();
                let spec = SendSpec {
                    mode: settings.write_mode,
                    deadline,
                    timeout: remaining,
                };
                self.attempt(&endpoint, &mut frame, spec).await
            };
            match &result {
                Ok(_) => endpoint.mark_up(),
                Err(e) if is_server_failure(e) => {
                    endpoint.mark_down(self.inner.config.down_backoff);
                    failed.push(endpoint.addr().to_owned());
                }
                Err(_) => {}
            }
            match result {
                Err(e)
                    if attempt < max_tries
                        && (e.server_did_not_run()
                            || (e.is_transport()
                                && self.is_idempotent(
                                    &frame.service,
                                    &frame.method,
                                    settings.idempotent,
                                ))) =>
                {
                    tracing::debug!(attempt, server = endpoint.addr(), error = %e, "server failure; retrying");
                    attempt += 1;
                }
                // Report the call's whole budget, not what was left for this try.
                Err(RpcError::Timeout { .. }) => return Err(timed_out(&frame)),
                other => return other,
            }
        }
    }

    /// One try on one server: acquire a connection, send, wait for the answer.
    async fn attempt(
        &self,
        endpoint: &ServerEndpoint,
        frame: &mut OutFrame,
        spec: SendSpec,
    ) -> Result<RpcResponse, RpcError> {
        // An open shared connection is taken without arming a timer.
        let lease = match endpoint.connections().ready() {
            Some(lease) => lease,
            // Boxed: connecting (TCP, TLS) is a large future that would
            // otherwise sit in every call's state.
            None => Box::pin(tokio::time::timeout_at(
                spec.deadline,
                endpoint.connections().acquire(),
            ))
            .await
            .map_err(|_| RpcError::Timeout {
                service: frame.service.to_string(),
                method: frame.method.to_string(),
                timeout: spec.timeout,
            })??,
        };
        // Registered and queued without awaiting in the usual case, so this
        // future holds no send state (see `Connection::start`).
        let answer = match lease.into_parts() {
            // A shared connection: sent and answered in one future.
            (conn, None) => conn.call(frame, spec).await?,
            (conn, Some(pooled)) => {
                let pending = match conn.start(frame, spec)? {
                    Started::Sent(call) => call,
                    Started::Waiting(call, wait) => {
                        wait.await?;
                        call
                    }
                };
                // A pooled connection goes back to its pool once the
                // request is written, or once it is answered.
                let held =
                    (self.inner.config.connect.hold() == PoolHold::Response).then_some(pooled);
                let answer = pending.response().await?;
                drop(held);
                answer
            }
        };
        match answer.error_status() {
            None => Ok(RpcResponse {
                body: compression::open_body(
                    answer.header.flags,
                    answer.body,
                    self.inner.config.transport.max_frame_size,
                )?,
                metadata: answer.meta.metadata,
            }),
            Some(status) => Err(status.into_error(&frame.service, &frame.method)),
        }
    }

    /// The client interceptors, in order.
    pub(crate) fn interceptors(&self) -> &[Arc<dyn Interceptor>] {
        &self.inner.interceptors
    }

    /// The servers this client calls.
    pub(crate) fn cluster(&self) -> &Cluster {
        &self.inner.cluster
    }

    /// The effective configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The connect type in use.
    pub fn connect_type(&self) -> ConnectType {
        self.inner.config.connect.connect_type()
    }

    /// Connections currently open to the servers.
    pub fn open_connections(&self) -> usize {
        self.inner.cluster.open_count()
    }

    /// The servers this client knows, with their counters.
    pub fn endpoints(&self) -> Vec<EndpointStats> {
        self.inner.cluster.stats()
    }

    /// The registry the servers come from (a static list unless configured).
    ///
    /// A client built from addresses calls those addresses for good: its
    /// registry is a static list of them, and what is registered into it
    /// later is not followed (share a [`StaticRegistry`](rpc_registry::StaticRegistry) through
    /// [`ClientBuilder::registry`] for that).
    pub fn registry(&self) -> &Arc<dyn Registry> {
        self.inner.cluster.registry()
    }

    /// Closes this client's connections (a reused connection closes with its
    /// last client). Calls made afterwards reconnect.
    pub fn close(&self) {
        self.inner.cluster.close();
    }
}

/// How one call goes to the transport, beside its frame (which carries the
/// names, serializer, metadata and body): resolved once from the
/// [`CallOptions`] and the config, carried unchanged through every attempt.
#[derive(Clone, Copy)]
struct CallSettings<'a> {
    /// The whole call's budget, every attempt included.
    timeout: Duration,
    write_mode: WriteMode,
    /// The `consistent_hash` balancer's key.
    hash_key: Option<&'a str>,
    /// `CallOptions::idempotent`: beats the config's `idempotent_methods`.
    idempotent: Option<bool>,
}

/// The end of the client interceptor chain: the transport.
struct TransportEndpoint<'a> {
    client: &'a Client,
    settings: CallSettings<'a>,
}

#[async_trait]
impl Endpoint for TransportEndpoint<'_> {
    async fn call(&self, mut req: RpcRequest) -> Result<RpcResponse, RpcError> {
        let settings = CallSettings {
            timeout: req
                .cx
                .remaining()
                .unwrap_or(self.client.inner.config.request_timeout),
            ..self.settings
        };
        let serializer = req.serializer().id();
        let frame = OutFrame {
            metadata: std::mem::take(req.cx.metadata_mut()),
            ..OutFrame::request(0, serializer, req.service, req.method, req.body)
        };
        self.client.invoke(frame, &settings).await
    }
}

mod builder;

pub use builder::ClientBuilder;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn from_file() -> ClientConfig {
        ClientConfig {
            addr: "127.0.0.1:1".into(),
            max_try_count: 5,
            lazy_connect: true,
            ..ClientConfig::default()
        }
    }

    /// `config()` is the base whether it comes first or last: the settings
    /// given beside it win, the base's other values stay.
    #[tokio::test]
    async fn settings_beat_the_base_config_whether_given_before_or_after_it() {
        let before = Client::builder()
            .request_timeout(Duration::from_millis(700))
            .method_timeout("Calc", "add", Duration::from_millis(50))
            .config(from_file())
            .build()
            .await
            .expect("a lazy client builds without a server");
        let after = Client::builder()
            .config(from_file())
            .request_timeout(Duration::from_millis(700))
            .method_timeout("Calc", "add", Duration::from_millis(50))
            .build()
            .await
            .expect("a lazy client builds without a server");
        for client in [&before, &after] {
            assert_eq!(client.config().request_timeout, Duration::from_millis(700));
            assert_eq!(client.config().max_try_count, 5, "the base's value stays");
            assert_eq!(client.timeout_for("Calc", "add"), Duration::from_millis(50));
        }
    }
}
