//! [`ServiceHandler`]: a service as the server sees it — a name, its methods, and
//! one untyped entry point that decodes the arguments, runs the method and
//! encodes the result.
//!
//! `#[brisk::service]` implements it for every user service. The server
//! routes a call by service and method name once, to a method *index*, and
//! the handler dispatches on that index: no second string match.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

use crate::{Context, RpcError, RpcResponse};

/// A handler's call in progress.
pub type HandlerFuture<'a> =
    Pin<Box<dyn Future<Output = Result<RpcResponse, RpcError>> + Send + 'a>>;

/// A served service.
pub trait ServiceHandler: Send + Sync + 'static {
    /// The service name clients call.
    fn service_name(&self) -> &'static str;

    /// The method names this service answers; a method's index here is what
    /// [`call`](Self::call) receives.
    fn method_names(&self) -> &'static [&'static str];

    /// Runs method number `method` with `body` as its arguments, encoded in
    /// `cx.serializer()`; returns the encoded result and the answer's
    /// metadata. An index out of range is [`RpcError::UnknownMethod`]; a body
    /// that does not decode is [`RpcError::Deserialize`]; the method's own
    /// error is its [`Status`](crate::Status).
    fn call(&self, method: usize, cx: Context, body: Bytes) -> HandlerFuture<'_>;
}
