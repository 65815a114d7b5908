//! [`Router`]: service and method name → [`Route`].
//!
//! Lookups borrow the names straight out of the request frame and hand back the
//! handler's own `'static` names, so routing a call allocates nothing. Unknown
//! names become [`RpcError::UnknownService`] / [`RpcError::UnknownMethod`],
//! answered to the caller.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use rpc_core::{MethodKind, RpcError, ServiceHandler};

use crate::method_metrics::MethodMetrics;

/// A resolved call target, built once per method when the service is added:
/// routing a call is a lookup and one `Arc` clone, and the method's metrics
/// travel with it.
pub struct RouteEntry {
    /// The service's handler.
    pub handler: Arc<dyn ServiceHandler>,
    /// The service name.
    pub service: &'static str,
    /// The method name.
    pub method: &'static str,
    /// The method's index in the handler's `method_names`: what the handler
    /// dispatches on.
    pub index: usize,
    /// How the method is called: unary, or which ways it streams.
    pub kind: MethodKind,
    /// The method's counters and latency histogram.
    pub metrics: MethodMetrics,
}

/// A shared [`RouteEntry`].
pub type Route = Arc<RouteEntry>;

/// FNV-1a: service names are a handful of short strings known to the server,
/// so the lookup needs no protection against crafted collisions (the worst a
/// peer can do is miss), and SipHash's setup cost was a tenth of routing.
#[derive(Default)]
struct NameHasher(u64);

impl Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// The services a server answers.
#[derive(Default, Clone)]
pub struct Router {
    services: HashMap<&'static str, Vec<Route>, BuildHasherDefault<NameHasher>>,
}

impl Router {
    /// An empty router.
    pub fn new() -> Self {
        Router::default()
    }

    /// Adds a service; a second service with the same name replaces the first.
    pub fn add(&mut self, handler: Arc<dyn ServiceHandler>) {
        let service = handler.service_name();
        let routes = handler
            .method_names()
            .iter()
            .enumerate()
            .map(|(index, method)| {
                Arc::new(RouteEntry {
                    handler: handler.clone(),
                    service,
                    method,
                    index,
                    kind: handler.method_kind(index),
                    metrics: MethodMetrics::default(),
                })
            })
            .collect();
        self.services.insert(service, routes);
    }

    /// Resolves `service`/`method` to a shared route.
    pub fn route(&self, service: &str, method: &str) -> Result<Route, RpcError> {
        self.route_ref(service, method).cloned()
    }

    /// Resolves `service`/`method`, borrowing the route from the router.
    pub fn route_ref(&self, service: &str, method: &str) -> Result<&Route, RpcError> {
        let routes = self
            .services
            .get(service)
            .ok_or_else(|| RpcError::UnknownService(service.to_owned()))?;
        routes
            .iter()
            .find(|r| r.method == method)
            .ok_or_else(|| RpcError::UnknownMethod {
                service: service.to_owned(),
                method: method.to_owned(),
            })
    }

    /// Every route, sorted by service then method.
    pub fn routes(&self) -> Vec<Route> {
        let mut all: Vec<Route> = self.services.values().flatten().cloned().collect();
        all.sort_by_key(|r| (r.service, r.method));
        all
    }

    /// Registered service names.
    pub fn service_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.services.keys().copied()
    }
}
