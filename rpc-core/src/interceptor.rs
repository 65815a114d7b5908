//! Interceptors: the one middleware abstraction, on both sides of a call.
//!
//! An [`Interceptor`] receives the request and a [`Next`] — the rest of the chain
//! ending at an [`Endpoint`] (the transport on a client, the handler on a server).
//! It can inspect or change the request, short-circuit with an error (auth), call
//! `next.run(req)` and look at the outcome (metrics, logging), or call it more than
//! once (retries). This is the shape of tower's `Service`/`Layer` reduced to what
//! an RPC call needs, so timeouts, metrics and auth compose instead of being flags
//! threaded through every function.
//!
//! ```
//! use rpc_core::{Interceptor, Next, RpcError, RpcRequest, RpcResponse};
//!
//! /// Rejects calls without a `token` in their metadata.
//! struct RequireToken;
//!
//! #[async_trait::async_trait]
//! impl Interceptor for RequireToken {
//!     async fn call(&self, req: RpcRequest, next: Next<'_>) -> Result<RpcResponse, RpcError> {
//!         if req.metadata().get("token").is_none() {
//!             return Err(RpcError::Unauthenticated("missing `token` metadata".into()));
//!         }
//!         next.run(req).await
//!     }
//! }
//! ```

use std::sync::Arc;

use async_trait::async_trait;

use crate::{RpcError, RpcRequest, RpcResponse};

/// Middleware around a call.
#[async_trait]
pub trait Interceptor: Send + Sync + 'static {
    /// Handles `req`, usually by calling `next.run(req)` somewhere inside.
    async fn call(&self, req: RpcRequest, next: Next<'_>) -> Result<RpcResponse, RpcError>;
}

/// The end of an interceptor chain: what actually performs the call.
#[async_trait]
pub trait Endpoint: Send + Sync {
    /// Performs the call.
    async fn call(&self, req: RpcRequest) -> Result<RpcResponse, RpcError>;
}

/// The remainder of an interceptor chain.
pub struct Next<'a> {
    chain: &'a [Arc<dyn Interceptor>],
    endpoint: &'a dyn Endpoint,
}

impl<'a> Next<'a> {
    /// A chain of `interceptors` (outermost first) ending at `endpoint`.
    pub fn new(chain: &'a [Arc<dyn Interceptor>], endpoint: &'a dyn Endpoint) -> Self {
        Next { chain, endpoint }
    }

    /// Runs the rest of the chain.
    pub async fn run(self, req: RpcRequest) -> Result<RpcResponse, RpcError> {
        match self.chain.split_first() {
            Some((first, rest)) => {
                first
                    .call(
                        req,
                        Next {
                            chain: rest,
                            endpoint: self.endpoint,
                        },
                    )
                    .await
            }
            None => self.endpoint.call(req).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SerializerKind;
    use bytes::Bytes;
    use std::sync::Mutex;

    struct Echo;

    #[async_trait]
    impl Endpoint for Echo {
        async fn call(&self, req: RpcRequest) -> Result<RpcResponse, RpcError> {
            Ok(RpcResponse::new(req.body))
        }
    }

    struct Tag(&'static str, Arc<Mutex<Vec<&'static str>>>);

    #[async_trait]
    impl Interceptor for Tag {
        async fn call(&self, mut req: RpcRequest, next: Next<'_>) -> Result<RpcResponse, RpcError> {
            self.1.lock().unwrap().push(self.0);
            req.metadata_mut().insert(self.0, "seen");
            next.run(req).await
        }
    }

    struct Deny;

    #[async_trait]
    impl Interceptor for Deny {
        async fn call(&self, _req: RpcRequest, _next: Next<'_>) -> Result<RpcResponse, RpcError> {
            Err(RpcError::Unauthenticated("denied".into()))
        }
    }

    #[tokio::test]
    async fn chain_runs_outermost_first_then_endpoint() {
        let log = Arc::new(Mutex::new(vec![]));
        let chain: Vec<Arc<dyn Interceptor>> = vec![
            Arc::new(Tag("a", log.clone())),
            Arc::new(Tag("b", log.clone())),
        ];
        let req = RpcRequest::new("S", "m", SerializerKind::Json, Bytes::from_static(b"x"));
        let resp = Next::new(&chain, &Echo).run(req).await.unwrap();
        assert_eq!(&resp.body[..], b"x");
        assert_eq!(*log.lock().unwrap(), vec!["a", "b"]);
    }

    #[tokio::test]
    async fn an_interceptor_can_short_circuit() {
        let chain: Vec<Arc<dyn Interceptor>> = vec![Arc::new(Deny)];
        let req = RpcRequest::new("S", "m", SerializerKind::Json, Bytes::new());
        let err = Next::new(&chain, &Echo).run(req).await.unwrap_err();
        assert_eq!(err, RpcError::Unauthenticated("denied".into()));
    }
}
