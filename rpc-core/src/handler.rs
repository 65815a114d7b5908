//! [`ServiceHandler`]: a service as the server sees it — a name, its methods, and
//! one untyped entry point that decodes the arguments, runs the method and
//! encodes the result.
//!
//! The `brisk::service!` macro implements it for every user service; the server
//! routes by service name to the handler and lets it route by method.

use async_trait::async_trait;
use bytes::Bytes;

use crate::{RpcError, RpcRequest};

/// A served service.
#[async_trait]
pub trait ServiceHandler: Send + Sync + 'static {
    /// The service name clients call.
    fn service_name(&self) -> &'static str;

    /// The method names this service answers.
    fn method_names(&self) -> &'static [&'static str];

    /// Runs `req.method` with `req.body` as arguments; returns the encoded result
    /// in `req.serializer`. An unknown method is [`RpcError::UnknownMethod`]; a body
    /// that does not decode is [`RpcError::Deserialize`]; the method's own error is
    /// [`RpcError::Handler`].
    async fn call(&self, req: RpcRequest) -> Result<Bytes, RpcError>;
}
