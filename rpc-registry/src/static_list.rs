//! [`StaticRegistry`]: a fixed list of addresses, also usable as an in-process
//! registry.
//!
//! A client configured with `addrs` (and no `registry`) reports one of these
//! as its registry: every address serves every service
//! ([`ANY_SERVICE`](crate::ANY_SERVICE)). That client calls a fixed list of
//! those addresses and follows nothing registered into it later; share a
//! `StaticRegistry` with the client (its builder's `registry`) for that.
//! Servers may [`register`](Registry::register) with it, and
//! [`set`](StaticRegistry::set) replaces the list; every discovery sees either at
//! once. There are no leases: dropping a [`Registration`] removes its entries at
//! once, like deregistering does.

use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use rpc_core::RpcError;
use tokio::sync::watch;

use crate::discovery::normalize;
use crate::{Discovery, Registration, Registry, ServiceInstance, Snapshot};

struct State {
    /// Entries given at construction or by `set`.
    base: Vec<ServiceInstance>,
    /// Entries of live registrations, by registration id.
    registered: Vec<(u64, Vec<ServiceInstance>)>,
    next_id: u64,
}

struct Shared {
    state: Mutex<State>,
    tx: watch::Sender<Snapshot>,
}

impl Shared {
    fn publish(&self, state: &State) {
        let all: Vec<ServiceInstance> = state
            .base
            .iter()
            .chain(state.registered.iter().flat_map(|(_, v)| v.iter()))
            .cloned()
            .collect();
        self.tx.send_replace(normalize(all));
    }

    fn remove(&self, id: u64) {
        let mut state = self.state.lock();
        let before = state.registered.len();
        state.registered.retain(|(i, _)| *i != id);
        if state.registered.len() != before {
            self.publish(&state);
        }
    }
}

/// A fixed address list that doubles as an in-process registry. Cheap to clone;
/// clones share the list.
#[derive(Clone)]
pub struct StaticRegistry {
    shared: Arc<Shared>,
}

impl StaticRegistry {
    /// A registry holding `instances`.
    pub fn new(instances: Vec<ServiceInstance>) -> StaticRegistry {
        let (tx, _rx) = watch::channel(normalize(instances.clone()));
        StaticRegistry {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    base: instances,
                    registered: Vec::new(),
                    next_id: 1,
                }),
                tx,
            }),
        }
    }

    /// A registry of addresses that serve every service, with the default weight.
    pub fn from_addrs<I, S>(addrs: I) -> StaticRegistry
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        StaticRegistry::new(addrs.into_iter().map(ServiceInstance::any).collect())
    }

    /// Replaces the configured entries (registrations stay); discoveries see it at once.
    pub fn set(&self, instances: Vec<ServiceInstance>) {
        let mut state = self.shared.state.lock();
        state.base = instances;
        self.shared.publish(&state);
    }

    /// Everything listed right now.
    pub fn instances(&self) -> Snapshot {
        self.shared.tx.borrow().clone()
    }
}

/// Removes a registration's entries when its task ends, aborted or not.
struct Unregister {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Unregister {
    fn drop(&mut self) {
        self.shared.remove(self.id);
    }
}

#[async_trait]
impl Registry for StaticRegistry {
    async fn register(&self, instances: Vec<ServiceInstance>) -> Result<Registration, RpcError> {
        let id = {
            let mut state = self.shared.state.lock();
            let id = state.next_id;
            state.next_id += 1;
            state.registered.push((id, instances.clone()));
            self.shared.publish(&state);
            id
        };
        let guard = Unregister {
            shared: self.shared.clone(),
            id,
        };
        Ok(Registration::spawn(
            instances,
            self.describe(),
            move |mut stop| async move {
                let _guard = guard;
                stop.requested().await;
                Ok(())
            },
        ))
    }

    async fn discover(&self, service: Option<&str>) -> Result<Discovery, RpcError> {
        Ok(Discovery::new(self.shared.tx.subscribe(), service))
    }

    fn describe(&self) -> String {
        let state = self.shared.state.lock();
        let addrs: Vec<&str> = state.base.iter().map(|i| i.addr.as_str()).collect();
        format!("static [{}]", addrs.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn registrations_come_and_go() {
        let reg = StaticRegistry::from_addrs(["a:1"]);
        let mut d = reg.discover(Some("Hello")).await.unwrap();
        assert_eq!(d.current().len(), 1);

        let r = reg
            .register(vec![ServiceInstance::new("Hello", "b:1")])
            .await
            .unwrap();
        assert_eq!(d.changed().await.unwrap().len(), 2);
        r.deregister().await.unwrap();
        assert_eq!(d.changed().await.unwrap().len(), 1);

        let r = reg
            .register(vec![ServiceInstance::new("Hello", "c:1")])
            .await
            .unwrap();
        assert_eq!(d.changed().await.unwrap().len(), 2);
        drop(r); // no lease here: dropping removes at once
        assert_eq!(d.changed().await.unwrap().len(), 1);

        reg.set(vec![]);
        assert!(d.changed().await.unwrap().is_empty());
        assert!(reg.describe().starts_with("static"));
    }
}
