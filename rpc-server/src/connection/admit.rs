//! [`admit`]: how a request or stream-open frame becomes a call — routed,
//! its body opened, its [`Context`] set — or the error
//! its caller gets instead.
//!
//! The one way a frame becomes a call, for the frames the connection's task
//! reads (`on_frame`) and for those a worker reads on a lent read side
//! (`worker_reads`): both go through here, so both refuse and admit alike.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rpc_codec::{Frame, FrameKind};
use rpc_core::{Context, RpcError, RpcRequest, SerializerKind};
use tracing::warn;

use crate::ctx::ServerCtx;
use crate::reply::ReplyTo;
use crate::router::Route;

/// A request (or stream open) frame made a call: routed, its body opened,
/// its context set.
pub(super) struct Admitted<'a> {
    pub(super) route: &'a Route,
    pub(super) reply_to: ReplyTo,
    pub(super) req: RpcRequest,
    /// When the caller stops waiting, and what it allowed.
    pub(super) deadline: Option<(Instant, Duration)>,
}

/// Turns a request or stream-open frame, received at `received` from
/// `peer`, into a call — or into the error its caller gets instead: a bad
/// serializer, `refusal` (a connection winding down), an unknown method, a
/// unary call to a streaming method or the reverse, a body that does not
/// open. The one way a frame becomes a call, on the connection task and on
/// a worker that read it (`worker_reads`). Inlined into both: its result
/// (the request, hundreds of bytes) is then built where the call keeps it,
/// not returned and moved again.
#[inline(always)]
pub(super) fn admit<'a>(
    ctx: &'a ServerCtx,
    frame: Frame,
    received: Instant,
    peer: Option<SocketAddr>,
    refusal: Option<RpcError>,
) -> Result<Admitted<'a>, (ReplyTo, RpcError)> {
    let id = frame.header.request_id;
    let reply_to = ReplyTo::of(&frame.header, &ctx.config.compression);
    let stream = frame.header.kind == FrameKind::StreamOpen;
    let serializer = SerializerKind::from_id(reply_to.serializer).map_err(|e| (reply_to, e))?;
    if let Some(refusal) = refusal {
        return Err((reply_to, refusal));
    }
    let route = ctx
        .router
        .route_ref(frame.meta.service(), frame.meta.method())
        .map_err(|e| (reply_to, e))?;
    if route.kind.is_stream() != stream {
        let how = match stream {
            true => "unary: call it, do not open a stream",
            false => "a streaming method: open it as a stream",
        };
        let err = RpcError::Status(rpc_core::Status::new(
            rpc_core::Code::Unimplemented,
            format!("{}.{} is {how}", route.service, route.method),
        ));
        return Err((reply_to, err));
    }
    // A compressed body is opened here, so handlers, interceptors and
    // layers see it plain; one that cannot be opened fails this call only.
    let body = rpc_codec::compression::open_body(
        frame.header.flags,
        frame.body,
        ctx.config.transport.max_frame_size,
    )
    .map_err(|e| {
        warn!(?peer, request_id = id, error = %e, "request body not opened");
        (reply_to, e)
    })?;
    let timeout_ms = frame.header.timeout_ms;
    let deadline = (timeout_ms > 0).then(|| {
        let timeout = Duration::from_millis(timeout_ms as u64);
        (received + timeout, timeout)
    });
    let mut cx = Context::new(id, serializer)
        .with_metadata(frame.meta.metadata)
        .with_deadline(deadline.map(|(at, _)| at));
    if let Some(peer) = peer {
        cx = cx.with_peer(peer);
    }
    let req = RpcRequest {
        service: Cow::Borrowed(route.service),
        method: Cow::Borrowed(route.method),
        body,
        cx,
    };
    Ok(Admitted {
        route,
        reply_to,
        req,
        deadline,
    })
}
