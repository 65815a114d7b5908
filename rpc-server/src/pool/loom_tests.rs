//! Loom models of the worker pool: the real `WorkerPool`, `BlockingQueue` and
//! `TransferQueue`, all on the loom primitives of [`super::sync`]. Compiled only with
//! `--cfg brisk_loom`; run them with `.ci/loom`.
//!
//! Each model is small — two or three threads besides the pool's own, one to
//! three tasks — and runs once per queue kind and, where a pool thread above
//! `core_threads` waits with a time-out, once per [`TimedWaits`] policy (see
//! `sync.rs`: `Expire` drives the retire path at every idle moment, `Never`
//! makes a lost notification a deadlock).
//!
//! What every model asserts, beyond loom's own checks (no deadlock — which is
//! how a lost wake-up or a task stranded in the queue shows up, since the
//! models wait for their tasks on a condvar before shutting down — and no
//! leaked `Arc`):
//!
//! * each task ran exactly once if `submit` accepted it and never if it was
//!   handed back in `Rejected`;
//! * after `shutdown` returned `true` the counters are back to rest
//!   (`submitted`, `active`, `pool_size` all 0) and `completed`/`rejected`
//!   match what the submitters saw.
//!
//! Each model has its own preemption bound (1 to 4, the first argument of
//! `check`), the largest that keeps it to seconds — at most about half a
//! minute — on one core. `LOOM_MAX_PREEMPTIONS`, if set, lowers every bound
//! to at most its value (`.ci/loom` sets 4, i.e. the models' own bounds; set
//! 1 for a quick smoke run). To explore deeper, raise a model's bound.

use super::seat::Seat;
use super::sync::{set_timed_waits, Arc, AtomicUsize, Condvar, Mutex, TimedWaits};
use super::*;
use std::sync::atomic::Ordering::SeqCst;

const KINDS: [QueueKind; 2] = [QueueKind::Blocking, QueueKind::Transfer];
const POLICIES: [TimedWaits; 2] = [TimedWaits::Never, TimedWaits::Expire];

/// Runs `f` under loom for every queue kind and every listed timed-wait
/// policy, with at most `preemptions` preemptions per execution (lowered to
/// `LOOM_MAX_PREEMPTIONS` if that is set and smaller).
fn check(
    preemptions: usize,
    policies: &[TimedWaits],
    f: impl Fn(QueueKind) + Sync + Send + 'static,
) {
    let f = std::sync::Arc::new(f);
    for kind in KINDS {
        for &policy in policies {
            set_timed_waits(policy);
            let mut builder = loom::model::Builder::new();
            builder.preemption_bound = Some(
                builder
                    .preemption_bound
                    .map_or(preemptions, |cap| cap.min(preemptions)),
            );
            let f = std::sync::Arc::clone(&f);
            let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let counter = std::sync::Arc::clone(&executions);
            let started = std::time::Instant::now();
            builder.check(move || {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                f(kind)
            });
            eprintln!(
                "  model {kind:?} queue, timed waits {policy:?}: {} executions, {:.1} s",
                executions.load(std::sync::atomic::Ordering::Relaxed),
                started.elapsed().as_secs_f64()
            );
        }
    }
    set_timed_waits(TimedWaits::Never);
}

fn config(kind: QueueKind, core: usize, max: usize, queue_size: usize) -> PoolConfig {
    PoolConfig {
        core_threads: core,
        max_threads: max,
        queue_size,
        // Ignored under loom (see `sync.rs`); nonzero so waits are timed.
        keep_alive: Duration::from_millis(1),
        queue: kind,
        name: format!("loom-{kind}"),
    }
}

/// A counter that can be waited on without spinning, so that a missing
/// increment (a task never run) is a loom deadlock rather than a livelock.
struct Latch {
    count: Mutex<usize>,
    changed: Condvar,
}

impl Latch {
    fn new() -> Arc<Latch> {
        Arc::new(Latch {
            count: Mutex::new(0),
            changed: Condvar::new(),
        })
    }

    fn count_up(&self) {
        *self.count.lock() += 1;
        self.changed.notify_all();
    }

    fn reached(&self, n: usize) -> bool {
        *self.count.lock() >= n
    }

    fn wait_for(&self, n: usize) {
        let mut count = self.count.lock();
        while *count < n {
            self.changed.wait(&mut count);
        }
    }
}

/// One task's bookkeeping: how often it ran, plus the latch every task of a
/// model counts up when it finishes.
struct Probe {
    runs: Arc<AtomicUsize>,
}

impl Probe {
    fn new() -> Probe {
        Probe {
            runs: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// A task that records its run and counts `done` up.
    fn task(&self, done: &Arc<Latch>) -> Task {
        self.task_behind(done, None)
    }

    /// Like [`task`](Self::task), but first waits for `gate` to open (count
    /// 1), so it keeps its thread busy for as long as the model wants.
    fn task_behind(&self, done: &Arc<Latch>, gate: Option<&Arc<Latch>>) -> Task {
        let runs = Arc::clone(&self.runs);
        let done = Arc::clone(done);
        let gate = gate.cloned();
        Box::new(move || {
            if let Some(gate) = gate {
                gate.wait_for(1);
            }
            runs.fetch_add(1, SeqCst);
            done.count_up();
        })
    }

    fn runs(&self) -> usize {
        self.runs.load(SeqCst)
    }
}

/// Submits `task`; `true` if accepted. A rejected task is dropped unrun.
fn submit(pool: &WorkerPool, task: Task) -> bool {
    pool.submit(task).is_ok()
}

/// The live-thread count, read on its own. (Mid-model checks avoid
/// [`WorkerPool::stats`]: its seven `Relaxed` loads each let loom branch on
/// every value still visible, which multiplied one model's executions past
/// the time budget.)
fn pool_size(pool: &WorkerPool) -> usize {
    pool.shared.pool_size.load(SeqCst)
}

/// Blocks until `pool_size <= n`, woken by the pool's own exit notifications
/// (every retire and every exit signals them).
fn wait_pool_size_at_most(pool: &WorkerPool, n: usize) {
    let s = &pool.shared;
    let mut guard = s.exit_lock.lock();
    while s.pool_size.load(SeqCst) > n {
        s.exited.wait(&mut guard);
    }
}

/// Shuts the pool down without a time limit and checks it came to rest with
/// the given totals.
fn shutdown_and_check(pool: &WorkerPool, completed: u64, rejected: u64) {
    assert!(
        pool.shutdown(Duration::MAX),
        "untimed shutdown must succeed"
    );
    let stats = pool.stats();
    assert_eq!(stats.pool_size, 0, "{stats:?}");
    assert_eq!(stats.active, 0, "{stats:?}");
    assert_eq!(stats.submitted, 0, "{stats:?}");
    assert_eq!(stats.queued, 0, "{stats:?}");
    assert_eq!(stats.completed, completed, "{stats:?}");
    assert_eq!(stats.rejected, rejected, "{stats:?}");
    assert!(
        stats.largest_pool_size <= pool.config().max_threads,
        "{stats:?}"
    );
}

/// Two concurrent submitters, a core thread and room to grow: both tasks are
/// accepted (two tasks never exceed the bound) and each runs exactly once.
#[test]
fn concurrent_submits_run_exactly_once() {
    check(2, &POLICIES, |kind| {
        let pool = Arc::new(WorkerPool::new(config(kind, 1, 2, 1)).expect("valid config"));
        let done = Latch::new();
        let (a, b) = (Probe::new(), Probe::new());

        let submitter = {
            let pool = Arc::clone(&pool);
            let task = b.task(&done);
            loom::thread::spawn(move || submit(&pool, task))
        };
        assert!(submit(&pool, a.task(&done)), "task a rejected");
        assert!(submitter.join().expect("submitter"), "task b rejected");

        // Both must run without any shutdown to push them: a lost wake-up or
        // a stranded task deadlocks here.
        done.wait_for(2);
        assert_eq!((a.runs(), b.runs()), (1, 1));
        shutdown_and_check(&pool, 2, 0);
        assert_eq!((a.runs(), b.runs()), (1, 1));
    });
}

/// `max_threads = 1`, `queue_size = 1`, every task held busy: of three
/// concurrent submits exactly two are accepted (one running, one queued — for
/// the transfer queue via the `queue_size + max_threads` submitted bound), the
/// third is handed back, nothing is lost and nothing runs twice.
#[test]
fn bound_holds_and_third_submit_is_rejected() {
    check(3, &POLICIES, |kind| {
        let pool = Arc::new(WorkerPool::new(config(kind, 0, 1, 1)).expect("valid config"));
        let done = Latch::new();
        let gate = Latch::new();
        let probes: Vec<Probe> = (0..3).map(|_| Probe::new()).collect();

        let submitters: Vec<_> = probes[1..]
            .iter()
            .map(|probe| {
                let pool = Arc::clone(&pool);
                let task = probe.task_behind(&done, Some(&gate));
                loom::thread::spawn(move || submit(&pool, task))
            })
            .collect();
        let mut accepted = vec![submit(&pool, probes[0].task_behind(&done, Some(&gate)))];
        for submitter in submitters {
            accepted.push(submitter.join().expect("submitter"));
        }

        let n_accepted = accepted.iter().filter(|&&ok| ok).count();
        assert_eq!(n_accepted, 2, "accepted: {accepted:?}");
        assert!(pool.shared.queue.len() <= 1);
        assert!(pool_size(&pool) <= 1);
        assert_eq!(pool.shared.rejected.load(SeqCst), 1);

        gate.count_up();
        done.wait_for(2);
        shutdown_and_check(&pool, 2, 1);
        for (probe, ok) in probes.iter().zip(&accepted) {
            assert_eq!(probe.runs(), usize::from(*ok), "accepted: {accepted:?}");
        }
    });
}

/// A core thread starts and parks on the empty queue while a task is offered:
/// the offer's notification must reach it (no lost wake-up), so the task runs
/// before shutdown; then a second offer must wake it again.
#[test]
fn parked_worker_is_woken_by_an_offer() {
    // Core threads wait without a time-out: the policy does not matter.
    check(4, &[TimedWaits::Never], |kind| {
        let pool = WorkerPool::new(config(kind, 1, 1, 1)).expect("valid config");
        let done = Latch::new();
        let (a, b) = (Probe::new(), Probe::new());

        assert!(submit(&pool, a.task(&done)), "task a rejected");
        done.wait_for(1);
        assert!(submit(&pool, b.task(&done)), "task b rejected");
        done.wait_for(2);
        assert_eq!(pool_size(&pool), 1, "core threads never retire");
        shutdown_and_check(&pool, 2, 0);
        assert_eq!((a.runs(), b.runs()), (1, 1));
    });
}

/// Two core threads park while two tasks are offered concurrently from two
/// threads: each offer's `notify_one` must reach a parked worker, and a worker
/// woken for a task another worker already took must park again rather than
/// leave the second task behind — or the model deadlocks in `wait_for(2)`.
#[test]
fn two_parked_workers_are_woken_by_two_offers() {
    check(2, &[TimedWaits::Never], |kind| {
        let pool = Arc::new(WorkerPool::new(config(kind, 2, 2, 2)).expect("valid config"));
        let done = Latch::new();
        let (a, b) = (Probe::new(), Probe::new());

        let submitter = {
            let pool = Arc::clone(&pool);
            let task = b.task(&done);
            loom::thread::spawn(move || submit(&pool, task))
        };
        assert!(submit(&pool, a.task(&done)), "task a rejected");
        assert!(submitter.join().expect("submitter"), "task b rejected");
        done.wait_for(2);
        assert_eq!(pool_size(&pool), 2, "core threads never retire");
        shutdown_and_check(&pool, 2, 0);
        assert_eq!((a.runs(), b.runs()), (1, 1));
    });
}

/// Two parked core threads; task a blocks until task b has run, and both are
/// offered back to back. Whichever worker takes a is stuck in it, and with
/// lazy wake-ups (transfer queue) b's offer may see it awake and wake nobody:
/// the monitor's ticks must then wake the other worker. The model ticks the
/// monitor itself (loom has no clock) until b has run; without the rescue b
/// waits behind a forever — a deadlock or an endless loop here.
#[test]
fn a_blocked_worker_does_not_strand_a_queued_task() {
    check(2, &[TimedWaits::Never], |kind| {
        let pool = WorkerPool::new(config(kind, 2, 2, 2)).expect("valid config");
        let done = Latch::new();
        let (a, b) = (Probe::new(), Probe::new());

        // a waits for `done` to reach 1, which only b's completion does.
        assert!(
            submit(&pool, a.task_behind(&done, Some(&done))),
            "task a rejected"
        );
        assert!(submit(&pool, b.task(&done)), "task b rejected");
        while !done.reached(1) {
            Shared::watch(&pool.shared);
            loom::thread::yield_now();
        }
        done.wait_for(2);
        shutdown_and_check(&pool, 2, 0);
        assert_eq!((a.runs(), b.runs()), (1, 1));
    });
}

/// A lone task, so that its worker then waits for the next one awake (under
/// loom a lone task's worker always spins); then task a, which blocks until
/// b has run, and b. Offers that find a worker spinning (or woken) wake
/// nobody, so when that worker takes a and leaves b queued it must nudge the
/// monitor. The model plays a monitor that sleeps until it is nudged, as the
/// real one does with nothing to watch: it ticks only after a nudge. Without
/// the nudge b waits behind a forever — the model's loop never ends.
#[test]
fn a_task_left_behind_a_worker_on_its_way_wakes_a_sleeping_monitor() {
    check(2, &[TimedWaits::Never], |kind| {
        let pool = WorkerPool::new(config(kind, 2, 2, 2)).expect("valid config");
        let lone_done = Latch::new();
        let b_done = Latch::new();
        let done = Latch::new();
        let (lone, a, b) = (Probe::new(), Probe::new(), Probe::new());

        assert!(
            submit(&pool, lone.task(&lone_done)),
            "the lone task rejected"
        );
        lone_done.wait_for(1);
        assert!(
            submit(&pool, a.task_behind(&done, Some(&b_done))),
            "task a rejected"
        );
        assert!(submit(&pool, b.task(&b_done)), "task b rejected");
        while !b_done.reached(1) {
            if pool.shared.monitor.was_nudged() {
                Shared::watch(&pool.shared);
            }
            loom::thread::yield_now();
        }
        done.wait_for(1);
        shutdown_and_check(&pool, 3, 0);
        assert_eq!((lone.runs(), a.runs(), b.runs()), (1, 1, 1));
    });
}

/// Two tasks offered quietly (a connection's read batch), then one
/// `wake_idle`, while the two core threads start and park: both tasks must
/// run without any further wake-up — the one wake reaches a parked worker,
/// or a worker not yet parked finds the tasks — or the model deadlocks.
#[test]
fn a_quiet_batch_needs_one_wake() {
    check(2, &[TimedWaits::Never], |kind| {
        let pool = WorkerPool::new(config(kind, 2, 2, 2)).expect("valid config");
        let done = Latch::new();
        let (a, b) = (Probe::new(), Probe::new());

        assert!(
            pool.submit_quietly(a.task(&done)).is_ok(),
            "task a rejected"
        );
        assert!(
            pool.submit_quietly(b.task(&done)).is_ok(),
            "task b rejected"
        );
        pool.wake_idle();
        done.wait_for(2);
        shutdown_and_check(&pool, 2, 0);
        assert_eq!((a.runs(), b.runs()), (1, 1));
    });
}

/// A batch handed over whole ([`WorkerPool::submit_batch`]: the pool has a
/// thread for each task) wakes nobody until `wake_idle`, which one wake-up
/// suffices for: both tasks run exactly once, with the workers parked or
/// on their way to their first poll.
#[test]
fn a_batch_needs_one_wake() {
    check(2, &[TimedWaits::Never], |kind| {
        let pool = WorkerPool::new(config(kind, 2, 2, 2)).expect("valid config");
        let done = Latch::new();
        let (a, b) = (Probe::new(), Probe::new());
        let mut batch = vec![a.task(&done), b.task(&done)];
        assert_eq!(pool.submit_batch(&mut batch), 2, "both admitted");
        assert!(batch.is_empty());
        pool.wake_idle();
        done.wait_for(2);
        shutdown_and_check(&pool, 2, 0);
        assert_eq!((a.runs(), b.runs()), (1, 1));
    });
}

/// A batch of two and a lone submit race for a pool that admits two
/// unfinished tasks while its one thread is held: three tasks, so (with the
/// transfer queue) exactly one is refused — the lone one or the batch's
/// last (a batch's accepted tasks are its first) — every refusal counted
/// once, and every accepted task runs exactly once.
#[test]
fn a_batch_and_a_racing_submit_share_the_bound() {
    check(3, &[TimedWaits::Never], |kind| {
        let pool = Arc::new(WorkerPool::new(config(kind, 1, 1, 1)).expect("valid config"));
        let done = Latch::new();
        let gate = Latch::new();
        let (a, b, c) = (Probe::new(), Probe::new(), Probe::new());
        let submitter = {
            let pool = Arc::clone(&pool);
            let task = c.task_behind(&done, Some(&gate));
            loom::thread::spawn(move || submit(&pool, task))
        };
        let mut batch = vec![
            a.task_behind(&done, Some(&gate)),
            b.task_behind(&done, Some(&gate)),
        ];
        let from_batch = pool.submit_batch(&mut batch);
        assert_eq!(batch.len(), 2 - from_batch, "the refused stay");
        drop(batch);
        pool.wake_idle();
        let lone = usize::from(submitter.join().expect("submitter"));
        let admitted = from_batch + lone;
        match kind {
            // The pool's bound: exactly two of three.
            QueueKind::Transfer => assert_eq!(admitted, 2, "two admitted of three"),
            // The queue's own: one queued at most, so a task offered before
            // the thread took the first from the queue is refused too.
            QueueKind::Blocking => assert!((1..=2).contains(&admitted), "{admitted}"),
        }
        gate.count_up();
        done.wait_for(admitted);
        shutdown_and_check(&pool, admitted as u64, 3 - admitted as u64);
        assert_eq!(a.runs(), usize::from(from_batch >= 1));
        assert_eq!(b.runs(), usize::from(from_batch >= 2));
        assert_eq!(c.runs(), lone);
    });
}

/// A worker's deferred wake-up is sent exactly once whether the worker's
/// flush (its run of tasks ended) or the monitor's look (it seemed stuck in
/// a task) comes first, and neither loses it.
#[test]
fn a_deferred_wake_is_sent_exactly_once() {
    use std::task::{Wake, Waker};
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    check(3, &[TimedWaits::Never], |_| {
        let seat = Arc::new(Seat::new(0));
        let count = std::sync::Arc::new(Count(AtomicUsize::new(0)));
        seat.defer(Waker::from(count.clone()));
        let worker = {
            let seat = Arc::clone(&seat);
            loom::thread::spawn(move || {
                seat.start_task(0);
                seat.end_task();
                seat.flush();
            })
        };
        seat.watch(2);
        worker.join().expect("worker");
        assert_eq!(count.0.load(SeqCst), 1);
    });
}

/// A connection lends its read side to the worker spinning for its next
/// task (`TaskQueue::lend_spinner`) while that worker's wait ends: the lent
/// source is either refused (the lender keeps it) or taken by the spinning
/// worker and released when its wait ends — exactly once, never left in the
/// queue.
#[test]
fn a_source_lent_to_a_spinning_worker_is_released_exactly_once() {
    struct Lent(AtomicUsize);
    impl IdlePoll for Lent {
        fn poll(self: std::sync::Arc<Self>) -> bool {
            true
        }
        fn release(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    check(3, &[TimedWaits::Never], |_| {
        let queue = Arc::new(transfer::TransferQueue::new(Arc::new(Pulse::default())));
        let lent = std::sync::Arc::new(Lent(AtomicUsize::new(0)));
        let spinner = {
            let queue = Arc::clone(&queue);
            loom::thread::spawn(move || {
                assert!(queue.spin(Duration::ZERO, &mut || true).is_none());
            })
        };
        let refused = queue.lend_spinner(lent.clone()).is_err();
        spinner.join().expect("spinner");
        let released = lent.0.load(SeqCst);
        assert_eq!(released, usize::from(!refused), "refused {refused}");
        assert!(queue.take_lent().is_none(), "nothing left in the queue");
    });
}

/// `core_threads = 0`, one thread at most: the only thread is idle (about
/// to retire, under `Expire`) while a batch of two is handed over whole
/// (the pool is at `max_threads` when the batch looks). Both tasks must
/// still run — the retiring thread sees them and stays, or the batch, which
/// reads the pool's size after it counts, sees the thread gone and starts
/// one — and the pool shrinks back to zero threads on its own.
#[test]
fn retiring_thread_never_strands_a_concurrent_batch() {
    check(4, &POLICIES, |kind| {
        let pool = WorkerPool::new(config(kind, 0, 1, 2)).expect("valid config");
        let done = Latch::new();
        let (a, b, c) = (Probe::new(), Probe::new(), Probe::new());

        assert!(submit(&pool, a.task(&done)), "task a rejected");
        done.wait_for(1);
        // The worker is now finishing `a`, polling, timing out or retiring.
        let mut batch = vec![b.task(&done), c.task(&done)];
        assert_eq!(pool.submit_batch(&mut batch), 2, "the batch is admitted");
        pool.wake_idle();
        done.wait_for(3);
        assert_eq!((a.runs(), b.runs(), c.runs()), (1, 1, 1));
        if set_policy_is_expire() {
            wait_pool_size_at_most(&pool, 0);
        }
        shutdown_and_check(&pool, 3, 0);
    });
}

/// `core_threads = 0`: the only thread is idle (about to retire, under
/// `Expire`) while a second task is submitted. The task must still run —
/// either the retiring thread sees it and stays, or the submitter starts a new
/// one — and once idle the pool must shrink back to zero threads on its own.
#[test]
fn retiring_thread_never_strands_a_concurrent_submit() {
    check(4, &POLICIES, |kind| {
        let pool = WorkerPool::new(config(kind, 0, 1, 1)).expect("valid config");
        let done = Latch::new();
        let (a, b) = (Probe::new(), Probe::new());

        assert!(submit(&pool, a.task(&done)), "task a rejected");
        done.wait_for(1);
        // The worker is now finishing `a`, polling, timing out or retiring.
        assert!(submit(&pool, b.task(&done)), "task b rejected");
        done.wait_for(2);
        assert_eq!((a.runs(), b.runs()), (1, 1));

        if set_policy_is_expire() {
            // Idle threads above core (here: all of them) retire by themselves:
            // this wait deadlocks if one never does. (No snapshot assertion
            // after it: a thread that read `submitted` while `b` was still in
            // flight may take its slot back once more, and retires again after
            // its next keep-alive.)
            wait_pool_size_at_most(&pool, 0);
        }
        shutdown_and_check(&pool, 2, 0);
    });
}

/// One core thread, room for one more: two concurrent tasks may grow the pool
/// to two threads; once idle the extra one retires and the core one stays
/// (under `Expire`), and the remaining core thread still picks up a new task.
#[test]
fn idle_threads_retire_down_to_core() {
    check(2, &POLICIES, |kind| {
        let pool = Arc::new(WorkerPool::new(config(kind, 1, 2, 1)).expect("valid config"));
        let done = Latch::new();
        let probes: Vec<Probe> = (0..3).map(|_| Probe::new()).collect();

        let submitter = {
            let pool = Arc::clone(&pool);
            let task = probes[1].task(&done);
            loom::thread::spawn(move || submit(&pool, task))
        };
        assert!(submit(&pool, probes[0].task(&done)), "task 0 rejected");
        assert!(submitter.join().expect("submitter"), "task 1 rejected");
        done.wait_for(2);

        if set_policy_is_expire() {
            // The extra thread retires (or this wait deadlocks) …
            wait_pool_size_at_most(&pool, 1);
        }
        // … and the core thread never does.
        assert!(pool_size(&pool) >= 1, "the core thread must stay");
        assert!(submit(&pool, probes[2].task(&done)), "task 2 rejected");
        done.wait_for(3);
        shutdown_and_check(&pool, 3, 0);
        for probe in &probes {
            assert_eq!(probe.runs(), 1);
        }
    });
}

/// A submit racing `shutdown`: the task is either handed back (and never
/// runs) or accepted and run exactly once — and, since `shutdown` returned
/// `true` only after every pool thread exited, an accepted task has run by the
/// time both calls have returned. Once with a core thread, once with none
/// (the submitter has to start the thread itself).
#[test]
fn submit_racing_shutdown_is_rejected_or_run() {
    // A `resume` (the next poll of a waiting call) the same way, except
    // that a refused one is not counted as a rejection.
    for (core, resume) in [(1, false), (0, false), (1, true), (0, true)] {
        check(4, &POLICIES, move |kind| {
            let pool = Arc::new(WorkerPool::new(config(kind, core, 1, 1)).expect("valid config"));
            let done = Latch::new();
            let probe = Probe::new();

            let submitter = {
                let pool = Arc::clone(&pool);
                let task = probe.task(&done);
                loom::thread::spawn(move || match resume {
                    true => pool.resume(task).is_ok(),
                    false => submit(&pool, task),
                })
            };
            assert!(
                pool.shutdown(Duration::MAX),
                "untimed shutdown must succeed"
            );
            let accepted = submitter.join().expect("submitter");

            assert_eq!(probe.runs(), usize::from(accepted), "core = {core}");
            let stats = pool.stats();
            assert_eq!(stats.pool_size, 0, "core = {core}: {stats:?}");
            assert_eq!(stats.submitted, 0, "core = {core}: {stats:?}");
            assert_eq!(stats.completed, u64::from(accepted), "{stats:?}");
            let rejected = u64::from(!accepted && !resume);
            assert_eq!(stats.rejected, rejected, "resume = {resume}: {stats:?}");
            assert!(
                !submit(&pool, Probe::new().task(&done)),
                "submit after shutdown"
            );
        });
    }
}

/// With the one thread busy and the queue full, a `resume` from another
/// thread is still taken (past the bound) and runs, while a new submit is
/// refused; a waiting call (`park`) holds a place of the bound until it
/// ends.
#[test]
fn a_resume_goes_past_a_full_pool_and_parked_calls_count() {
    check(3, &[TimedWaits::Never], |kind| {
        // No core thread: the first submit starts one with its task, so
        // the second is the one queued.
        let pool = Arc::new(WorkerPool::new(config(kind, 0, 1, 1)).expect("valid config"));
        let done = Latch::new();
        let gate = Latch::new();
        let (running, queued, resumed) = (Probe::new(), Probe::new(), Probe::new());
        assert!(submit(&pool, running.task_behind(&done, Some(&gate))));
        assert!(submit(&pool, queued.task(&done)));

        let resumer = {
            let pool = Arc::clone(&pool);
            let task = resumed.task(&done);
            loom::thread::spawn(move || pool.resume(task).is_ok())
        };
        assert!(!submit(&pool, Probe::new().task(&done)), "over the bound");
        assert!(
            resumer.join().expect("resumer"),
            "a resume is never refused"
        );

        gate.count_up();
        done.wait_for(3);
        assert_eq!((running.runs(), queued.runs(), resumed.runs()), (1, 1, 1));

        // Room for two: two waiting calls fill it, one ending frees a place.
        // (First the worker counts its last task finished: its `done` came
        // from inside the task.)
        while pool.shared.submitted.load(SeqCst) > 0 {
            loom::thread::yield_now();
        }
        let first = pool.park();
        let second = pool.park();
        assert!(!submit(&pool, Probe::new().task(&done)), "two calls wait");
        drop(first);
        assert!(submit(&pool, Probe::new().task(&done)), "one place freed");
        done.wait_for(4);
        drop(second);
        shutdown_and_check(&pool, 4, 2);
    });
}

/// Whether the model runs under [`TimedWaits::Expire`].
fn set_policy_is_expire() -> bool {
    super::sync::timed_waits() == TimedWaits::Expire
}

/// A run of three calls (`submit_run`, one task counted as three, which
/// counts the two beyond itself done at its end) racing shutdown: refused
/// whole and counted nowhere, or run, and then `shutdown` waits for all
/// three to be counted done.
#[test]
fn a_run_racing_shutdown_is_refused_whole_or_counted_out_whole() {
    check(3, &POLICIES, |kind| {
        let pool = Arc::new(WorkerPool::new(config(kind, 1, 1, 2)).expect("valid config"));
        let runs = Arc::new(AtomicUsize::new(0));
        let submitter = {
            let pool = Arc::clone(&pool);
            let runs = Arc::clone(&runs);
            loom::thread::spawn(move || {
                let on_worker = Arc::clone(&pool);
                let run: Task = Box::new(move || {
                    runs.fetch_add(1, SeqCst);
                    on_worker.discount(2);
                });
                pool.submit_run(run, 3).is_ok()
            })
        };
        assert!(
            pool.shutdown(Duration::MAX),
            "untimed shutdown must succeed"
        );
        let accepted = submitter.join().expect("submitter");
        assert_eq!(runs.load(SeqCst), usize::from(accepted));
        let stats = pool.stats();
        assert_eq!(stats.submitted, 0, "{stats:?}");
        assert_eq!(stats.completed, 3 * u64::from(accepted), "{stats:?}");
        assert_eq!(stats.rejected, 0, "a refused run counts no rejection");
    });
}
