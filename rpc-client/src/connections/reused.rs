//! [`ReusedConnection`]: one connection per address for the whole process.
//!
//! A process-wide registry maps an address to a weakly held [`Slot`]; every client
//! of that address holds a strong reference. The connection is therefore shared
//! by all clients and services on the address and closes when the last client is
//! dropped (jkrpc's reference-counted `single` connection). The first client's
//! transport settings are the ones used.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Weak};

use parking_lot::Mutex;
use rpc_core::RpcError;
use rpc_transport::{ClientTransport, Connection};

use super::slot::Slot;
use crate::ClientConfig;

static REGISTRY: LazyLock<Mutex<HashMap<String, Weak<SharedSlot>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

struct SharedSlot(Slot);

impl Drop for SharedSlot {
    fn drop(&mut self) {
        self.0.close("last client of the reused connection dropped");
    }
}

/// A client's reference to its address's process-wide connection.
pub struct ReusedConnection {
    slot: Arc<SharedSlot>,
}

impl ReusedConnection {
    /// Joins (or creates) the shared connection of `config.addr`, connecting now
    /// unless `lazy_connect`.
    pub async fn get(
        config: &ClientConfig,
        transport: &ClientTransport,
    ) -> Result<ReusedConnection, RpcError> {
        let slot = {
            let mut registry = REGISTRY.lock();
            registry.retain(|_, w| w.strong_count() > 0);
            match registry.get(&config.addr).and_then(Weak::upgrade) {
                Some(s) => s,
                None => {
                    let s = Arc::new(SharedSlot(Slot::new(&config.addr, transport)));
                    registry.insert(config.addr.clone(), Arc::downgrade(&s));
                    s
                }
            }
        };
        if !config.lazy_connect {
            slot.0.get().await?;
        }
        Ok(ReusedConnection { slot })
    }

    /// The shared connection, reconnected if it was found broken.
    pub async fn acquire(&self) -> Result<Arc<Connection>, RpcError> {
        self.slot.0.get().await
    }

    /// The shared connection if it is open now.
    pub fn ready(&self) -> Option<Arc<Connection>> {
        self.slot.0.current()
    }

    /// 1 when the shared connection is open.
    pub fn open_count(&self) -> usize {
        usize::from(self.slot.0.is_open())
    }

    /// Clients currently sharing this connection.
    pub fn share_count(&self) -> usize {
        Arc::strong_count(&self.slot)
    }
}
