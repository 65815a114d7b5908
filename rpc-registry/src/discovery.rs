//! [`Discovery`]: a live view of the instances a client may call.
//!
//! A registry publishes whole snapshots (sorted, deduplicated) rather than
//! add/remove events: a consumer that misses an intermediate state still ends up
//! right, and rebuilding a client's server set from a snapshot is simple and
//! cheap at the sizes involved (tens of servers, not millions).

use std::sync::Arc;

use tokio::sync::watch;

use crate::ServiceInstance;

/// A set of instances at one moment, sorted by service then address.
pub type Snapshot = Arc<Vec<ServiceInstance>>;

/// The instances of one service (or of all), now and as they change.
///
/// Dropping the last `Discovery` of a registry watch lets the registry stop watching.
pub struct Discovery {
    rx: watch::Receiver<Snapshot>,
    filter: Option<String>,
}

impl Discovery {
    /// A discovery fed by `rx`; when `service` is set only instances serving it
    /// (including [`ANY_SERVICE`](crate::ANY_SERVICE) ones) are shown.
    pub fn new(rx: watch::Receiver<Snapshot>, service: Option<&str>) -> Discovery {
        Discovery {
            rx,
            filter: service.map(str::to_owned),
        }
    }

    /// A discovery that never changes.
    pub fn fixed(instances: Vec<ServiceInstance>) -> Discovery {
        let (_tx, rx) = watch::channel(normalize(instances));
        Discovery::new(rx, None)
    }

    /// True when the instances can no longer change: the source has ended
    /// (a [`fixed`](Discovery::fixed) list, or a registry that was dropped).
    /// Ask before reading [`current`](Discovery::current): a list sent just
    /// before the end may not have been read yet, and `current` returns it.
    pub fn is_fixed(&self) -> bool {
        self.rx.has_changed().is_err()
    }

    /// The instances right now.
    pub fn current(&self) -> Snapshot {
        let snapshot = self.rx.borrow().clone();
        self.filtered(snapshot)
    }

    /// Waits for the next change and returns the new instances; `None` once the
    /// source has ended (a fixed list, or the registry was dropped) — the last
    /// snapshot then stays valid.
    pub async fn changed(&mut self) -> Option<Snapshot> {
        self.rx.changed().await.ok()?;
        let snapshot = self.rx.borrow_and_update().clone();
        Some(self.filtered(snapshot))
    }

    fn filtered(&self, snapshot: Snapshot) -> Snapshot {
        match &self.filter {
            Some(service) if snapshot.iter().any(|i| !i.serves(service)) => Arc::new(
                snapshot
                    .iter()
                    .filter(|i| i.serves(service))
                    .cloned()
                    .collect(),
            ),
            _ => snapshot,
        }
    }
}

/// Sorts and deduplicates instances into a snapshot.
pub(crate) fn normalize(mut instances: Vec<ServiceInstance>) -> Snapshot {
    instances.sort();
    instances.dedup_by(|a, b| a.service == b.service && a.addr == b.addr);
    Arc::new(instances)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn filters_and_ends() {
        let (tx, rx) = watch::channel(normalize(vec![
            ServiceInstance::new("B", "b:1"),
            ServiceInstance::new("A", "a:1"),
            ServiceInstance::any("c:1"),
        ]));
        let mut d = Discovery::new(rx, Some("A"));
        assert!(!d.is_fixed(), "its sender is alive");
        let addrs: Vec<_> = d.current().iter().map(|i| i.addr.clone()).collect();
        assert_eq!(addrs, ["c:1", "a:1"]);
        tx.send(normalize(vec![ServiceInstance::new("A", "a:2")]))
            .unwrap();
        assert_eq!(d.changed().await.unwrap()[0].addr, "a:2");
        drop(tx);
        assert!(d.is_fixed());
        assert!(d.changed().await.is_none());
        assert_eq!(d.current()[0].addr, "a:2");
    }

    #[tokio::test]
    async fn fixed_never_changes() {
        let mut d = Discovery::fixed(vec![
            ServiceInstance::any("a:1"),
            ServiceInstance::any("a:1"),
        ]);
        assert_eq!(d.current().len(), 1);
        assert!(d.is_fixed());
        assert!(d.changed().await.is_none());
    }
}
