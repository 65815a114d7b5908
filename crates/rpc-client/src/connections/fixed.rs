//! [`FixedConnections`]: `n` multiplexed connections picked round-robin.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rpc_core::RpcError;
use rpc_transport::Connection;

use super::slot::Slot;
use crate::ClientConfig;

/// `connections` connections to one address, created up front unless
/// `lazy_connect`, each shared by many concurrent calls.
pub struct FixedConnections {
    slots: Vec<Slot>,
    next: AtomicUsize,
}

impl FixedConnections {
    /// Creates the slots and, unless `lazy_connect`, connects them all now (the
    /// first failure is returned: a server that cannot be reached is an error at start).
    pub async fn new(config: &ClientConfig) -> Result<FixedConnections, RpcError> {
        let slots: Vec<Slot> = (0..config.connections)
            .map(|_| Slot::new(&config.addr, &config.transport))
            .collect();
        if !config.lazy_connect {
            for slot in &slots {
                slot.get().await?;
            }
        }
        Ok(FixedConnections {
            slots,
            next: AtomicUsize::new(0),
        })
    }

    /// The next connection in round-robin order, reconnected if broken.
    pub async fn acquire(&self) -> Result<Arc<Connection>, RpcError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        self.slots[i].get().await
    }

    /// The next connection in round-robin order if it is open now.
    pub fn ready(&self) -> Option<Arc<Connection>> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        self.slots[i].current()
    }

    /// Connections currently open.
    pub fn open_count(&self) -> usize {
        self.slots.iter().filter(|s| s.is_open()).count()
    }

    /// Closes every connection (they reconnect if used again).
    pub fn close(&self) {
        for s in &self.slots {
            s.close("client closed");
        }
    }
}
