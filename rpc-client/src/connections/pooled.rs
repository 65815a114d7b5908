//! [`PooledConnections`]: an elastic pool of `min..=max` connections.
//!
//! A call borrows a connection (waiting for a permit when all `max` are out),
//! validates it (a closed one is discarded and replaced), uses it, and the
//! [`PooledLease`] returns it on drop. With `pool_hold = write` the client drops the
//! lease as soon as its request is written — responses come back on the
//! connection by request id while others already use it (jkrpc); with
//! `pool_hold = response` it keeps it until the answer (Kitex/volo).
//!
//! Idle connections above `min_connections` are closed after
//! `pool_idle_timeout`, checked when connections are returned and by a background
//! sweep that holds the pool only weakly (it ends with the pool).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rpc_core::RpcError;
use rpc_transport::{connect, ClientTransport, Connection};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::ClientConfig;

struct Idle {
    conn: Arc<Connection>,
    since: Instant,
}

struct PoolInner {
    addr: String,
    transport: ClientTransport,
    min: usize,
    max: usize,
    idle_timeout: Duration,
    idle: Mutex<Vec<Idle>>,
    permits: Arc<Semaphore>,
    closed: AtomicBool,
}

impl PoolInner {
    /// Closes idle connections above `min` that have been idle too long, and
    /// drops broken ones.
    fn evict(&self) {
        let now = Instant::now();
        let mut idle = self.idle.lock();
        idle.retain(|i| i.conn.is_open());
        let in_use = self.max - self.permits.available_permits();
        // Oldest first: idle is a stack, so the front holds the longest-idle ones.
        while idle.len() + in_use > self.min
            && idle
                .first()
                .is_some_and(|i| now.duration_since(i.since) >= self.idle_timeout)
        {
            let evicted = idle.remove(0);
            evicted.conn.close("evicted from the pool after being idle");
        }
    }
}

/// An elastic connection pool for one address.
pub struct PooledConnections {
    inner: Arc<PoolInner>,
}

impl PooledConnections {
    /// Creates the pool, opening `min` connections now unless `lazy_connect`.
    pub async fn new(
        config: &ClientConfig,
        transport: &ClientTransport,
        min: usize,
        max: usize,
        idle_timeout: Duration,
    ) -> Result<PooledConnections, RpcError> {
        let inner = Arc::new(PoolInner {
            addr: config.addr.clone(),
            transport: transport.clone(),
            min,
            max,
            idle_timeout,
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(max)),
            closed: AtomicBool::new(false),
        });
        if !config.lazy_connect {
            for _ in 0..min {
                let conn = connect(&inner.addr, &inner.transport).await?;
                inner.idle.lock().push(Idle {
                    conn,
                    since: Instant::now(),
                });
            }
        }
        spawn_sweeper(Arc::downgrade(&inner), idle_timeout);
        Ok(PooledConnections { inner })
    }

    /// Borrows a connection: an idle one that is still open, else a new one.
    /// Waits while all `max_connections` are borrowed.
    pub async fn acquire(&self) -> Result<PooledLease, RpcError> {
        let permit = self
            .inner
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| {
                RpcError::Closed(format!("connection pool to {} is closed", self.inner.addr))
            })?;
        loop {
            let candidate = self.inner.idle.lock().pop();
            match candidate {
                Some(i) if i.conn.is_open() => {
                    return Ok(self.lease(i.conn, permit));
                }
                Some(_) => continue, // broken: discard, try the next
                None => break,
            }
        }
        let conn = connect(&self.inner.addr, &self.inner.transport).await?;
        Ok(self.lease(conn, permit))
    }

    fn lease(&self, conn: Arc<Connection>, permit: OwnedSemaphorePermit) -> PooledLease {
        PooledLease {
            conn: Some(conn),
            pool: self.inner.clone(),
            _permit: permit,
        }
    }

    /// Open connections: idle ones plus borrowed ones.
    pub fn open_count(&self) -> usize {
        let idle = self
            .inner
            .idle
            .lock()
            .iter()
            .filter(|i| i.conn.is_open())
            .count();
        idle + (self.inner.max - self.inner.permits.available_permits())
    }

    /// Idle connections waiting in the pool.
    pub fn idle_count(&self) -> usize {
        self.inner.idle.lock().len()
    }

    /// Closes idle connections and refuses further borrowing.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        self.inner.permits.close();
        for i in self.inner.idle.lock().drain(..) {
            i.conn.close("client closed");
        }
    }
}

impl Drop for PooledConnections {
    fn drop(&mut self) {
        self.close();
    }
}

fn spawn_sweeper(pool: Weak<PoolInner>, idle_timeout: Duration) {
    let period = (idle_timeout / 2).max(Duration::from_millis(10));
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            ticker.tick().await;
            let Some(pool) = pool.upgrade() else { return };
            if pool.closed.load(Ordering::Acquire) {
                return;
            }
            pool.evict();
        }
    });
}

/// A borrowed pooled connection; dropping it returns the connection.
pub struct PooledLease {
    conn: Option<Arc<Connection>>,
    pool: Arc<PoolInner>,
    _permit: OwnedSemaphorePermit,
}

impl PooledLease {
    /// The borrowed connection.
    pub fn connection(&self) -> &Arc<Connection> {
        // Only `Drop` takes the connection out.
        self.conn
            .as_ref()
            .unwrap_or_else(|| unreachable!("lease used after drop"))
    }
}

impl Drop for PooledLease {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        if conn.is_open() && !self.pool.closed.load(Ordering::Acquire) {
            self.pool.idle.lock().push(Idle {
                conn,
                since: Instant::now(),
            });
        }
        self.pool.evict();
    }
}
