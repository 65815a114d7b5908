//! The three ways a client holds connections to one server address.
//!
//! | type | what | when it shines |
//! |------|------|----------------|
//! | [`ReusedConnection`] | one multiplexed connection per address for the whole process, shared by every client and reference counted | many clients, little traffic |
//! | [`PooledConnections`] | an elastic pool `min..=max`, a connection validated on borrow and held for the write (or until the response) | callers that want a connection to themselves |
//! | [`FixedConnections`] | `n` multiplexed connections, picked round-robin (a burst shares one write, a light load stays on one) | throughput (jkrpc's default) |
//!
//! All three reconnect lazily: a connection found broken when a call wants it is
//! replaced right there, under a per-slot async lock so that a burst of callers
//! triggers one connect, not a hundred. [`Connections`] is an enum rather than a
//! trait object so that acquiring a connection costs no allocation or dynamic call.

mod fixed;
mod pooled;
mod reused;
mod slot;

use std::sync::Arc;

use rpc_core::RpcError;
use rpc_transport::{ClientTransport, Connection};

pub use fixed::FixedConnections;
pub use pooled::{PooledConnections, PooledLease};
pub use reused::ReusedConnection;

use crate::{ClientConfig, Connect};

/// A connection handed to one call.
pub enum Lease {
    /// A shared multiplexed connection (reused, fixed).
    Shared(Arc<Connection>),
    /// A connection borrowed from a pool; returned when the lease is dropped.
    Pooled(PooledLease),
}

impl Lease {
    /// The connection.
    pub fn connection(&self) -> &Arc<Connection> {
        match self {
            Lease::Shared(c) => c,
            Lease::Pooled(p) => p.connection(),
        }
    }

    /// The connection for a call to keep, and the pool's lease if it is a
    /// pooled one (held as long as the caller chooses): a shared
    /// connection's reference moves to the call instead of being cloned.
    pub fn into_parts(self) -> (Arc<Connection>, Option<PooledLease>) {
        match self {
            Lease::Shared(c) => (c, None),
            Lease::Pooled(p) => (p.connection().clone(), Some(p)),
        }
    }
}

/// The connections of one client to one address.
pub enum Connections {
    /// `reused`: the process-wide connection to the address.
    Reused(ReusedConnection),
    /// `pooled`: an elastic pool.
    Pooled(PooledConnections),
    /// `fixed`: a fixed set of connections.
    Fixed(FixedConnections),
}

impl Connections {
    /// Sets up connections per `config.connect` (connecting now unless `lazy_connect`).
    pub async fn new(
        config: &ClientConfig,
        transport: &ClientTransport,
    ) -> Result<Connections, RpcError> {
        Ok(match &config.connect {
            Connect::Reused => Connections::Reused(ReusedConnection::get(config, transport).await?),
            Connect::Pooled {
                min_connections,
                max_connections,
                idle_timeout,
                ..
            } => Connections::Pooled(
                PooledConnections::new(
                    config,
                    transport,
                    *min_connections,
                    *max_connections,
                    *idle_timeout,
                )
                .await?,
            ),
            Connect::Fixed {
                connections,
                coalesce_calls,
            } => Connections::Fixed(
                FixedConnections::new(config, transport, *connections, *coalesce_calls).await?,
            ),
        })
    }

    /// A connection for one call, reconnecting if the chosen one is broken.
    pub async fn acquire(&self) -> Result<Lease, RpcError> {
        match self {
            Connections::Reused(r) => r.acquire().await.map(Lease::Shared),
            Connections::Pooled(p) => p.acquire().await.map(Lease::Pooled),
            Connections::Fixed(f) => f.acquire().await.map(Lease::Shared),
        }
    }

    /// A connection usable right now without waiting (an open shared one), if
    /// any; `None` means "go through [`acquire`](Self::acquire)".
    pub fn ready(&self) -> Option<Lease> {
        match self {
            Connections::Reused(r) => r.ready().map(Lease::Shared),
            Connections::Pooled(_) => None,
            Connections::Fixed(f) => f.ready().map(Lease::Shared),
        }
    }

    /// Open connections right now.
    pub fn open_count(&self) -> usize {
        match self {
            Connections::Reused(r) => r.open_count(),
            Connections::Pooled(p) => p.open_count(),
            Connections::Fixed(f) => f.open_count(),
        }
    }

    /// Closes this client's connections (a reused connection closes when its
    /// last client lets go of it).
    pub fn close(&self) {
        match self {
            Connections::Reused(_) => {}
            Connections::Pooled(p) => p.close(),
            Connections::Fixed(f) => f.close(),
        }
    }
}
