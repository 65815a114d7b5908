//! The etcd registry against a real etcd: registration with a lease, graceful
//! deregistration, expiry of a crashed server's entries, live discovery, lease
//! loss, malformed entries, and an unreachable etcd.
//!
//! Needs the `etcd` feature and `BRISK_TEST_ETCD=host:port` (`.ci/run` starts an
//! etcd and sets it); without the variable each test says so and passes.
#![cfg(feature = "etcd")]

use std::time::{Duration, Instant};

use rpc_registry::{EtcdOptions, EtcdRegistry, Registry, ServiceInstance};

fn etcd_endpoint(test: &str) -> Option<String> {
    match std::env::var("BRISK_TEST_ETCD") {
        Ok(e) if !e.is_empty() => Some(e.trim_start_matches("http://").to_owned()),
        _ => {
            eprintln!("skipping {test}: BRISK_TEST_ETCD is not set (host:port of an etcd)");
            None
        }
    }
}

/// Options with a root of its own per test so tests never see each other's keys.
fn options(endpoint: &str, test: &str) -> EtcdOptions {
    EtcdOptions::new([endpoint])
        .with_root(&format!("/brisk-test/{}-{test}", std::process::id()))
        .with_ttl(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(2))
}

/// Polls `check` every 50 ms until it holds or `within` passes.
async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn register_discover_and_deregister_gracefully() {
    let Some(ep) = etcd_endpoint("register_discover_and_deregister_gracefully") else {
        return;
    };
    let registry = EtcdRegistry::connect(options(&ep, "graceful"))
        .await
        .unwrap();
    let mut discovery = registry.discover(Some("Hello")).await.unwrap();
    assert!(discovery.current().is_empty());

    let a = ServiceInstance::new("Hello", "127.0.0.1:7001").with_weight(300);
    let other = ServiceInstance::new("Other", "127.0.0.1:7001");
    let registration = registry
        .register(vec![a.clone(), other.clone()])
        .await
        .unwrap();
    assert_eq!(registration.instances().len(), 2);

    // The value is brisk's JSON under <root>/services/<Service>/<addr>.
    let mut kv = registry.client().clone();
    let key = format!("{}/services/Hello/127.0.0.1:7001", registry.options().root);
    let got = kv.get(key.as_str(), None).await.unwrap();
    assert_eq!(
        got.kvs()[0].value_str().unwrap(),
        r#"{"addr":"127.0.0.1:7001","weight":300}"#
    );
    assert_ne!(got.kvs()[0].lease(), 0, "the entry must hang on a lease");

    // The watch sees it, filtered to the service.
    let seen = tokio::time::timeout(Duration::from_secs(5), discovery.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(*seen, vec![a.clone()]);
    assert_eq!(registry.list(None).await.unwrap().len(), 2);

    // Graceful: gone at once (revoked), not after the TTL.
    registration.deregister().await.unwrap();
    assert!(registry.list(None).await.unwrap().is_empty());
    let gone = tokio::time::timeout(Duration::from_secs(5), discovery.changed())
        .await
        .unwrap()
        .unwrap();
    assert!(gone.is_empty());
}

#[tokio::test]
async fn a_dropped_registration_expires_with_its_lease() {
    let Some(ep) = etcd_endpoint("a_dropped_registration_expires_with_its_lease") else {
        return;
    };
    let registry = EtcdRegistry::connect(options(&ep, "crash")).await.unwrap();
    let registration = registry
        .register(vec![ServiceInstance::new("Hello", "127.0.0.1:7002")])
        .await
        .unwrap();
    // Kept alive well past the TTL while the registration lives.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(registry.list(Some("Hello")).await.unwrap().len(), 1);

    // A crash: no revoke. Still listed right after, gone once the TTL has run out.
    let dropped = Instant::now();
    drop(registration);
    assert_eq!(registry.list(Some("Hello")).await.unwrap().len(), 1);
    let expired = eventually(Duration::from_secs(8), || async {
        registry.list(Some("Hello")).await.unwrap().is_empty()
    })
    .await;
    assert!(expired, "the entry outlived its lease");
    assert!(
        dropped.elapsed() >= Duration::from_millis(900),
        "removed too early for a lease expiry: {:?}",
        dropped.elapsed()
    );
}

#[tokio::test]
async fn a_lost_lease_is_replaced() {
    let Some(ep) = etcd_endpoint("a_lost_lease_is_replaced") else {
        return;
    };
    let registry = EtcdRegistry::connect(options(&ep, "lost")).await.unwrap();
    let _registration = registry
        .register(vec![ServiceInstance::new("Hello", "127.0.0.1:7003")])
        .await
        .unwrap();
    let mut kv = registry.client().clone();
    let prefix = format!("{}/services/", registry.options().root);
    let got = kv
        .get(
            prefix.as_str(),
            Some(etcd_client::GetOptions::new().with_prefix()),
        )
        .await
        .unwrap();
    let lease = got.kvs()[0].lease();
    // Someone (an operator, an etcd restart) kills the lease: the entry goes...
    kv.lease_revoke(lease).await.unwrap();
    assert!(registry.list(None).await.unwrap().is_empty());
    // ...and the keep-alive task notices and registers again under a new lease.
    let back = eventually(Duration::from_secs(6), || async {
        registry.list(None).await.unwrap().len() == 1
    })
    .await;
    assert!(
        back,
        "the registration did not come back after losing its lease"
    );
}

#[tokio::test]
async fn discovery_skips_malformed_entries_and_follows_changes() {
    let Some(ep) = etcd_endpoint("discovery_skips_malformed_entries_and_follows_changes") else {
        return;
    };
    let registry = EtcdRegistry::connect(options(&ep, "malformed"))
        .await
        .unwrap();
    let root = registry.options().root.clone();
    let mut kv = registry.client().clone();
    kv.put(format!("{root}/services/Hello/bad:1"), "not json", None)
        .await
        .unwrap();
    kv.put(
        format!("{root}/services/Hello/good:1"),
        r#"{"addr":"good:1","weight":7}"#,
        None,
    )
    .await
    .unwrap();
    let mut discovery = registry.discover(None).await.unwrap();
    let now = discovery.current();
    assert_eq!(now.len(), 1);
    assert_eq!((now[0].addr.as_str(), now[0].weight), ("good:1", 7));

    kv.put(
        format!("{root}/services/Hello/good:2"),
        r#"{"addr":"good:2"}"#,
        None,
    )
    .await
    .unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), discovery.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.len(), 2);
    kv.delete(format!("{root}/services/Hello/good:1"), None)
        .await
        .unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), discovery.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].addr, "good:2");
    kv.delete(
        format!("{root}/services/"),
        Some(etcd_client::DeleteOptions::new().with_prefix()),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn an_unreachable_etcd_is_a_bounded_error() {
    // Needs no etcd: a port nobody listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let start = Instant::now();
    let err = rpc_registry::connect(&format!("etcd://127.0.0.1:{port}/brisk?timeout_ms=500"))
        .await
        .err()
        .expect("no etcd there");
    let elapsed = start.elapsed();
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("etcd://127.0.0.1:{port}/brisk")),
        "{text}"
    );
}
