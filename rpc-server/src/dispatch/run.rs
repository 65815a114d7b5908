//! A run of pooled calls on one worker: the requests a worker read itself
//! from a pipelining caller's socket (`reply::pool_reads`), handed to the
//! pool as one task that runs them one after another, as a connection task
//! runs its batch in direct dispatch.
//!
//! # Why
//!
//! Submitted one by one, each call of a run cost the pool a box, a queue
//! offer and poll, and the worker's wrapper around a task (its counters,
//! its seat, its streak): at 1:100:1024 a pooled call took 5,100
//! instructions against direct dispatch's 3,600 (callgrind, BENCHMARKS.md),
//! and the run's calls were spread over whichever workers woke. As one
//! task, the run costs those once, and its calls' answers go out together.
//!
//! # The pool's guarantees
//!
//! - **Counted per call.** The task counts as the run's calls against the
//!   pool's bound ([`WorkerPool::submit_run`]); a run the pool refuses comes
//!   back whole, and its calls are submitted one by one, so each is refused
//!   or accepted as it would have been.
//! - **A blocking call holds up nothing else.** Before its second call the
//!   task shows the pool the calls it has not started ([`Rest`], through
//!   [`WorkerPool::hold_rest`]) and marks each call's start
//!   ([`WorkerPool::step`]); the pool's monitor queues the rest of a run
//!   stuck in one call for a full tick, call by call, as it would have
//!   found them queued.
//! - **Exactly once.** A call is taken from the run under its lock, by the
//!   task or by the monitor, never both; the task takes its first call
//!   before it shows its rest, so it runs at least one and its count comes
//!   out exact: the task itself, the calls the monitor took (each a task
//!   of its own), and the rest it ran ([`WorkerPool::discount`]).

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::PoolJob;
use crate::panic::panic_message;
use crate::pool::{Rest, Task, WorkerPool};

/// The calls of a run not started yet.
struct Calls {
    jobs: Mutex<VecDeque<PoolJob>>,
    /// Calls the monitor took ([`Rest::take_rest`]).
    taken: AtomicUsize,
}

impl Rest for Calls {
    fn take_rest(&self) -> Vec<Task> {
        let mut jobs = self.jobs.lock();
        self.taken.fetch_add(jobs.len(), Ordering::Relaxed);
        jobs.drain(..)
            .map(|job| Box::new(move || job.run()) as Task)
            .collect()
    }
}

/// Hands `jobs` (at least two) to `pool` as one run (see the module docs).
/// Refused, the jobs come back, in order, for the caller to submit one by
/// one.
pub(crate) fn submit(pool: &WorkerPool, jobs: Vec<PoolJob>) -> Result<(), Vec<PoolJob>> {
    let count = jobs.len();
    let calls = Arc::new(Calls {
        jobs: Mutex::new(VecDeque::from(jobs)),
        taken: AtomicUsize::new(0),
    });
    let run = calls.clone();
    let task: Task = Box::new(move || run_calls(&run));
    match pool.submit_run(task, count) {
        Ok(()) => Ok(()),
        Err(rejected) => {
            // Its task never runs: the calls are all still here.
            drop(rejected);
            let jobs = std::mem::take(&mut *calls.jobs.lock());
            Err(jobs.into())
        }
    }
}

/// The run's task, on a worker.
fn run_calls(calls: &Arc<Calls>) {
    let first = calls.jobs.lock().pop_front();
    let Some(first) = first else {
        return;
    };
    // The first call is taken before the rest is shown, so the run runs
    // at least one call itself; the rest is shown before that call starts,
    // so the monitor can queue it if the first call blocks.
    let pool = first.ctx.dispatcher.pool().cloned();
    if let Some(pool) = &pool {
        pool.hold_rest(Some(calls.clone() as Arc<dyn Rest>));
    }
    run_one(first);
    let mut ran = 1;
    loop {
        let next = calls.jobs.lock().pop_front();
        let Some(job) = next else {
            break;
        };
        if let Some(pool) = &pool {
            pool.step();
        }
        run_one(job);
        ran += 1;
    }
    if let Some(pool) = &pool {
        pool.hold_rest(None);
        // The task itself counts one call; the monitor's take, its own.
        pool.discount(ran - 1);
    }
}

/// Runs one call of the run; a panic outside its handler (which the call
/// catches itself) ends that call only.
fn run_one(job: PoolJob) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| job.run())) {
        tracing::error!(
            panic = panic_message(payload.as_ref()),
            "a call of a run panicked outside its handler"
        );
    }
}
