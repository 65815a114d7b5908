//! [`Router`]: service name → handler.
//!
//! Lookups borrow the names straight out of the request frame and hand back the
//! handler's own `'static` names, so routing a call allocates nothing. Unknown
//! names become [`RpcError::UnknownService`] / [`RpcError::UnknownMethod`],
//! answered to the caller.

use std::collections::HashMap;
use std::sync::Arc;

use rpc_core::{RpcError, ServiceHandler};

/// A resolved call target.
#[derive(Clone)]
pub struct Route {
    pub handler: Arc<dyn ServiceHandler>,
    pub service: &'static str,
    pub method: &'static str,
}

/// The services a server answers.
#[derive(Default, Clone)]
pub struct Router {
    services: HashMap<&'static str, Arc<dyn ServiceHandler>>,
}

impl Router {
    /// An empty router.
    pub fn new() -> Self {
        Router::default()
    }

    /// Adds a service; a second service with the same name replaces the first.
    pub fn add(&mut self, handler: Arc<dyn ServiceHandler>) {
        self.services.insert(handler.service_name(), handler);
    }

    /// Resolves `service`/`method`.
    pub fn route(&self, service: &str, method: &str) -> Result<Route, RpcError> {
        let handler = self
            .services
            .get(service)
            .ok_or_else(|| RpcError::UnknownService(service.to_owned()))?;
        let method = handler
            .method_names()
            .iter()
            .find(|m| **m == method)
            .ok_or_else(|| RpcError::UnknownMethod {
                service: service.to_owned(),
                method: method.to_owned(),
            })?;
        Ok(Route {
            handler: handler.clone(),
            service: handler.service_name(),
            method,
        })
    }

    /// Registered services.
    pub fn handlers(&self) -> impl Iterator<Item = &Arc<dyn ServiceHandler>> + '_ {
        self.services.values()
    }

    /// Registered service names.
    pub fn service_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.services.keys().copied()
    }
}
