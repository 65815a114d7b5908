//! What unit tests across the crate share: a service whose every method
//! answers an empty body.

use rpc_core::{Context, HandlerFuture, RpcResponse, ServiceHandler};

/// A service named `.0` with the methods `.1`, each answering empty.
pub(crate) struct EmptyAnswers(pub &'static str, pub &'static [&'static str]);

impl ServiceHandler for EmptyAnswers {
    fn service_name(&self) -> &'static str {
        self.0
    }

    fn method_names(&self) -> &'static [&'static str] {
        self.1
    }

    fn call(&self, _: usize, _: Context, _: bytes::Bytes) -> HandlerFuture<'_> {
        Box::pin(async { Ok(RpcResponse::default()) })
    }
}
