//! [`Cluster`]: the servers a client may call, kept in step with a registry.
//!
//! Each server address is one [`ServerEndpoint`] with its own [`Connections`]
//! (reused, pooled or fixed, as configured), a count of this client's calls in
//! flight to it (the client's own count stands in for it when it is the one
//! server of a one-address client, see `Chosen::begin`), and a *down* mark.
//! The cluster holds, per service, the list of endpoints serving it with
//! their weights and a balancer [`Picker`] built for that list; a static
//! address list is one list that serves every service.
//!
//! **Choosing.** Per attempt the client asks `Cluster::choose` for an
//! endpoint of the call's service. The balancer chooses among endpoints that are
//! neither marked down nor already failed for this call; if that leaves nothing
//! it tries one that is down (it may be back) but not failed, and only then one
//! that already failed — so a retry lands on *another* server whenever there is one.
//! A client built from one address has nothing to choose: its calls borrow
//! that endpoint, which never leaves (no lock or reference count per call).
//!
//! **Down marks.** A transport failure (refused connect, connect timeout,
//! connection closed, write failure) or a `ShuttingDown` answer marks the
//! endpoint down for a back-off (`down_backoff_ms`, doubling with consecutive
//! failures up to 16×). New calls avoid it meanwhile; after the back-off the next
//! call that picks it probes it, and one success clears the mark. So a server
//! that comes back on the same address rejoins by itself.
//!
//! **Live updates.** A background task follows the [`Discovery`]: on every new
//! snapshot it rebuilds the lists, reusing the endpoints (and open connections)
//! of addresses that stay and creating the new ones without blocking anyone.
//! An endpoint that leaves the registry gets no new calls; calls already on it
//! finish (a gracefully stopping server still answers them) and its connections
//! close when the last of them lets go. The task ends with the client.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, OnceLock, Weak};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use rpc_core::RpcError;
use rpc_registry::{Discovery, Registry, ServiceInstance, ANY_SERVICE};
use rpc_transport::ClientTransport;
use tokio::sync::oneshot;
use tracing::{info, warn};

use crate::balance::{Balancer, Node, Picker};
use crate::connections::Connections;
use crate::ClientConfig;

/// Start of the clock the down marks are kept on (milliseconds fit an atomic).
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn now_ms() -> u64 {
    // +1 so that 0 can mean "not down".
    EPOCH.elapsed().as_millis() as u64 + 1
}

/// Consecutive failures beyond this stop doubling the back-off (16×).
const MAX_BACKOFF_DOUBLINGS: u32 = 4;

/// One server address: its connections and its health as this client sees it.
pub struct ServerEndpoint {
    addr: String,
    connections: Connections,
    in_flight: AtomicUsize,
    /// `now_ms()` until which the endpoint is down; 0 = up.
    down_until: AtomicU64,
    failures: AtomicU32,
}

impl ServerEndpoint {
    /// `host:port`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The connections to this address.
    pub fn connections(&self) -> &Connections {
        &self.connections
    }

    /// Calls this client has in flight to the address, when it is one of a
    /// list (the one server of a fixed one-address client is not counted
    /// here, see `Chosen::begin`).
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// True while the endpoint is marked down.
    pub fn is_down(&self) -> bool {
        self.down_until.load(Ordering::Relaxed) > now_ms()
    }

    fn is_down_at(&self, now: u64) -> bool {
        self.down_until.load(Ordering::Relaxed) > now
    }

    /// Marks the endpoint down for a back-off that doubles with consecutive
    /// failures. A burst of failures (every call pending on a broken connection)
    /// counts once.
    pub(crate) fn mark_down(&self, base: Duration) {
        let now = now_ms();
        if self.is_down_at(now) {
            return;
        }
        let failures = self.failures.fetch_add(1, Ordering::Relaxed);
        let backoff = base.saturating_mul(1 << failures.min(MAX_BACKOFF_DOUBLINGS));
        let until = now.saturating_add(backoff.as_millis().min(u64::MAX as u128) as u64);
        self.down_until.store(until, Ordering::Relaxed);
        warn!(addr = %self.addr, ?backoff, "server marked down");
    }

    /// Clears a down mark after a successful call (a read only when there is none).
    pub(crate) fn mark_up(&self) {
        if self.failures.load(Ordering::Relaxed) != 0 {
            self.failures.store(0, Ordering::Relaxed);
            self.down_until.store(0, Ordering::Relaxed);
            info!(addr = %self.addr, "server is answering again");
        }
    }
}

/// The endpoint [`Cluster::choose`] chose for one try of a call.
///
/// A client of one fixed address borrows its endpoint from the cluster. The
/// other clients share it (`Arc`): a registry may drop it from the list while
/// calls are still on it. Borrowing spares each call a read lock on the
/// cluster's state and a reference count taken and given back: atomic
/// writes to two cache lines that every thread making calls writes too.
/// Measured at 10 connections × 100 calls of 1 KiB with both client threads
/// calling, it was 5 % of the client's calls per second.
pub(crate) enum Chosen<'a> {
    /// The one server of a list that never changes; `counted`: its calls are
    /// counted apart from the client's own count (see [`Chosen::begin`]).
    Only(&'a ServerEndpoint, bool),
    /// A server of a list that may change.
    Listed(Arc<ServerEndpoint>),
}

impl std::ops::Deref for Chosen<'_> {
    type Target = ServerEndpoint;

    fn deref(&self) -> &ServerEndpoint {
        match self {
            Chosen::Only(e, _) => e,
            Chosen::Listed(e) => e,
        }
    }
}

impl Chosen<'_> {
    /// Counts a call in flight on the endpoint until the guard drops, for
    /// the balancer (`least_active`) and the endpoint's stats. The one server
    /// of a fixed one-address client is not counted here unless its
    /// connection is `reused` (shared with other clients): nothing balances
    /// over it, and its count is the client's own
    /// ([`CallsInFlight`](rpc_transport::CallsInFlight), which every call
    /// moves anyway), so a call spares two atomic writes to a line every
    /// calling thread writes (1.6 % of the client's CPU at 10:100:1024).
    pub(crate) fn begin(&self) -> InFlight<'_> {
        match self {
            Chosen::Only(_, false) => InFlight(None),
            Chosen::Only(e, true) => InFlight::on(e),
            Chosen::Listed(e) => InFlight::on(e),
        }
    }
}

/// A call in flight to an endpoint, if it is counted there (see
/// [`Chosen::begin`]).
pub(crate) struct InFlight<'a>(Option<&'a ServerEndpoint>);

impl<'a> InFlight<'a> {
    fn on(endpoint: &'a ServerEndpoint) -> Self {
        endpoint.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(Some(endpoint))
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(e) = self.0 {
            e.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// An endpoint in one service's list, with the weight registered for it.
struct Member {
    endpoint: Arc<ServerEndpoint>,
    weight: u32,
}

impl Node for Member {
    fn addr(&self) -> &str {
        &self.endpoint.addr
    }
    fn weight(&self) -> u32 {
        self.weight
    }
    fn in_flight(&self) -> usize {
        self.endpoint.in_flight()
    }
}

/// The servers of one service and the balancer's state for them.
struct MemberList {
    members: Vec<Member>,
    picker: Picker,
}

/// Everything the client knows at one moment; replaced whole on a change.
#[derive(Default)]
struct Snapshot {
    by_service: HashMap<String, MemberList>,
    /// Servers of every service (a static list).
    any: Option<MemberList>,
    /// Every endpoint, by address.
    endpoints: HashMap<String, Arc<ServerEndpoint>>,
}

impl Snapshot {
    fn list(&self, service: &str) -> Option<&MemberList> {
        if self.by_service.is_empty() {
            return self.any.as_ref();
        }
        self.by_service.get(service).or(self.any.as_ref())
    }
}

/// What [`Client::endpoints`](crate::Client::endpoints) reports per server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointStats {
    /// `host:port`.
    pub addr: String,
    /// Services it is listed for (`*` = every service).
    pub services: Vec<String>,
    /// Calls in flight from this client.
    pub in_flight: usize,
    /// Open connections from this client.
    pub open_connections: usize,
    /// Marked down right now.
    pub down: bool,
}

/// The client's servers. See the module docs.
pub struct Cluster {
    config: ClientConfig,
    /// What every connection is opened with (the config's transport settings
    /// and the TLS connector).
    transport: ClientTransport,
    balancer: Balancer,
    registry: Arc<dyn Registry>,
    describe: String,
    state: RwLock<Snapshot>,
    /// The server of a list that is one address and can never change (a
    /// client built from one address): every call borrows it, with no lock
    /// or reference count taken per call (see [`Chosen`]).
    only: OnceLock<Arc<ServerEndpoint>>,
    /// Dropping it ends the discovery task.
    _stop: oneshot::Sender<()>,
}

impl Cluster {
    /// Sets up the endpoints `discovery` lists now — connecting them unless
    /// `lazy_connect`; it is an error only if every one of them fails — and
    /// follows its changes in the background.
    pub async fn start(
        config: &ClientConfig,
        transport: ClientTransport,
        registry: Arc<dyn Registry>,
        discovery: Discovery,
    ) -> Result<Arc<Cluster>, RpcError> {
        let describe = registry.describe();
        // Asked first: once the source has ended, the list read next is its
        // last (a value sent just before the end is read by `current`).
        let fixed = discovery.is_fixed();
        let instances = discovery.current();
        let mut endpoints = HashMap::new();
        let mut first_error = None;
        let mut connected = 0usize;
        for addr in unique_addrs(&instances) {
            let endpoint = if config.lazy_connect {
                new_endpoint(config, &transport, &addr, true).await?
            } else {
                match new_endpoint(config, &transport, &addr, false).await {
                    Ok(e) => {
                        connected += 1;
                        e
                    }
                    Err(e) if e.is_transport() => {
                        warn!(%addr, error = %e, "server unreachable at start; marked down");
                        first_error.get_or_insert(e);
                        let endpoint = new_endpoint(config, &transport, &addr, true).await?;
                        endpoint.mark_down(config.down_backoff);
                        endpoint
                    }
                    Err(e) => return Err(e),
                }
            };
            endpoints.insert(addr, endpoint);
        }
        if connected == 0 {
            if let Some(e) = first_error {
                return Err(e);
            }
        }
        if instances.is_empty() {
            warn!(registry = %describe, "no server is registered yet");
        }
        let (stop, stopped) = oneshot::channel();
        let cluster = Arc::new(Cluster {
            config: config.clone(),
            transport,
            balancer: config.balancer,
            registry,
            describe,
            state: RwLock::new(Snapshot::default()),
            only: OnceLock::new(),
            _stop: stop,
        });
        let snapshot = cluster.snapshot(&instances, endpoints);
        if fixed && snapshot.by_service.is_empty() {
            if let Some([only]) = snapshot.any.as_ref().map(|l| l.members.as_slice()) {
                let _ = cluster.only.set(only.endpoint.clone());
            }
        }
        *cluster.state.write() = snapshot;
        tokio::spawn(follow(Arc::downgrade(&cluster), discovery, stopped));
        Ok(cluster)
    }

    /// Whether the one server of a fixed one-address client counts its
    /// calls itself: only when its connection is `reused`, whose count is
    /// that of the client that opened it (see [`Chosen::begin`]).
    fn counts_only(&self) -> bool {
        matches!(self.config.connect, crate::Connect::Reused)
    }

    /// The registry this cluster follows.
    pub fn registry(&self) -> &Arc<dyn Registry> {
        &self.registry
    }

    /// The endpoint for the next attempt of a call to `service`; `failed` are
    /// the addresses this call already failed on.
    pub(crate) fn choose(
        &self,
        service: &str,
        hash_key: Option<&str>,
        failed: &[String],
    ) -> Result<Chosen<'_>, RpcError> {
        if let Some(only) = self.only.get() {
            return Ok(Chosen::Only(only, self.counts_only()));
        }
        let state = self.state.read();
        let Some(list) = state.list(service).filter(|l| !l.members.is_empty()) else {
            return Err(RpcError::Connect {
                addr: format!("any server of `{service}`"),
                reason: format!("none is listed in {}", self.describe),
                source: None,
            });
        };
        let members = &list.members;
        if members.len() == 1 {
            return Ok(Chosen::Listed(members[0].endpoint.clone()));
        }
        let now = now_ms();
        let tried = |i: usize| failed.iter().any(|f| *f == members[i].endpoint.addr);
        let picker = &list.picker;
        let index = picker
            .pick(members, hash_key, |i| {
                !members[i].endpoint.is_down_at(now) && !tried(i)
            })
            .or_else(|| picker.pick(members, hash_key, |i| !tried(i)))
            .or_else(|| picker.pick(members, hash_key, |_| true))
            .unwrap_or(0);
        Ok(Chosen::Listed(members[index].endpoint.clone()))
    }

    /// Per-endpoint counters.
    pub fn stats(&self) -> Vec<EndpointStats> {
        let state = self.state.read();
        let mut out: Vec<EndpointStats> = state
            .endpoints
            .values()
            .map(|e| {
                let mut services: Vec<String> = state
                    .by_service
                    .iter()
                    .filter(|(_, l)| l.members.iter().any(|m| Arc::ptr_eq(&m.endpoint, e)))
                    .map(|(s, _)| s.clone())
                    .collect();
                if state
                    .any
                    .as_ref()
                    .is_some_and(|l| l.members.iter().any(|m| Arc::ptr_eq(&m.endpoint, e)))
                {
                    services.push(ANY_SERVICE.into());
                }
                services.sort();
                EndpointStats {
                    addr: e.addr.clone(),
                    services,
                    in_flight: match self.only.get() {
                        // Not counted per endpoint (see `Chosen::begin`).
                        Some(only) if Arc::ptr_eq(only, e) && !self.counts_only() => {
                            self.transport.in_flight.get()
                        }
                        _ => e.in_flight(),
                    },
                    open_connections: e.connections.open_count(),
                    down: e.is_down(),
                }
            })
            .collect();
        out.sort_by(|a, b| a.addr.cmp(&b.addr));
        out
    }

    /// Open connections to every server.
    pub fn open_count(&self) -> usize {
        let state = self.state.read();
        state
            .endpoints
            .values()
            .map(|e| e.connections.open_count())
            .sum()
    }

    /// Closes the connections of every server (they reconnect if used again).
    pub fn close(&self) {
        let state = self.state.read();
        for e in state.endpoints.values() {
            e.connections.close();
        }
    }

    /// Rebuilds the lists for a new set of instances.
    async fn apply(&self, instances: &[ServiceInstance]) {
        let current: HashMap<String, Arc<ServerEndpoint>> = self.state.read().endpoints.clone();
        let mut endpoints = HashMap::new();
        let mut added = Vec::new();
        for addr in unique_addrs(instances) {
            let endpoint = match current.get(&addr) {
                Some(e) => e.clone(),
                None => match new_endpoint(&self.config, &self.transport, &addr, true).await {
                    Ok(e) => {
                        added.push(e.clone());
                        e
                    }
                    Err(e) => {
                        warn!(%addr, error = %e, "cannot set up a newly listed server; skipping it");
                        continue;
                    }
                },
            };
            endpoints.insert(addr, endpoint);
        }
        let removed: Vec<&String> = current
            .keys()
            .filter(|a| !endpoints.contains_key(*a))
            .collect();
        info!(
            registry = %self.describe,
            servers = endpoints.len(),
            added = ?added.iter().map(|e| e.addr.as_str()).collect::<Vec<_>>(),
            removed = ?removed,
            "server list changed"
        );
        let snapshot = self.snapshot(instances, endpoints);
        *self.state.write() = snapshot;
        if !self.config.lazy_connect {
            for endpoint in added {
                tokio::spawn(warm_up(endpoint, self.config.down_backoff));
            }
        }
    }

    /// Groups instances into per-service lists over the given endpoints.
    fn snapshot(
        &self,
        instances: &[ServiceInstance],
        endpoints: HashMap<String, Arc<ServerEndpoint>>,
    ) -> Snapshot {
        let mut grouped: HashMap<String, Vec<(String, u32)>> = HashMap::new();
        for i in instances {
            grouped
                .entry(i.service.clone())
                .or_default()
                .push((i.addr.clone(), i.weight));
        }
        let any_members = grouped.remove(ANY_SERVICE).unwrap_or_default();
        let build = |mut entries: Vec<(String, u32)>| -> MemberList {
            entries.sort();
            entries.dedup_by(|a, b| a.0 == b.0);
            let members: Vec<Member> = entries
                .into_iter()
                .filter_map(|(addr, weight)| {
                    endpoints.get(&addr).map(|e| Member {
                        endpoint: e.clone(),
                        weight: weight.max(1),
                    })
                })
                .collect();
            let picker = Picker::new(self.balancer, &members);
            MemberList { members, picker }
        };
        let by_service = grouped
            .into_iter()
            .map(|(service, mut entries)| {
                // Servers of every service serve this one too.
                entries.extend(any_members.iter().cloned());
                (service, build(entries))
            })
            .collect();
        let any = (!any_members.is_empty()).then(|| build(any_members));
        Snapshot {
            by_service,
            any,
            endpoints,
        }
    }
}

/// Distinct addresses, in order.
fn unique_addrs(instances: &[ServiceInstance]) -> Vec<String> {
    let mut addrs: Vec<String> = instances.iter().map(|i| i.addr.clone()).collect();
    addrs.sort();
    addrs.dedup();
    addrs
}

/// An endpoint for `addr` with the client's connection settings.
async fn new_endpoint(
    config: &ClientConfig,
    transport: &ClientTransport,
    addr: &str,
    lazy: bool,
) -> Result<Arc<ServerEndpoint>, RpcError> {
    let endpoint_config = ClientConfig {
        addr: addr.to_owned(),
        lazy_connect: lazy,
        ..config.clone()
    };
    let connections = Connections::new(&endpoint_config, transport).await?;
    Ok(Arc::new(ServerEndpoint {
        addr: addr.to_owned(),
        connections,
        in_flight: AtomicUsize::new(0),
        down_until: AtomicU64::new(0),
        failures: AtomicU32::new(0),
    }))
}

/// Connects a newly listed server ahead of its first call; an unreachable one
/// is marked down right away.
async fn warm_up(endpoint: Arc<ServerEndpoint>, backoff: Duration) {
    match endpoint.connections.acquire().await {
        Ok(_) => {}
        Err(e) => {
            warn!(addr = %endpoint.addr, error = %e, "newly listed server is unreachable");
            endpoint.mark_down(backoff);
        }
    }
}

/// The discovery task.
async fn follow(
    cluster: Weak<Cluster>,
    mut discovery: Discovery,
    mut stopped: oneshot::Receiver<()>,
) {
    loop {
        let next = tokio::select! {
            _ = &mut stopped => return,
            next = discovery.changed() => next,
        };
        // None: the source ended (a fixed list); the last list stays.
        let Some(instances) = next else { return };
        let Some(cluster) = cluster.upgrade() else {
            return;
        };
        cluster.apply(&instances).await;
    }
}

/// True for a failure that says something about the server rather than the
/// call: it marks the endpoint down and the call may be retried elsewhere.
/// Among them, the answers that prove the server did not run the call
/// ([`RpcError::server_did_not_run`]: shutting down, too many connections).
pub(crate) fn is_server_failure(e: &RpcError) -> bool {
    e.is_transport() || e.server_did_not_run()
}

#[cfg(test)]
mod tests {
    use rpc_registry::StaticRegistry;

    use super::*;

    fn lazy() -> ClientConfig {
        ClientConfig {
            lazy_connect: true,
            ..ClientConfig::default()
        }
    }

    #[tokio::test]
    async fn a_fixed_single_server_is_borrowed_and_a_live_list_followed() {
        let config = lazy();
        let one = || vec![ServiceInstance::any("127.0.0.1:1")];
        let registry: Arc<dyn Registry> = Arc::new(StaticRegistry::new(one()));
        let fixed = Cluster::start(
            &config,
            config.client_transport(),
            registry,
            Discovery::fixed(one()),
        )
        .await
        .unwrap();
        let chosen = fixed.choose("S", None, &[]).unwrap();
        assert!(matches!(chosen, Chosen::Only(_, false)));
        assert_eq!(chosen.addr(), "127.0.0.1:1");

        // One server of a list that may change: shared per call, and the
        // change is followed.
        let registry = StaticRegistry::new(one());
        let discovery = registry.discover(None).await.unwrap();
        let live = Cluster::start(
            &config,
            config.client_transport(),
            Arc::new(registry.clone()),
            discovery,
        )
        .await
        .unwrap();
        assert!(matches!(
            live.choose("S", None, &[]).unwrap(),
            Chosen::Listed(_)
        ));
        registry.set(vec![ServiceInstance::any("127.0.0.1:2")]);
        let mut moved = false;
        for _ in 0..200 {
            if live.choose("S", None, &[]).unwrap().addr() == "127.0.0.1:2" {
                moved = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(moved, "the new list was not followed");
    }
}
