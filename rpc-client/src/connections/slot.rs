//! [`Slot`]: one lazily (re)connected connection.
//!
//! The fast path is a read lock and an `Arc` clone. Only when the connection is
//! missing or broken does a caller take the slot's async connect lock, re-check
//! (someone else may have reconnected meanwhile) and connect.

use std::sync::Arc;

use parking_lot::RwLock;
use rpc_core::RpcError;
use rpc_transport::{connect, ClientTransport, Connection};

pub(crate) struct Slot {
    addr: String,
    transport: ClientTransport,
    conn: RwLock<Option<Arc<Connection>>>,
    connecting: tokio::sync::Mutex<()>,
}

impl Slot {
    pub fn new(addr: &str, transport: &ClientTransport) -> Slot {
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

    /// The open connection if its next write is gathering (some frames
    /// queued, fewer than `cap`), so that one more call can join it; one read
    /// lock, and an `Arc` clone only when it can.
    pub fn joinable(&self, cap: usize) -> Option<Arc<Connection>> {
        let conn = self.conn.read();
        let c = conn.as_ref()?;
        // `queued_frames` is `usize::MAX` while the write buffer is full.
        let queued = c.queued_frames();
        (queued > 0 && queued < cap && c.is_open()).then(|| c.clone())
    }

    /// The open connection if it can take a call now: its write buffer not
    /// full (a peer that does not read).
    pub fn usable(&self) -> Option<Arc<Connection>> {
        self.current().filter(|c| c.queued_frames() != usize::MAX)
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
