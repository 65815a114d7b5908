//! tower layers around the handler endpoint: [`ServerBuilder::layer`].
//! Feature `tower`.
//!
//! A call passes the server's interceptors (outermost first), then the
//! layers (the first given is the outermost, as in `tower::ServiceBuilder`),
//! then its handler. The layers see the generic call — an [`RpcRequest`] in,
//! an [`RpcResponse`] out — for unary calls on the binary protocol and the
//! HTTP gateway, in both dispatch modes; streaming calls pass the
//! interceptors only (a stream is not one response).
//!
//! # Invariants
//!
//! - The stack is built once, at start, and every call runs through a clone
//!   of it, as axum and tonic do: a layer whose state is shared by its clones
//!   acts across all calls (`ConcurrencyLimit`'s semaphore, `LoadShed` over
//!   it, `Timeout`); a layer whose state is per instance (tower's
//!   `RateLimit`) would start afresh with every call — use a shared one.
//! - A layer's refusal or failure reaches the caller as brisk's own status:
//!   tower's `Elapsed` is `DeadlineExceeded`, `Overloaded` is `ServerBusy`
//!   (the handler did not run: load shedding), an error the handler returned
//!   is passed through unchanged, anything else is `Internal` with the
//!   layer's message. The connection carries on either way.
//!
//! # Why it is shaped so
//!
//! Without layers nothing of this runs: a call takes the handler's own
//! future (no boxing, no clone). With layers each call pays one clone of the
//! boxed stack and one boxed future per layer, the price of tower's
//! `'static` futures.
//!
//! [`ServerBuilder::layer`]: crate::ServerBuilder::layer

use async_trait::async_trait;
use futures::future::BoxFuture;
use rpc_core::{Code, Endpoint, RpcError, RpcRequest, RpcResponse, Status};
use std::task::{Context, Poll};
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt};

use crate::router::{RouteEntry, Router};

/// The error type between layers: whatever a layer fails with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a server layer wraps, and what it must give back: the rest of the
/// stack down to the handler, as a boxed, cloneable tower service.
pub type LayeredService = BoxCloneSyncService<RpcRequest, RpcResponse, BoxError>;

/// One layer given to the builder, kept until the stack is built at start.
pub(crate) type LayerFn = Box<dyn FnOnce(LayeredService) -> LayeredService + Send>;

/// Keeps `layer` for the stack.
pub(crate) fn keep<L>(layer: L) -> LayerFn
where
    L: Layer<LayeredService> + Send + 'static,
    L::Service: Service<RpcRequest, Response = RpcResponse> + Clone + Send + Sync + 'static,
    <L::Service as Service<RpcRequest>>::Error: Into<BoxError>,
    <L::Service as Service<RpcRequest>>::Future: Send + 'static,
{
    Box::new(move |inner| {
        let service = layer
            .layer(inner)
            .map_err(|e: <L::Service as Service<RpcRequest>>::Error| -> BoxError { e.into() });
        BoxCloneSyncService::new(service)
    })
}

/// The stack of `layers` (the first given outermost) around `router`'s
/// handlers; none without layers.
pub(crate) fn stack(layers: Vec<LayerFn>, router: &Router) -> Option<LayeredService> {
    if layers.is_empty() {
        return None;
    }
    let handlers = LayeredService::new(Handlers {
        router: router.clone(),
    });
    Some(
        layers
            .into_iter()
            .rev()
            .fold(handlers, |inner, wrap| wrap(inner)),
    )
}

/// The innermost service: routes the call and runs its handler.
#[derive(Clone)]
struct Handlers {
    router: Router,
}

impl Service<RpcRequest> for Handlers {
    type Response = RpcResponse;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<RpcResponse, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: RpcRequest) -> Self::Future {
        let route = self.router.route(&req.service, &req.method);
        Box::pin(async move {
            let route = route?;
            let answer = route.handler.call(route.index, req.cx, req.body).await?;
            Ok(answer)
        })
    }
}

/// The end of the interceptor chain when the server has layers: the stack.
pub(crate) struct LayeredEndpoint<'a> {
    pub stack: &'a LayeredService,
    pub route: &'a RouteEntry,
}

#[async_trait]
impl Endpoint for LayeredEndpoint<'_> {
    async fn call(&self, req: RpcRequest) -> Result<RpcResponse, RpcError> {
        self.stack
            .clone()
            .oneshot(req)
            .await
            .map_err(|e| layer_error(e, self.route))
    }
}

/// The caller's error for what came out of the stack. The chain of causes
/// is searched, since a layer may wrap what it passes on (`tower::buffer`
/// does): a handler's own error, a timeout or a shed call keep their meaning
/// under such a wrapper.
fn layer_error(err: BoxError, route: &RouteEntry) -> RpcError {
    let (service, method) = (route.service, route.method);
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err.as_ref());
    while let Some(e) = cause {
        if let Some(own) = e.downcast_ref::<RpcError>() {
            return own.clone();
        }
        if e.is::<tower::timeout::error::Elapsed>() {
            return RpcError::Status(Status::new(
                Code::DeadlineExceeded,
                format!("{service}.{method}: a server layer's timeout passed ({e})"),
            ));
        }
        if e.is::<tower::load_shed::error::Overloaded>() {
            return RpcError::ServerBusy(format!(
                "{service}.{method}: shed by a server layer ({e})"
            ));
        }
        cause = e.source();
    }
    RpcError::Status(Status::new(
        Code::Internal,
        format!("{service}.{method}: a server layer failed: {err}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route() -> RouteEntry {
        RouteEntry {
            handler: std::sync::Arc::new(crate::test_support::EmptyAnswers("S", &["m"])),
            service: "S",
            method: "m",
            index: 0,
            kind: rpc_core::MethodKind::Unary,
            metrics: Default::default(),
        }
    }

    #[test]
    fn a_layers_errors_become_brisks_statuses() {
        let route = route();
        let own = layer_error(Box::new(RpcError::UnknownService("X".into())), &route);
        assert_eq!(own, RpcError::UnknownService("X".into()));
        let elapsed = layer_error(Box::new(tower::timeout::error::Elapsed::new()), &route);
        assert_eq!(elapsed.code(), Code::DeadlineExceeded, "{elapsed}");
        let shed = layer_error(Box::new(tower::load_shed::error::Overloaded::new()), &route);
        assert_eq!(shed.code(), Code::ServerBusy, "{shed}");
        // Under a layer that wraps what it passes on, the cause still counts.
        #[derive(Debug)]
        struct Wrapped(BoxError);
        impl std::fmt::Display for Wrapped {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("wrapped")
            }
        }
        impl std::error::Error for Wrapped {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(self.0.as_ref())
            }
        }
        let wrapped = Wrapped(Box::new(RpcError::Handler("mine".into())));
        assert_eq!(
            layer_error(Box::new(wrapped), &route),
            RpcError::Handler("mine".into())
        );
        let wrapped = Wrapped(Box::new(tower::load_shed::error::Overloaded::new()));
        assert_eq!(
            layer_error(Box::new(wrapped), &route).code(),
            Code::ServerBusy
        );
        let other = layer_error("the layer broke".into(), &route);
        assert_eq!(other.code(), Code::Internal);
        assert!(other.to_string().contains("the layer broke"), "{other}");
    }
}
