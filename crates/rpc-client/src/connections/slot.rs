//! [`Slot`]: one lazily (re)connected connection.
//!
//! The fast path is a read lock and an `Arc` clone. Only when the connection is
//! missing or broken does a caller take the slot's async connect lock, re-check
//! (someone else may have reconnected meanwhile) and connect.

use std::sync::Arc;

use parking_lot::RwLock;
use rpc_core::RpcError;
use rpc_transport::{connect, Connection, TransportConfig};

pub(crate) struct Slot {
    addr: String,
    transport: TransportConfig,
    conn: RwLock<Option<Arc<Connection>>>,
    connecting: tokio::sync::Mutex<()>,
}

impl Slot {
    pub fn new(addr: &str, transport: &TransportConfig) -> Slot {
        Slot {
            addr: addr.to_owned(),
            transport: transport.clone(),
            conn: RwLock::new(None),
            connecting: tokio::sync::Mutex::new(()),
        }
    }

    /// The open connection, if there is one.
    pub fn current(&self) -> Option<Arc<Connection>> {
        self.conn.read().as_ref().filter(|c| c.is_open()).cloned()
    }

    /// The open connection, connecting first if needed.
    pub async fn get(&self) -> Result<Arc<Connection>, RpcError> {
        if let Some(c) = self.current() {
            return Ok(c);
        }
        let _connecting = self.connecting.lock().await;
        if let Some(c) = self.current() {
            return Ok(c);
        }
        let conn = connect(&self.addr, &self.transport).await?;
        *self.conn.write() = Some(conn.clone());
        Ok(conn)
    }

    /// Frames waiting for this slot's connection's next write (0 without a
    /// connection, `usize::MAX` while its write buffer is full).
    pub fn queued_frames(&self) -> usize {
        self.conn.read().as_ref().map_or(0, |c| c.queued_frames())
    }

    pub fn is_open(&self) -> bool {
        self.current().is_some()
    }

    pub fn close(&self, reason: &str) {
        if let Some(c) = self.conn.write().take() {
            c.close(reason);
        }
    }
}
