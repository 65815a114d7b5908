//! What the pool runs: a [`Job`], held as a [`Task`], and the [`Rest`] of
//! a run of calls that the monitor may take back from a stuck task.
//!
//! A job owns its box while it runs, so a job type may keep the allocation
//! for its next job; the pool itself only moves boxes.

/// A unit of work for the pool: run once, on a worker thread.
///
/// Every `FnOnce() + Send + 'static` closure is one. The job owns its box
/// while it runs, so a job type of its own may keep the allocation for its
/// next job instead of freeing it (a pooled call's, made on the connection
/// task and freed on a worker, would otherwise cross threads through the
/// allocator's slow path; see `rpc_core::spares`).
///
/// ```
/// use rpc_server::pool::{Job, PoolConfig, WorkerPool};
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// /// A job of its own type; a closure is one too.
/// struct Greet(mpsc::Sender<&'static str>);
///
/// impl Job for Greet {
///     fn run(self: Box<Self>) {
///         self.0.send("hello").ok();
///     }
/// }
///
/// let pool = WorkerPool::new(PoolConfig::default())?;
/// let (tx, rx) = mpsc::channel();
/// pool.submit(Box::new(Greet(tx.clone()))).ok();
/// pool.submit(Box::new(move || tx.send("world").unwrap())).ok();
/// let mut got = [rx.recv_timeout(Duration::from_secs(5))?, rx.recv_timeout(Duration::from_secs(5))?];
/// got.sort();
/// assert_eq!(got, ["hello", "world"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Job: Send + 'static {
    /// Runs the job.
    fn run(self: Box<Self>);
}

impl<F: FnOnce() + Send + 'static> Job for F {
    #[inline]
    fn run(self: Box<Self>) {
        (*self)()
    }
}

/// A job as the pool holds it.
pub type Task = Box<dyn Job>;

/// The calls a task runs one after another that it has not started yet
/// ([`WorkerPool::submit_run`](super::WorkerPool::submit_run)): what the monitor hands to the shared queue
/// when the task is stuck in one of them (see `seat.rs`, "A run of calls").
pub(crate) trait Rest: Send + Sync {
    /// Takes every call not started yet, each as a task of its own, in
    /// order. A call is either taken here or started by the run, never both.
    fn take_rest(&self) -> Vec<Task>;
}
