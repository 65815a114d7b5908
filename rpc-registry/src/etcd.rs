//! [`EtcdRegistry`]: brisk's registry on etcd v3 (cargo feature `etcd`).
//!
//! **Registering.** A server grants one lease with the configured TTL, puts one
//! key per service under it (`<root>/services/<Service>/<host:port>`, value
//! `{"addr":…,"weight":…}`) and a background task refreshes the lease every
//! TTL/3. Graceful deregistration revokes the lease, which deletes every key at
//! once; a crashed server (or a dropped [`Registration`]) stops refreshing and
//! etcd deletes the keys when the TTL runs out. If the lease is lost anyway —
//! etcd was unreachable for longer than the TTL — the task grants a new one and
//! puts the keys again as soon as etcd answers.
//!
//! **Discovering.** A client reads the prefix (all services, or one) and then
//! watches it from the next revision, publishing a new [`Snapshot`](crate::Snapshot)
//! on every change. When the watch breaks (etcd restarted, compaction, network)
//! the task keeps the last snapshot — losing etcd must not make a client forget
//! servers that are still answering — re-reads the prefix with back-off and
//! watches again. The task ends when every [`Discovery`] is dropped.
//!
//! **Bounded.** Every request is bounded by the URL's `timeout_ms`, connecting
//! included: an unreachable etcd is an error naming it, never a hang. Everything
//! read from etcd is parsed defensively; a malformed entry is logged and skipped.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Client, ConnectOptions, EventType, GetOptions, LeaseKeepAliveStream, LeaseKeeper, PutOptions,
    WatchOptions, WatchStream, Watcher,
};
use rpc_core::RpcError;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::discovery::normalize;
use crate::instance::{
    instance_key, instance_value, parse_instance, service_prefix, services_prefix,
};
use crate::{Discovery, EtcdOptions, Registration, Registry, ServiceInstance, StopSignal};

/// A connection to an etcd cluster used as a brisk registry. Cheap to clone.
#[derive(Clone)]
pub struct EtcdRegistry {
    client: Client,
    options: EtcdOptions,
}

impl EtcdRegistry {
    /// Connects and checks that etcd answers, within `options.timeout`.
    pub async fn connect(options: EtcdOptions) -> Result<EtcdRegistry, RpcError> {
        if options.endpoints.is_empty() {
            return Err(RpcError::config("registry", "no etcd endpoint given"));
        }
        let endpoints: Vec<String> = options
            .endpoints
            .iter()
            .map(|e| format!("http://{e}"))
            .collect();
        let connect_options = ConnectOptions::new()
            .with_connect_timeout(options.timeout)
            // HTTP/2 pings detect a dead etcd under a quiet watch or keep-alive stream.
            .with_keep_alive(Duration::from_secs(5), options.timeout)
            .with_keep_alive_while_idle(true);
        let client = bounded(
            &options,
            "connecting to",
            Client::connect(endpoints, Some(connect_options)),
        )
        .await?;
        let registry = EtcdRegistry { client, options };
        // The client connects lazily: make one real request so that an unreachable
        // etcd fails here, at start, and not at the first registration.
        let prefix = services_prefix(&registry.options.root);
        let mut kv = registry.client.clone();
        let probe = kv.get(
            prefix,
            Some(GetOptions::new().with_prefix().with_count_only()),
        );
        match tokio::time::timeout(registry.options.timeout, probe).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(failed(
                    &registry.options,
                    "reaching",
                    format!("{e} (is etcd running and reachable there?)"),
                ))
            }
            Err(_) => return Err(timed_out(&registry.options, "reaching")),
        }
        debug!(registry = %registry.options.short_url(), "etcd registry connected");
        Ok(registry)
    }

    /// The options this registry was connected with.
    pub fn options(&self) -> &EtcdOptions {
        &self.options
    }

    /// The underlying etcd client (for inspection; brisk's keys are under
    /// `<root>/services/`).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The instances registered right now (one read, no watch).
    pub async fn list(&self, service: Option<&str>) -> Result<Vec<ServiceInstance>, RpcError> {
        let prefix = self.prefix(service);
        let (entries, _) = load(&self.client, &self.options, &prefix).await?;
        Ok(normalize(entries.into_values().collect()).to_vec())
    }

    fn prefix(&self, service: Option<&str>) -> String {
        match service {
            Some(s) => service_prefix(&self.options.root, s),
            None => services_prefix(&self.options.root),
        }
    }
}

#[async_trait]
impl Registry for EtcdRegistry {
    async fn register(&self, instances: Vec<ServiceInstance>) -> Result<Registration, RpcError> {
        let lease = put_under_new_lease(&self.client, &self.options, &instances).await?;
        info!(
            registry = %self.options.short_url(),
            lease,
            ttl_s = self.options.ttl_secs(),
            count = instances.len(),
            "registered in etcd"
        );
        let (client, options, keys) =
            (self.client.clone(), self.options.clone(), instances.clone());
        Ok(Registration::spawn(
            instances,
            self.describe(),
            move |stop| keep_alive(client, options, lease, keys, stop),
        ))
    }

    async fn discover(&self, service: Option<&str>) -> Result<Discovery, RpcError> {
        let prefix = self.prefix(service);
        let (entries, revision) = load(&self.client, &self.options, &prefix).await?;
        let (tx, rx) = watch::channel(normalize(entries.values().cloned().collect()));
        tokio::spawn(watch_prefix(
            self.client.clone(),
            self.options.clone(),
            prefix,
            entries,
            revision,
            tx,
        ));
        Ok(Discovery::new(rx, None))
    }

    fn describe(&self) -> String {
        self.options.short_url()
    }
}

/// Runs one etcd request within the registry's timeout, turning both failure
/// kinds into an error that names the registry.
async fn bounded<T, F>(options: &EtcdOptions, what: &str, request: F) -> Result<T, RpcError>
where
    F: Future<Output = Result<T, etcd_client::Error>>,
{
    match tokio::time::timeout(options.timeout, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(RpcError::Io {
            context: format!("{what} the registry {}", options.short_url()),
            reason: e.to_string(),
            source: Some(rpc_core::Cause::new(e)),
        }),
        Err(_) => Err(timed_out(options, what)),
    }
}

fn failed(options: &EtcdOptions, what: &str, reason: String) -> RpcError {
    RpcError::io_msg(
        format!("{what} the registry {}", options.short_url()),
        reason,
    )
}

fn timed_out(options: &EtcdOptions, what: &str) -> RpcError {
    failed(
        options,
        what,
        format!(
            "no answer within {:?}; is etcd running and reachable there? \
             (the bound is `timeout_ms` in the registry URL)",
            options.timeout
        ),
    )
}

/// Grants a lease and puts every instance's key under it. On a failed put the
/// lease is revoked (best effort) so no partial registration lingers.
async fn put_under_new_lease(
    client: &Client,
    options: &EtcdOptions,
    instances: &[ServiceInstance],
) -> Result<i64, RpcError> {
    let mut c = client.clone();
    let grant = bounded(
        options,
        "granting a lease from",
        c.lease_grant(options.ttl_secs(), None),
    )
    .await?;
    let lease = grant.id();
    for instance in instances {
        let key = instance_key(&options.root, instance);
        let put = c.put(
            key,
            instance_value(instance),
            Some(PutOptions::new().with_lease(lease)),
        );
        if let Err(e) = bounded(options, "registering in", put).await {
            let _ = bounded(options, "revoking a lease in", c.lease_revoke(lease)).await;
            return Err(e);
        }
    }
    Ok(lease)
}

/// What one pass of the keep-alive loop ended with.
enum Tick {
    Stop { graceful: bool },
    Alive,
    LeaseLost,
    Failed(RpcError),
}

/// The registration task: refresh the lease every TTL/3 until stopped.
async fn keep_alive(
    client: Client,
    options: EtcdOptions,
    mut lease: i64,
    instances: Vec<ServiceInstance>,
    mut stop: StopSignal,
) -> Result<(), RpcError> {
    let period = (options.ttl / 3).max(Duration::from_millis(300));
    let mut stream: Option<(LeaseKeeper, LeaseKeepAliveStream)> = None;
    loop {
        let tick = tokio::select! {
            graceful = stop.requested() => Tick::Stop { graceful },
            outcome = async {
                tokio::time::sleep(period).await;
                refresh(&client, &options, lease, &mut stream).await
            } => match outcome {
                Ok(true) => Tick::Alive,
                Ok(false) => Tick::LeaseLost,
                Err(e) => Tick::Failed(e),
            },
        };
        match tick {
            Tick::Stop { graceful } => {
                drop(stream);
                if !graceful {
                    return Ok(());
                }
                let mut c = client.clone();
                bounded(&options, "revoking the lease in", c.lease_revoke(lease)).await?;
                info!(registry = %options.short_url(), lease, "deregistered from etcd");
                return Ok(());
            }
            Tick::Alive => {}
            Tick::LeaseLost => {
                stream = None;
                warn!(registry = %options.short_url(), lease, "lease expired; registering again");
                match put_under_new_lease(&client, &options, &instances).await {
                    Ok(new) => lease = new,
                    Err(e) => warn!(error = %e, "registering again failed; retrying"),
                }
            }
            Tick::Failed(e) => {
                stream = None;
                warn!(error = %e, lease, "lease keep-alive failed; retrying");
            }
        }
    }
}

/// One keep-alive round trip. `Ok(false)` when etcd says the lease is gone.
async fn refresh(
    client: &Client,
    options: &EtcdOptions,
    lease: i64,
    stream: &mut Option<(LeaseKeeper, LeaseKeepAliveStream)>,
) -> Result<bool, RpcError> {
    const WHAT: &str = "keeping a lease alive in";
    let (keeper, responses) = match stream {
        Some(s) => s,
        None => {
            // Opening the stream is itself one keep-alive round trip.
            let mut c = client.clone();
            return match tokio::time::timeout(options.timeout, c.lease_keep_alive(lease)).await {
                Ok(Ok(opened)) => {
                    *stream = Some(opened);
                    Ok(true)
                }
                // The client reports a TTL of 0 on the first answer this way.
                Ok(Err(etcd_client::Error::LeaseKeepAliveError(reason)))
                    if reason.contains("not found") =>
                {
                    Ok(false)
                }
                Ok(Err(e)) => Err(failed(options, WHAT, e.to_string())),
                Err(_) => Err(timed_out(options, WHAT)),
            };
        }
    };
    bounded(options, WHAT, keeper.keep_alive()).await?;
    match bounded(options, WHAT, responses.message()).await? {
        Some(response) => Ok(response.ttl() > 0),
        None => Err(failed(options, WHAT, "the keep-alive stream ended".into())),
    }
}

type Entries = HashMap<Vec<u8>, ServiceInstance>;

/// Reads every instance under `prefix` and the revision it was read at.
async fn load(
    client: &Client,
    options: &EtcdOptions,
    prefix: &str,
) -> Result<(Entries, i64), RpcError> {
    let mut c = client.clone();
    let response = bounded(
        options,
        "reading from",
        c.get(prefix, Some(GetOptions::new().with_prefix())),
    )
    .await?;
    let revision = response.header().map(|h| h.revision()).unwrap_or(0);
    let mut entries = Entries::new();
    for kv in response.kvs() {
        match parse_instance(&options.root, kv.key(), kv.value()) {
            Ok(instance) => {
                entries.insert(kv.key().to_vec(), instance);
            }
            Err(reason) => warn!(%reason, "skipping a malformed registry entry"),
        }
    }
    Ok((entries, revision))
}

/// Opens a watch on `prefix` from `revision`. The etcd client asserts on the
/// server's first answer; a spawned task turns such a panic into an error
/// instead of ending the discovery.
async fn open_watch(
    client: &Client,
    options: &EtcdOptions,
    prefix: &str,
    revision: i64,
) -> Result<(Watcher, WatchStream), RpcError> {
    let mut c = client.clone();
    let prefix = prefix.to_owned();
    let watch_options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(revision);
    let mut task = tokio::spawn(async move { c.watch(prefix, Some(watch_options)).await });
    match tokio::time::timeout(options.timeout, &mut task).await {
        Ok(Ok(Ok(opened))) => Ok(opened),
        Ok(Ok(Err(e))) => Err(failed(options, "watching", e.to_string())),
        Ok(Err(panicked)) => Err(failed(options, "watching", panicked.to_string())),
        Err(_) => {
            task.abort();
            Err(timed_out(options, "watching"))
        }
    }
}

/// The discovery task: keep `tx` in step with the keys under `prefix`.
async fn watch_prefix(
    client: Client,
    options: EtcdOptions,
    prefix: String,
    mut entries: Entries,
    mut revision: i64,
    tx: watch::Sender<crate::Snapshot>,
) {
    const MIN_BACKOFF: Duration = Duration::from_millis(100);
    const MAX_BACKOFF: Duration = Duration::from_secs(5);
    let publish = |entries: &Entries| {
        let snapshot = normalize(entries.values().cloned().collect());
        tx.send_if_modified(|current| {
            if *current == snapshot {
                false
            } else {
                *current = snapshot;
                true
            }
        });
    };
    let mut backoff = MIN_BACKOFF;
    // After the first pass every (re)watch starts with a fresh read.
    let mut fresh = true;
    loop {
        if !fresh {
            // Events may have been missed: wait a little, then read everything again.
            tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            match load(&client, &options, &prefix).await {
                Ok((reread, rev)) => {
                    entries = reread;
                    revision = rev;
                    publish(&entries);
                }
                Err(e) => {
                    warn!(error = %e, "re-reading the registry failed; keeping the last known servers");
                    continue;
                }
            }
        }
        fresh = false;
        let opened = tokio::select! {
            _ = tx.closed() => return,
            opened = open_watch(&client, &options, &prefix, revision + 1) => opened,
        };
        let (mut watcher, mut stream) = match opened {
            Ok(w) => w,
            Err(e) => {
                warn!(error = %e, "watching the registry failed; keeping the last known servers");
                continue;
            }
        };
        loop {
            let message = tokio::select! {
                _ = tx.closed() => {
                    let _ = tokio::time::timeout(options.timeout, watcher.cancel()).await;
                    return;
                }
                message = stream.message() => message,
            };
            let response = match message {
                Ok(Some(r)) => r,
                Ok(None) => {
                    warn!(registry = %options.short_url(), "registry watch ended; re-reading");
                    break;
                }
                Err(e) => {
                    warn!(error = %e, "registry watch failed; re-reading");
                    break;
                }
            };
            if response.canceled() {
                warn!(
                    reason = response.cancel_reason(),
                    compact_revision = response.compact_revision(),
                    "registry watch cancelled; re-reading"
                );
                break;
            }
            backoff = MIN_BACKOFF;
            let mut changed = false;
            for event in response.events() {
                let Some(kv) = event.kv() else { continue };
                revision = revision.max(kv.mod_revision());
                match event.event_type() {
                    EventType::Put => match parse_instance(&options.root, kv.key(), kv.value()) {
                        Ok(instance) => {
                            changed |= entries.insert(kv.key().to_vec(), instance.clone())
                                != Some(instance);
                        }
                        Err(reason) => {
                            warn!(%reason, "skipping a malformed registry entry");
                            changed |= entries.remove(kv.key()).is_some();
                        }
                    },
                    EventType::Delete => changed |= entries.remove(kv.key()).is_some(),
                }
            }
            if changed {
                debug!(servers = entries.len(), "registry changed");
                publish(&entries);
            }
        }
    }
}
