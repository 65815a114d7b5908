//! The HTTP/JSON protocol (jkrpc's `jsonr`), beside the binary one.
//!
//! `POST /{service}/{method}` with a JSON array of the method's arguments (empty
//! body or `[]` for none) calls the very same handlers, through the same
//! interceptors and the same dispatch (direct, or the worker pool with its busy
//! answer), and answers the JSON of the result. This lets curl, load tools and
//! other languages call a brisk service. Also served: `GET /health` and
//! `GET /metrics` (OpenMetrics text).
//!
//! Handlers get the same [`Context`] as on the binary protocol: metadata
//! from `x-brisk-meta-<key>` headers (and the answer's metadata back as
//! `x-brisk-meta-<key>` response headers), the peer, and a deadline of
//! arrival + `x-brisk-timeout-ms`. At the deadline the caller gets 504 at
//! once and the call's context is cancelled (a direct handler's future is
//! dropped; a pooled handler's late answer discarded); a client that closes
//! its connection before the answer cancels the call the same way, counted
//! in `brisk_calls_cancelled_total`. Errors map to status codes with a JSON error body:
//! 400 bad JSON or arguments, 401 unauthenticated, 404 unknown service or
//! method, 405 wrong verb, 413 body over `max_frame_size`, 501 a client or
//! bidirectional stream (served on the binary protocol only), 503 server
//! busy or shutting down, 504 timeout, 500 handler error.
//!
//! Bodies may be compressed: a request in `Content-Encoding: gzip` or
//! `zstd` is opened before its JSON is read, and an answer of at least
//! `compression.min_size` bytes goes in the best of what `Accept-Encoding`
//! offers (see `http/encoding.rs`).
//!
//! A server stream answers `200` with `application/x-ndjson`: one JSON
//! line per item as the handler sends them, read by hyper as the client
//! takes them (so a slow client holds the handler within the stream
//! window); an error mid-stream is the last line, `{"error": …, "message":
//! …}`; the stream's deadline is `x-brisk-timeout-ms`, and a client that
//! disconnects cancels it.

use std::borrow::Cow;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_ENCODING, CONTENT_TYPE, VARY};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rpc_codec::compression::BodyCompressor;
use rpc_core::{
    CancelSignal, Code, Compression, Context, Metadata, RpcError, RpcRequest, RpcResponse,
    SerializerKind, Status, StreamIo,
};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::ctx::{Dispatcher, ServerCtx};
use crate::dispatch::{deadline_error, finish_call, start_call, PoolJob, Reply};
use crate::router::{Route, RouteEntry};
use crate::stop::StopLevel;
use crate::stream::{run_stream, LocalFlow};

mod encoding;

/// Runs `req` to completion on this task (direct dispatch): [`start_call`]
/// then [`finish_call`], with panics contained.
async fn execute(
    ctx: &ServerCtx,
    route: &RouteEntry,
    req: RpcRequest,
    started: Instant,
) -> Result<RpcResponse, RpcError> {
    use futures::FutureExt;
    let outcome = std::panic::AssertUnwindSafe(start_call(ctx, route, req))
        .catch_unwind()
        .await;
    finish_call(ctx, route, started.elapsed(), outcome)
}

const META_PREFIX: &str = "x-brisk-meta-";
const TIMEOUT_HEADER: &str = "x-brisk-timeout-ms";

/// Accepts HTTP connections until the server stops.
pub(crate) async fn accept_loop(listener: TcpListener, ctx: Arc<ServerCtx>, tracker: TaskTracker) {
    loop {
        let accepted = tokio::select! {
            biased;
            _ = ctx.stop.stopping() => break,
            r = listener.accept() => r,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                warn!(error = %e, "http accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let ctx = ctx.clone();
        tracker.spawn(async move {
            let service_ctx = ctx.clone();
            let service = service_fn(move |req| {
                let ctx = service_ctx.clone();
                async move { Ok::<_, Infallible>(handle(&ctx, peer, req).await) }
            });
            let conn = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        debug!(%peer, error = %e, "http connection ended with an error");
                    }
                }
                _ = ctx.stop.stopping() => {
                    // Finish the request in progress, then close.
                    conn.as_mut().graceful_shutdown();
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = ctx.stop.forced() => {}
                    }
                }
            }
        });
    }
}

type HttpResponse = Response<UnsyncBoxBody<Bytes, Infallible>>;

fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> HttpResponse {
    let mut r = Response::new(Full::new(body.into()).boxed_unsync());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn json_error(status: StatusCode, err: &RpcError) -> HttpResponse {
    let body = serde_json::json!({
        "error": err.code().name(),
        "message": err.to_string(),
    });
    respond(status, "application/json", body.to_string())
}

/// The HTTP status an error maps to: the status table's
/// ([`Code::http_status`](rpc_core::Code::http_status)).
pub fn status_for(err: &RpcError) -> StatusCode {
    StatusCode::from_u16(err.code().http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

async fn handle(ctx: &Arc<ServerCtx>, peer: SocketAddr, req: Request<Incoming>) -> HttpResponse {
    let path = req.uri().path().to_owned();
    match (req.method(), path.as_str()) {
        (&Method::GET, "/health") => {
            if ctx.stop.level() != StopLevel::Running {
                respond(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "application/json",
                    r#"{"status":"shutting_down"}"#,
                )
            } else {
                respond(StatusCode::OK, "application/json", r#"{"status":"ok"}"#)
            }
        }
        (&Method::GET, "/metrics") => {
            let text = crate::metrics::render(&ctx.registry);
            respond(StatusCode::OK, crate::metrics::CONTENT_TYPE, text)
        }
        (&Method::POST, _) => {
            let compress = encoding::for_answer(req.headers(), &ctx.config.compression);
            match call(ctx, peer, &path, req).await {
                Ok(Answer::Unary(answer)) => unary_answer(answer, compress),
                Ok(Answer::Stream(response)) => response,
                Err(e) => json_error(status_for(&e), &e),
            }
        }
        _ => {
            let err = RpcError::Protocol(format!(
                "use POST /{{service}}/{{method}} (or GET /health, GET /metrics), not {} {path}",
                req.method()
            ));
            json_error(StatusCode::METHOD_NOT_ALLOWED, &err)
        }
    }
}

/// A unary call's `200`: its JSON (compressed as the client accepts), and
/// its answer metadata as `x-brisk-meta-*` headers.
fn unary_answer(answer: RpcResponse, compress: Option<BodyCompressor>) -> HttpResponse {
    let (body, used) = match compress {
        Some(compressor) => compressor.compress(answer.body),
        None => (answer.body, Compression::None),
    };
    let mut response = respond(StatusCode::OK, "application/json", body);
    let headers = response.headers_mut();
    if compress.is_some() {
        headers.insert(VARY, HeaderValue::from_static("accept-encoding"));
    }
    if let Some(coding) = encoding::header_value(used) {
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding));
    }
    for (key, value) in answer.metadata.iter() {
        let name = hyper::header::HeaderName::try_from(format!("{META_PREFIX}{key}"));
        if let (Ok(name), Ok(value)) = (name, HeaderValue::from_str(value)) {
            headers.insert(name, value);
        }
    }
    response
}

/// What a call over HTTP answers.
enum Answer {
    /// A unary call's answer.
    Unary(RpcResponse),
    /// A server stream: its items as newline-delimited JSON, sent as they come.
    Stream(HttpResponse),
}

async fn call(
    ctx: &Arc<ServerCtx>,
    peer: SocketAddr,
    path: &str,
    req: Request<Incoming>,
) -> Result<Answer, RpcError> {
    let received = Instant::now();
    let mut parts = path.trim_matches('/').splitn(2, '/');
    let service = parts.next().unwrap_or_default();
    let method = parts.next().unwrap_or_default();
    if ctx.stop.level() != StopLevel::Running {
        return Err(RpcError::ShuttingDown);
    }
    let route = ctx.router.route(service, method)?;
    if route.kind.client_streams() {
        return Err(RpcError::Status(Status::new(
            Code::Unimplemented,
            format!(
                "{}.{} takes a stream of items: client and bidirectional streams are served on the binary protocol only",
                route.service, route.method
            ),
        )));
    }

    let mut metadata = Metadata::new();
    let mut timeout = None;
    for (name, value) in req.headers() {
        let Ok(value) = value.to_str() else { continue };
        if let Some(key) = name.as_str().strip_prefix(META_PREFIX) {
            metadata.insert(key, value);
        } else if name.as_str() == TIMEOUT_HEADER {
            let ms: u64 = value.trim().parse().map_err(|_| {
                RpcError::Protocol(format!(
                    "{TIMEOUT_HEADER} must be a number of milliseconds, got `{value}`"
                ))
            })?;
            timeout = Some(Duration::from_millis(ms));
        }
    }

    let max = ctx.config.transport.max_frame_size;
    let (parts, body) = req.into_parts();
    let headers = parts.headers;
    let body = Limited::new(body, max)
        .collect()
        .await
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                RpcError::FrameTooLarge {
                    size: max as u64 + 1,
                    max: max as u64,
                }
            } else {
                RpcError::Protocol(format!("reading the request body failed: {e}"))
            }
        })?
        .to_bytes();
    ctx.metrics.io.add_in(body.len() as u64);
    let body = encoding::open_request(&headers, body, max)?;
    // A method without arguments accepts an empty body or `[]`.
    let trimmed = body.as_ref().trim_ascii();
    let body = if trimmed.is_empty() || trimmed == b"[]" {
        Bytes::new()
    } else {
        body
    };

    // Zero (or a deadline past what the clock can hold) is no deadline, as on
    // the binary protocol.
    let deadline = timeout
        .filter(|t| !t.is_zero())
        .and_then(|t| Some((received.checked_add(t)?, t)));
    let cx = Context::new(0, SerializerKind::Json)
        .with_metadata(metadata)
        .with_peer(peer)
        .with_deadline(deadline.map(|(at, _)| at));
    let rpc_req = RpcRequest {
        service: Cow::Borrowed(route.service),
        method: Cow::Borrowed(route.method),
        body,
        cx,
    };
    if route.kind.is_stream() {
        return Ok(Answer::Stream(server_stream(ctx, route, rpc_req)));
    }
    // Dropped before the call ends (the client closed the connection): the
    // call is cancelled, and counted so.
    let end = rpc_req.cx.cancellation().clone();
    let _abandoned = CancelOnDrop {
        end: end.clone(),
        route: &route,
    };
    let run = async {
        match &ctx.dispatcher {
            Dispatcher::Pool(pool) => {
                let (tx, rx) = oneshot::channel();
                PoolJob {
                    ctx: ctx.clone(),
                    route: route.clone(),
                    req: rpc_req,
                    received,
                    reply: Reply::Channel(tx),
                }
                .submit(pool, ctx, false)
                .map_err(|rejected| rejected.error(&route))?;
                rx.await
                    .map_err(|_| RpcError::Handler("the worker dropped the call".into()))?
            }
            Dispatcher::Direct => execute(ctx, &route, rpc_req, Instant::now()).await,
        }
    };
    let result = match deadline {
        // Not run: its caller has given up already.
        Some((at, t)) if at <= Instant::now() => {
            end.give_up();
            Err(deadline_error(&route, t))
        }
        Some((at, t)) => {
            let mut run = std::pin::pin!(run);
            match tokio::time::timeout_at(tokio::time::Instant::from_std(at), &mut run).await {
                Ok(result) => result,
                // Ends the call: a handler still running sees its context
                // cancelled, and its answer is discarded.
                Err(_) if end.give_up() => {
                    ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
                    route.metrics.record(t, false);
                    Err(deadline_error(&route, t))
                }
                // A worker answered in that very moment: that answer stands
                // (the caller must not think a call that ran did not).
                Err(_) => run.await,
            }
        }
        None => run.await,
    };
    // Answered (a pooled answer has ended the call on its worker already).
    end.finish();
    if let Ok(answer) = &result {
        ctx.metrics.io.add_out(answer.body.len() as u64);
    }
    result.map(Answer::Unary)
}

/// Serves a server stream as `application/x-ndjson`: one JSON line per item,
/// as the handler sends them (within the stream window: the body is read as
/// the client takes it). An error after the answer has started is the last
/// line, `{"error": …, "message": …}`. A client that goes away cancels the call.
fn server_stream(ctx: &Arc<ServerCtx>, route: Route, req: RpcRequest) -> HttpResponse {
    let serializer = SerializerKind::Json.id();
    let (out, items, peer) = LocalFlow::open(
        0,
        serializer,
        ctx.config.streams.window,
        req.cx.cancellation().clone(),
    );
    let io = StreamIo {
        incoming: None,
        out,
    };
    tokio::spawn(run_stream(ctx.clone(), route, req, io, peer, serializer));
    let lines = items.map(|item| {
        let line = match item {
            Ok(json) => {
                let mut line = Vec::with_capacity(json.len() + 1);
                line.extend_from_slice(&json);
                line.push(b'\n');
                line
            }
            Err(status) => {
                let mut line = serde_json::json!({
                    "error": status.code().name(),
                    "message": status.message(),
                })
                .to_string()
                .into_bytes();
                line.push(b'\n');
                line
            }
        };
        Ok::<_, Infallible>(hyper::body::Frame::data(Bytes::from(line)))
    });
    let mut response = Response::new(StreamBody::new(lines).boxed_unsync());
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    response
}

/// Cancels an HTTP call whose request future is dropped before the call
/// ended (its client went away), counting it cancelled.
struct CancelOnDrop<'a> {
    end: CancelSignal,
    route: &'a RouteEntry,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.end.give_up() {
            self.route.metrics.record_cancelled();
        }
    }
}
