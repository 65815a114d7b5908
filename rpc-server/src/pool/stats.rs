//! [`PoolStats`]: a snapshot of the pool's counters, for metrics and for the
//! `ServerBusy` message.

/// A point-in-time snapshot of pool counters. Fields are read independently
/// (relaxed), so they need not be mutually consistent under load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Live worker threads.
    pub pool_size: usize,
    /// Threads currently running a task.
    pub active: usize,
    /// Tasks waiting in the queue (new calls, and waiting calls' next polls).
    pub queued: usize,
    /// Tasks accepted but not yet finished (queued + running) — Tomcat's
    /// `submittedCount`; the quantity the grow rule and the transfer-queue
    /// bound use. Not a running total.
    pub submitted: usize,
    /// Calls whose async handler waits (an `.await` pending), holding no
    /// worker; they count against the admission bound with `submitted`.
    pub waiting: usize,
    /// Tasks finished since creation, including ones that panicked (a
    /// call whose handler waited is one task per poll).
    pub completed: u64,
    /// Submissions refused since creation.
    pub rejected: u64,
    /// Highest `pool_size` ever reached.
    pub largest_pool_size: usize,
}
