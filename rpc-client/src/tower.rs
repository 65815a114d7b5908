//! [`Client`] as a [`tower_service::Service`]: the generic call, an
//! [`RpcRequest`] in and an [`RpcResponse`] out, so tower's layers —
//! timeout, retry, rate and concurrency limits, load shedding — wrap it.
//! Feature `tower`.
//!
//! The request goes through the client's own interceptors and transport as
//! [`Client::call_raw`] sends it; the layers sit outside all of that. The
//! client is always ready: its own bounds (the write queue, in-flight
//! limits) push back inside the call, and a tower layer that limits
//! concurrency keeps its own count.
//!
//! ```no_run
//! # async fn run(client: rpc_client::Client) -> Result<(), tower::BoxError> {
//! use std::time::Duration;
//! use rpc_codec::BodyCodec;
//! use rpc_core::{RpcRequest, SerializerKind};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! let mut svc = ServiceBuilder::new()
//!     .timeout(Duration::from_millis(200))
//!     .concurrency_limit(64)
//!     .service(client);
//! let body = SerializerKind::MsgPack.encode_body(&(1i64, 2i64))?;
//! let req = RpcRequest::new("Calc", "add", SerializerKind::MsgPack, body);
//! let answer = svc.ready().await?.call(req).await?;
//! # let _ = answer; Ok(()) }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use rpc_core::{RpcError, RpcRequest, RpcResponse};

use crate::Client;

impl tower_service::Service<RpcRequest> for Client {
    type Response = RpcResponse;
    type Error = RpcError;
    type Future = Pin<Box<dyn Future<Output = Result<RpcResponse, RpcError>> + Send + 'static>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), RpcError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: RpcRequest) -> Self::Future {
        let client = self.clone();
        Box::pin(async move { client.call_raw(req).await })
    }
}
