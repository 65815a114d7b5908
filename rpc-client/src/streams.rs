//! Streaming calls from a [`Client`]: open a stream on a server the
//! balancer chooses, then read the server's items, send the caller's, or
//! both.
//!
//! A stream is opened once, on one connection, and never retried: items
//! already exchanged cannot be replayed. Its deadline is the call's timeout
//! when one is set ([`CallOptions::timeout`] or [`CallOptions::deadline`]);
//! without one a stream runs until either side ends it — unlike unary calls,
//! it does not get `request_timeout`, because a watch is meant to last. A
//! pooled connection is held by the stream for its whole life.
//!
//! The client's interceptors run around a stream's open, as if it were a
//! call whose answer is empty: they see and may change its names, metadata
//! and arguments (an auth interceptor adds its token), and may refuse it;
//! the items that follow do not pass through them. Metadata, the
//! serializer, the deadline and a parent's
//! cancellation (`CallOptions::cancel`: the stream ends `Cancelled` and the
//! server's handler is dropped) of [`CallOptions`] do apply.

use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use rpc_codec::{BodyCodec, OutFrame, StreamSender, Streaming};
use rpc_core::{
    Context, Endpoint, Next, RpcError, RpcRequest, RpcResponse, SerializerKind, Status,
};
use rpc_transport::{OpenStream, StreamSpec};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{CallOptions, Client};
use futures_core::Stream;

impl Client {
    /// Opens `service.method` as a stream with `args` (the arguments beside
    /// the stream, a tuple): the server's items and, with `client_streams`,
    /// the sink for the caller's. The typed methods below are built on it.
    pub async fn open_stream<A: Serialize + ?Sized>(
        &self,
        service: &'static str,
        method: &'static str,
        args: &A,
        client_streams: bool,
        options: &CallOptions,
    ) -> Result<(OpenStream, SerializerKind), RpcError> {
        if options.cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
            return Err(RpcError::Cancelled(format!(
                "{service}.{method}: the call it was to be made for was cancelled"
            )));
        }
        let serializer = options.serializer.unwrap_or(self.config().serializer);
        let body = serializer.encode_body(args)?;
        let mut timeout = options.timeout;
        if let Some(deadline) = options.deadline {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            timeout = Some(timeout.map_or(left, |t| t.min(left)));
        }
        if timeout.is_some_and(|t| t.is_zero()) {
            return Err(RpcError::Timeout {
                service: service.into(),
                method: method.into(),
                timeout: std::time::Duration::ZERO,
            });
        }
        let mut frame = OutFrame::stream_open(serializer.id(), service, method, body);
        frame.metadata = options.metadata.clone();
        let open = if self.interceptors().is_empty() {
            self.open_on_transport(frame, client_streams, timeout, options)
                .await?
        } else {
            // The interceptors see the open as a call (its names, metadata
            // and arguments: an auth interceptor adds its token); the
            // stream itself comes back beside the chain's (empty) answer.
            let req = RpcRequest {
                service: service.into(),
                method: method.into(),
                body: frame.body.clone(),
                cx: Context::new(0, serializer)
                    .with_metadata(std::mem::take(&mut frame.metadata))
                    .with_deadline(timeout.and_then(|t| std::time::Instant::now().checked_add(t))),
            };
            let endpoint = OpenEndpoint {
                client: self,
                client_streams,
                options,
                opened: Mutex::new(None),
            };
            Next::new(self.interceptors(), &endpoint).run(req).await?;
            let opened = endpoint.opened.lock().take();
            opened.ok_or_else(|| {
                RpcError::Handler(format!(
                    "{service}.{method}: an interceptor answered the stream's open itself"
                ))
            })?
        };
        Ok((open, serializer))
    }

    /// Opens the stream `frame` describes on a server the balancer chooses.
    async fn open_on_transport(
        &self,
        mut frame: OutFrame,
        client_streams: bool,
        timeout: Option<Duration>,
        options: &CallOptions,
    ) -> Result<OpenStream, RpcError> {
        let endpoint = self
            .cluster()
            .choose(&frame.service, options.hash_key.as_deref(), &[])?;
        let connect_timeout = self.config().connect_timeout;
        let lease = match endpoint.connections().ready() {
            Some(lease) => lease,
            None => tokio::time::timeout(connect_timeout, endpoint.connections().acquire())
                .await
                .map_err(|_| RpcError::ConnectTimeout {
                    addr: endpoint.addr().to_owned(),
                    timeout: connect_timeout,
                })??,
        };
        let spec = StreamSpec {
            window: self.config().stream_window,
            client_streams,
            timeout,
        };
        let OpenStream { items, sink } = match lease.connection().open_stream(&mut frame, spec) {
            Ok(open) => open,
            Err(e) => {
                if crate::cluster::is_server_failure(&e) {
                    endpoint.mark_down(self.config().down_backoff);
                }
                return Err(e);
            }
        };
        // The connection (a pooled one's lease) lives as long as the stream.
        let mut items = items.hold(lease);
        if let Some(parent) = options.cancel.clone() {
            items = items.until(async move { parent.cancelled().await });
        }
        Ok(OpenStream { items, sink })
    }

    /// A server stream: `args` go out when it opens, the server's items come back.
    pub async fn server_stream<A, R>(
        &self,
        service: &'static str,
        method: &'static str,
        args: &A,
        options: &CallOptions,
    ) -> Result<Streaming<R>, RpcError>
    where
        A: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        let (open, serializer) = self
            .open_stream(service, method, args, false, options)
            .await?;
        Ok(Streaming::new(open.items, serializer))
    }

    /// A bidirectional stream with a sender: items sent through it reach the
    /// handler in order, its items come back through the `Streaming`.
    /// Dropping the sender ends the caller's flow; dropping the `Streaming`
    /// cancels the call.
    pub async fn bidi<A, T, R>(
        &self,
        service: &'static str,
        method: &'static str,
        args: &A,
        options: &CallOptions,
    ) -> Result<(StreamSender<T>, Streaming<R>), RpcError>
    where
        A: Serialize + ?Sized,
        T: Serialize,
        R: DeserializeOwned,
    {
        let (open, serializer) = self
            .open_stream(service, method, args, true, options)
            .await?;
        let sender = sender_of(open.sink, serializer)?;
        Ok((sender, Streaming::new(open.items, serializer)))
    }

    /// A bidirectional stream fed from `items`: a task sends them as credit
    /// allows, until they end or the call does.
    pub async fn bidi_stream<A, S, R>(
        &self,
        service: &'static str,
        method: &'static str,
        args: &A,
        items: S,
        options: &CallOptions,
    ) -> Result<Streaming<R>, RpcError>
    where
        A: Serialize + ?Sized,
        S: Stream + Send + 'static,
        S::Item: Serialize + Send,
        R: DeserializeOwned,
    {
        let (sender, answers) = self.bidi(service, method, args, options).await?;
        tokio::spawn(pump(sender, items));
        Ok(answers)
    }

    /// A client stream: `items` go out as credit allows, and the server's one
    /// answer comes back. The server may answer before reading them all
    /// (an error, say); the rest are not sent.
    pub async fn client_stream<A, S, R>(
        &self,
        service: &'static str,
        method: &'static str,
        args: &A,
        items: S,
        options: &CallOptions,
    ) -> Result<R, RpcError>
    where
        A: Serialize + ?Sized,
        S: Stream + Send + 'static,
        S::Item: Serialize + Send,
        R: DeserializeOwned,
    {
        let (sender, mut answers) = self.bidi(service, method, args, options).await?;
        let pump = pump(sender, items);
        let mut pump = std::pin::pin!(pump);
        let mut pumped = false;
        let first = loop {
            tokio::select! {
                answer = answers.message() => break answer,
                _ = &mut pump, if !pumped => pumped = true,
            }
        };
        let failed = |status: Status| status.into_error(service, method);
        match first.map_err(failed)? {
            Some(answer) => match answers.message().await.map_err(failed)? {
                None => Ok(answer),
                Some(_) => Err(RpcError::Protocol(format!(
                    "{service}.{method}: a client stream answered more than once"
                ))),
            },
            None => Err(RpcError::Protocol(format!(
                "{service}.{method}: the stream ended without an answer"
            ))),
        }
    }
}

/// The end of the client interceptor chain for a stream's open: opens it
/// with the request as the chain left it, and keeps the stream for the caller.
struct OpenEndpoint<'a> {
    client: &'a Client,
    client_streams: bool,
    options: &'a CallOptions,
    opened: Mutex<Option<OpenStream>>,
}

#[async_trait]
impl Endpoint for OpenEndpoint<'_> {
    async fn call(&self, mut req: RpcRequest) -> Result<RpcResponse, RpcError> {
        let timeout = req.cx.remaining();
        let mut frame = OutFrame {
            metadata: std::mem::take(req.cx.metadata_mut()),
            ..OutFrame::stream_open(req.serializer().id(), req.service, req.method, req.body)
        };
        // Feature `otel`: the server's stream span continues the caller's trace.
        rpc_core::trace::propagate(&tracing::Span::current(), &mut frame.metadata);
        let open = self
            .client
            .open_on_transport(frame, self.client_streams, timeout, self.options)
            .await?;
        *self.opened.lock() = Some(open);
        Ok(RpcResponse::default())
    }
}

fn sender_of<T: Serialize>(
    sink: Option<rpc_core::StreamSink>,
    serializer: SerializerKind,
) -> Result<StreamSender<T>, RpcError> {
    sink.map(|sink| StreamSender::new(sink, serializer))
        .ok_or_else(|| RpcError::Protocol("a client stream opened without a sender".into()))
}

/// Sends `items` through `sender` until they end (then the flow ends
/// cleanly), a send fails, or the call is over.
async fn pump<S>(mut sender: StreamSender<S::Item>, items: S)
where
    S: Stream,
    S::Item: Serialize,
{
    let mut items = std::pin::pin!(items);
    loop {
        let next = std::future::poll_fn(|cx| items.as_mut().poll_next(cx));
        let item = tokio::select! {
            item = next => item,
            _ = sender.closed() => return,
        };
        match item {
            Some(item) => {
                if sender.send(&item).await.is_err() {
                    return;
                }
            }
            None => break,
        }
    }
    sender.finish(Ok(()));
}
