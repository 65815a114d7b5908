//! A run of pooled calls on one worker: the requests a worker read itself
//! from a pipelining caller's socket (`reply::pool_reads`), handed to the
//! pool as one task that runs them one after another, as a connection task
//! runs its batch in direct dispatch.
//!
//! # Why it is shaped so
//!
//! Submitted one by one, each call of a run cost the pool a box, a queue
//! offer and poll and the worker's wrapper around a task (its counters, its
//! seat, its streak), and the run's calls were spread over whichever
//! workers woke. As one task, the run pays those once and its calls'
//! answers go out together (BENCHMARKS.md, "A run of calls a worker read").
//!
//! # The pool's guarantees
//!
//! - **Counted per call.** The task counts as the run's calls against the
//!   pool's bound ([`WorkerPool::submit_run`]); a run the pool refuses comes
//!   back whole, and its calls are submitted one by one, so each is refused
//!   or accepted as it would have been. As each call after the first
//!   starts, the one before is counted done ([`WorkerPool::discount`]), so
//!   the pool's count of unfinished calls is never behind (its growth, its
//!   bound and its drain at shutdown read it).
//! - **A blocking call holds up nothing else.** Before its first call
//!   starts the task shows the pool the calls it has not started ([`Rest`],
//!   through [`WorkerPool::hold_rest`]), and it marks the start of each
//!   ([`WorkerPool::step`]); the pool's monitor queues the rest of a run
//!   that began before its previous tick (1–2 ms: stuck in one call, or
//!   long calls one behind another), call by call, as it would have found
//!   them queued, so other workers take them.
//! - **Exactly once.** A call is taken from the run under its lock, by the
//!   task or by the monitor, never both. The task takes its first call
//!   before it shows its rest, so it runs at least one, and its count comes
//!   out exact: the task itself for the call it runs last, one
//!   [`discount`](WorkerPool::discount) for each call before it, and each
//!   call the monitor took as a task of its own.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use parking_lot::Mutex;

use super::job_box::JobBox;
use super::PoolJob;
use crate::panic::panic_message;
use crate::pool::{Rest, Task, WorkerPool};

/// The calls of a run not started yet.
struct Calls(Mutex<VecDeque<PoolJob>>);

impl Calls {
    fn next(&self) -> Option<PoolJob> {
        self.0.lock().pop_front()
    }
}

impl Rest for Calls {
    fn take_rest(&self) -> Vec<Task> {
        self.0.lock().drain(..).map(JobBox::task).collect()
    }
}

/// Hands `jobs` (at least two) to `pool` as one run (see the module docs).
/// Refused, the jobs come back, in order, for the caller to submit one by
/// one.
pub(crate) fn submit(pool: &WorkerPool, jobs: Vec<PoolJob>) -> Result<(), Vec<PoolJob>> {
    let count = jobs.len();
    let calls = Arc::new(Calls(Mutex::new(VecDeque::from(jobs))));
    let run = calls.clone();
    let task: Task = Box::new(move || run_calls(&run));
    match pool.submit_run(task, count) {
        Ok(()) => Ok(()),
        Err(rejected) => {
            // Its task never runs: the calls are all still here.
            drop(rejected);
            let jobs = std::mem::take(&mut *calls.0.lock());
            Err(jobs.into())
        }
    }
}

/// The run's task, on a worker.
fn run_calls(calls: &Arc<Calls>) {
    let Some(first) = calls.next() else {
        return;
    };
    let Some(pool) = first.ctx.dispatcher.pool().cloned() else {
        // Only pooled calls come here; run them all regardless.
        run_one(first);
        while run_next(calls, || {}) {}
        return;
    };
    let _shown = Shown::rest(&pool, calls);
    run_one(first);
    loop {
        // The start of the next call, before it is taken: the worker's
        // deferred wake-ups wait for a call that goes on, not for the run.
        pool.step();
        // Once the next is taken, the call before is done; the next is the
        // task's own until the one after.
        if !run_next(calls, || pool.discount(1)) {
            break;
        }
    }
}

/// The rest of a run shown to the monitor, until dropped (however the run
/// ends).
struct Shown<'a>(&'a WorkerPool);

impl<'a> Shown<'a> {
    fn rest(pool: &'a WorkerPool, calls: &Arc<Calls>) -> Self {
        pool.hold_rest(Some(calls.clone() as Arc<dyn Rest>));
        Shown(pool)
    }
}

impl Drop for Shown<'_> {
    fn drop(&mut self) {
        self.0.hold_rest(None);
    }
}

/// Runs one call of the run; a panic outside its handler (which the call
/// catches itself) ends that call only.
fn run_one(job: PoolJob) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| job.run())) {
        log_panic(payload.as_ref());
    }
}

/// Takes the run's next call and runs it, `taken` in between; false when
/// none was left. Taken inside the unwind guard, the call goes from the
/// queue straight to its run (passed to [`run_one`] it would be moved twice
/// more: a job is hundreds of bytes, each move a `memcpy`). A panic outside
/// its handler ends that call only.
#[inline(always)]
fn run_next(calls: &Calls, taken: impl FnOnce()) -> bool {
    let ran = catch_unwind(AssertUnwindSafe(|| {
        let Some(job) = calls.next() else {
            return false;
        };
        taken();
        job.run();
        true
    }));
    ran.unwrap_or_else(|payload| {
        log_panic(payload.as_ref());
        true
    })
}

#[cold]
fn log_panic(payload: &(dyn std::any::Any + Send)) {
    tracing::error!(
        panic = panic_message(payload),
        "a call of a run panicked outside its handler"
    );
}
