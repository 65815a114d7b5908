//! [`JobBox`]: the box a pooled call travels to its worker in, kept for a
//! next call instead of freed.
//!
//! A call submitted to the pool is boxed by the connection task and run —
//! and its box dropped — by a worker: one allocation a call, made on one
//! thread and freed on another, which glibc serves through its shared arena
//! under a lock (see `rpc_core::spares`). So the worker takes the call out
//! of its box and keeps the empty box among the [`Spares`], which hand it
//! back to the connection task with a batch of others.
//!
//! An emptied box holds no call: nothing of a call outlives its run here.

use std::cell::RefCell;

use rpc_core::spares::Spares;

use super::PoolJob;
use crate::pool::{Job, Task};

/// A pooled call, boxed for the pool; empty once it ran.
pub(super) struct JobBox(Option<PoolJob>);

thread_local! {
    /// This thread's empty boxes (their allocations are what is kept).
    #[allow(clippy::vec_box)]
    static STOCK: RefCell<Vec<Box<JobBox>>> = const { RefCell::new(Vec::new()) };
}

/// Empty boxes, for the next call submitted.
static EMPTY: Spares<Box<JobBox>> = Spares::new(&STOCK);

impl JobBox {
    /// `job`, boxed for the pool — in an emptied box when there is one.
    #[inline]
    pub(super) fn task(job: PoolJob) -> Task {
        match EMPTY.take() {
            Some(mut boxed) => {
                boxed.0 = Some(job);
                boxed
            }
            None => Box::new(JobBox(Some(job))),
        }
    }
}

impl Job for JobBox {
    #[inline]
    fn run(mut self: Box<Self>) {
        let job = self.0.take();
        EMPTY.keep(self);
        if let Some(job) = job {
            job.run();
        }
    }
}
