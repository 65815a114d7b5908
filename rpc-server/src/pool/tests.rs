//! Unit tests for [`WorkerPool`](super::WorkerPool). They never sleep to "let
//! things happen": they wait on channels / barriers with a bounded timeout, or
//! poll a condition against a deadline.

use super::*;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};

const WAIT: Duration = Duration::from_secs(10);

fn config(kind: QueueKind, core: usize, max: usize, queue_size: usize) -> PoolConfig {
    PoolConfig {
        core_threads: core,
        max_threads: max,
        queue_size,
        keep_alive: Duration::from_secs(60),
        queue: kind,
        name: format!("test-{kind}"),
    }
}

/// Polls `cond` until it holds or `WAIT` passes.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        thread::sleep(Duration::from_millis(2));
    }
    cond()
}

/// A gate that blocking tasks wait on, plus a channel reporting that a task
/// has started.
struct Gate {
    started_tx: mpsc::Sender<()>,
    started_rx: mpsc::Receiver<()>,
    open_tx: crossbeam_channel::Sender<()>,
    open_rx: crossbeam_channel::Receiver<()>,
}

impl Gate {
    fn new() -> Self {
        let (started_tx, started_rx) = mpsc::channel();
        let (open_tx, open_rx) = crossbeam_channel::unbounded();
        Gate {
            started_tx,
            started_rx,
            open_tx,
            open_rx,
        }
    }

    /// A task that reports it started, then blocks until the gate opens.
    fn blocker(&self) -> Task {
        let started = self.started_tx.clone();
        let open = self.open_rx.clone();
        Box::new(move || {
            started.send(()).ok();
            // Returns on `open()` (disconnect) or after the test's time budget.
            let _ = open.recv_timeout(WAIT);
        })
    }

    fn wait_started(&self, n: usize) {
        for i in 0..n {
            self.started_rx
                .recv_timeout(WAIT)
                .unwrap_or_else(|_| panic!("only {i} of {n} blockers started"));
        }
    }

    fn open(self) {
        drop(self.open_tx);
    }
}

const KINDS: [QueueKind; 2] = [QueueKind::Blocking, QueueKind::Transfer];

#[test]
fn pool_is_send_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<WorkerPool>();
    fn assert_send<T: Send>() {}
    assert_send::<Rejected>();
}

#[test]
fn validate_names_the_field() {
    let base = config(QueueKind::Blocking, 1, 2, 10);
    assert!(base.validate().is_ok());
    let bad = [
        (
            PoolConfig {
                max_threads: 0,
                core_threads: 0,
                ..base.clone()
            },
            "max_threads",
        ),
        (
            PoolConfig {
                core_threads: 3,
                ..base.clone()
            },
            "core_threads",
        ),
        (
            PoolConfig {
                queue_size: 0,
                ..base.clone()
            },
            "queue_size",
        ),
        (
            PoolConfig {
                name: "a\0b".into(),
                ..base.clone()
            },
            "name",
        ),
    ];
    for (cfg, field) in bad {
        let msg = cfg.validate().unwrap_err();
        assert!(msg.starts_with(field), "{msg}");
        let err = WorkerPool::new(cfg).unwrap_err();
        assert!(matches!(err, PoolError::InvalidConfig(_)));
        assert!(err.to_string().contains(field), "{err}");
    }
}

#[test]
fn config_reads_from_toml_and_yaml() {
    use rpc_core::config::{parse_str, ConfigFormat};
    let cfg: PoolConfig = parse_str(
        "core_threads = 2\nmax_threads = 16\nqueue_size = 500\nkeep_alive_ms = 1500\nqueue = \"blocking\"\n",
        ConfigFormat::Toml,
    )
    .unwrap();
    assert_eq!(
        cfg,
        PoolConfig {
            core_threads: 2,
            max_threads: 16,
            queue_size: 500,
            keep_alive: Duration::from_millis(1500),
            queue: QueueKind::Blocking,
            name: "brisk-worker".into(),
        }
    );
    // Every key is optional.
    let cfg: PoolConfig = parse_str("queue: transfer\n", ConfigFormat::Yaml).unwrap();
    assert_eq!(cfg, PoolConfig::default());
    // Typos and unknown queue kinds are errors naming the key.
    let err = parse_str::<PoolConfig>("keep_alive = 5\n", ConfigFormat::Toml).unwrap_err();
    assert!(err.to_string().contains("keep_alive"), "{err}");
    let err = parse_str::<PoolConfig>("queue = \"linked\"\n", ConfigFormat::Toml).unwrap_err();
    assert!(err.to_string().contains("queue"), "{err}");
}

#[test]
fn default_config_is_sane() {
    let cfg = PoolConfig::default();
    assert!(cfg.validate().is_ok());
    assert!(cfg.core_threads >= 1);
    assert_eq!(cfg.max_threads, cfg.core_threads * 8);
    assert_eq!(cfg.queue_size, 100_000);
    assert_eq!(cfg.keep_alive, Duration::from_secs(60));
    assert_eq!(cfg.queue, QueueKind::Transfer);
    assert_eq!(cfg.name, "brisk-worker");
}

#[test]
fn queue_kind_parses() {
    assert_eq!("Blocking".parse::<QueueKind>(), Ok(QueueKind::Blocking));
    assert_eq!("transfer".parse::<QueueKind>(), Ok(QueueKind::Transfer));
    assert!("linked".parse::<QueueKind>().is_err());
}

#[test]
fn core_threads_start_up_front_with_names() {
    for kind in KINDS {
        let pool = WorkerPool::new(config(kind, 3, 5, 10)).unwrap();
        assert_eq!(pool.stats().pool_size, 3);
        let (tx, rx) = mpsc::channel();
        pool.execute(move || {
            tx.send(thread::current().name().map(str::to_owned)).ok();
        })
        .unwrap();
        let name = rx.recv_timeout(WAIT).unwrap().unwrap();
        assert!(name.starts_with(&format!("test-{kind}-")), "{name}");
        assert!(pool.shutdown(WAIT));
    }
}

#[test]
fn every_task_runs_exactly_once_under_concurrent_submitters() {
    const SUBMITTERS: usize = 8;
    const PER_SUBMITTER: usize = 5_000;
    const TOTAL: usize = SUBMITTERS * PER_SUBMITTER;
    for kind in KINDS {
        let pool = Arc::new(WorkerPool::new(config(kind, 2, 8, TOTAL)).unwrap());
        let runs: Arc<Vec<AtomicU8>> = Arc::new((0..TOTAL).map(|_| AtomicU8::new(0)).collect());
        let done = Arc::new(AtomicUsize::new(0));
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        let start = Arc::new(Barrier::new(SUBMITTERS));
        let submitters: Vec<_> = (0..SUBMITTERS)
            .map(|s| {
                let (pool, runs, done, done_tx, start) = (
                    Arc::clone(&pool),
                    Arc::clone(&runs),
                    Arc::clone(&done),
                    done_tx.clone(),
                    Arc::clone(&start),
                );
                thread::spawn(move || {
                    start.wait();
                    for i in 0..PER_SUBMITTER {
                        let (runs, done, done_tx) =
                            (Arc::clone(&runs), Arc::clone(&done), done_tx.clone());
                        let idx = s * PER_SUBMITTER + i;
                        pool.execute(move || {
                            runs[idx].fetch_add(1, Ordering::Relaxed);
                            if done.fetch_add(1, Ordering::AcqRel) + 1 == TOTAL {
                                done_tx.send(()).ok();
                            }
                        })
                        .expect("queue is large enough; nothing may be rejected");
                    }
                })
            })
            .collect();
        for s in submitters {
            s.join().unwrap();
        }
        done_rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("{kind}: only {} tasks ran", done.load(Ordering::SeqCst)));
        assert!(
            runs.iter().all(|r| r.load(Ordering::Relaxed) == 1),
            "{kind}"
        );
        assert!(pool.shutdown(WAIT));
        let stats = pool.stats();
        assert_eq!(stats.completed, TOTAL as u64, "{kind}");
        assert_eq!(stats.submitted, 0, "{kind}");
        assert_eq!(stats.active, 0, "{kind}");
        assert_eq!(stats.rejected, 0, "{kind}");
        assert_eq!(stats.pool_size, 0, "{kind}");
        assert!(stats.largest_pool_size <= 8, "{kind}");
    }
}

#[test]
fn grows_to_max_before_queueing() {
    for kind in KINDS {
        let pool = WorkerPool::new(config(kind, 1, 4, 100)).unwrap();
        let gate = Gate::new();
        for n in 1..=4 {
            pool.submit(gate.blocker()).unwrap();
            // Growth happens synchronously inside `submit`.
            assert_eq!(pool.stats().pool_size, n.max(1), "{kind}");
        }
        // All four run at once, so none of them waited in the queue.
        gate.wait_started(4);
        let stats = pool.stats();
        assert_eq!(stats.pool_size, 4, "{kind}");
        assert_eq!(stats.largest_pool_size, 4, "{kind}");
        assert_eq!(stats.active, 4, "{kind}");
        assert_eq!(stats.queued, 0, "{kind}");
        // At max: the fifth task is queued, not given a thread.
        pool.execute(|| {}).unwrap();
        let stats = pool.stats();
        assert_eq!(stats.pool_size, 4, "{kind}");
        assert_eq!(stats.queued, 1, "{kind}");
        gate.open();
        assert!(pool.shutdown(WAIT));
        assert_eq!(pool.stats().completed, 5, "{kind}");
    }
}

#[test]
fn idle_thread_is_reused_instead_of_growing() {
    for kind in KINDS {
        let pool = WorkerPool::new(config(kind, 2, 4, 100)).unwrap();
        for _ in 0..50 {
            let (tx, rx) = mpsc::channel();
            pool.execute(move || {
                tx.send(()).ok();
            })
            .unwrap();
            rx.recv_timeout(WAIT).unwrap();
            // Wait for the task to be fully accounted before the next submit.
            assert!(eventually(|| pool.stats().submitted == 0));
        }
        assert_eq!(pool.stats().largest_pool_size, 2, "{kind}");
        assert!(pool.shutdown(WAIT));
    }
}

#[test]
fn rejects_promptly_when_bound_reached_and_returns_the_task() {
    const MAX: usize = 2;
    const QUEUE: usize = 3;
    for kind in KINDS {
        let pool = WorkerPool::new(config(kind, 1, MAX, QUEUE)).unwrap();
        let gate = Gate::new();
        for _ in 0..MAX {
            pool.submit(gate.blocker()).unwrap();
        }
        gate.wait_started(MAX);
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..QUEUE {
            let ran = Arc::clone(&ran);
            pool.execute(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        }
        assert_eq!(pool.stats().queued, QUEUE, "{kind}");

        let (tx, rx) = mpsc::channel();
        let started = Instant::now();
        let rejected = pool
            .execute(move || {
                tx.send("mine").ok();
            })
            .expect_err("bound reached: must reject");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{kind}: submit blocked"
        );
        assert_eq!(pool.stats().rejected, 1, "{kind}");
        // It is our task, untouched and runnable by the caller.
        rejected.into_task().run();
        assert_eq!(rx.try_recv(), Ok("mine"));

        gate.open();
        assert!(pool.shutdown(WAIT));
        assert_eq!(ran.load(Ordering::SeqCst), QUEUE, "{kind}");
        let stats = pool.stats();
        assert_eq!(stats.completed, (MAX + QUEUE) as u64, "{kind}");
        assert_eq!(stats.submitted, 0, "{kind}");
    }
}

#[test]
fn extra_threads_retire_after_keep_alive() {
    for kind in KINDS {
        let pool = WorkerPool::new(PoolConfig {
            keep_alive: Duration::from_millis(50),
            ..config(kind, 1, 3, 10)
        })
        .unwrap();
        let gate = Gate::new();
        for _ in 0..3 {
            pool.submit(gate.blocker()).unwrap();
        }
        gate.wait_started(3);
        assert_eq!(pool.stats().pool_size, 3, "{kind}");
        gate.open();
        assert!(
            eventually(|| pool.stats().pool_size == 1),
            "{kind}: {:?}",
            pool.stats()
        );
        assert_eq!(pool.stats().largest_pool_size, 3, "{kind}");
        // The surviving core thread still works.
        let (tx, rx) = mpsc::channel();
        pool.execute(move || {
            tx.send(()).ok();
        })
        .unwrap();
        rx.recv_timeout(WAIT).unwrap();
        assert!(pool.shutdown(WAIT));
    }
}

#[test]
fn zero_core_pool_retires_to_zero_and_regrows() {
    for kind in KINDS {
        let pool = WorkerPool::new(PoolConfig {
            keep_alive: Duration::from_millis(20),
            ..config(kind, 0, 2, 10)
        })
        .unwrap();
        assert_eq!(pool.stats().pool_size, 0);
        for round in 0..3 {
            let (tx, rx) = mpsc::channel();
            for _ in 0..4 {
                let tx = tx.clone();
                pool.execute(move || {
                    tx.send(()).ok();
                })
                .unwrap();
            }
            for _ in 0..4 {
                rx.recv_timeout(WAIT)
                    .unwrap_or_else(|_| panic!("{kind} round {round}: task lost"));
            }
            assert!(eventually(|| pool.stats().pool_size == 0), "{kind}");
        }
        assert!(pool.shutdown(WAIT));
    }
}

#[test]
fn panicking_task_does_not_kill_the_pool() {
    for kind in KINDS {
        let pool = WorkerPool::new(config(kind, 1, 1, 10)).unwrap();
        for _ in 0..3 {
            pool.execute(|| panic!("boom (expected by test)")).unwrap();
        }
        let (tx, rx) = mpsc::channel();
        pool.execute(move || {
            tx.send(thread::current().id()).ok();
        })
        .unwrap();
        rx.recv_timeout(WAIT).unwrap();
        assert!(eventually(|| pool.stats().completed == 4), "{kind}");
        let stats = pool.stats();
        assert_eq!(stats.pool_size, 1, "{kind}");
        assert_eq!(stats.largest_pool_size, 1, "{kind}");
        assert_eq!(stats.submitted, 0, "{kind}");
        assert_eq!(stats.active, 0, "{kind}");
        assert!(pool.shutdown(WAIT));
    }
}

#[test]
fn shutdown_drains_queued_tasks_and_rejects_new_ones() {
    const QUEUED: usize = 50;
    for kind in KINDS {
        let pool = Arc::new(WorkerPool::new(config(kind, 1, 1, 100)).unwrap());
        let gate = Gate::new();
        pool.submit(gate.blocker()).unwrap();
        gate.wait_started(1);
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..QUEUED {
            let ran = Arc::clone(&ran);
            pool.execute(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        }
        assert_eq!(pool.stats().queued, QUEUED);

        // Shut down while the worker is still blocked and the queue is full.
        let shutdown = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.shutdown(WAIT))
        };
        assert!(eventually(|| pool.is_shutdown()));
        let rejected_before = pool.stats().rejected;
        let (tx, rx) = mpsc::channel();
        let rejected = pool
            .execute(move || {
                tx.send(()).ok();
            })
            .expect_err("submit after shutdown must be rejected");
        assert_eq!(pool.stats().rejected, rejected_before + 1);
        rejected.into_task().run();
        assert!(rx.try_recv().is_ok());

        gate.open();
        assert!(shutdown.join().unwrap(), "{kind}: shutdown timed out");
        assert_eq!(ran.load(Ordering::SeqCst), QUEUED, "{kind}");
        let stats = pool.stats();
        assert_eq!(stats.pool_size, 0, "{kind}");
        assert_eq!(stats.queued, 0, "{kind}");
        assert_eq!(stats.completed, QUEUED as u64 + 1, "{kind}");
        // Idempotent.
        assert!(pool.shutdown(WAIT));
    }
}

#[test]
fn shutdown_wakes_idle_threads_promptly() {
    for kind in KINDS {
        // Extra threads are parked with a 60 s keep-alive; core ones without a
        // timeout. Shutdown must not wait for either.
        let pool = WorkerPool::new(config(kind, 2, 4, 10)).unwrap();
        let gate = Gate::new();
        for _ in 0..4 {
            pool.submit(gate.blocker()).unwrap();
        }
        gate.wait_started(4);
        gate.open();
        assert!(eventually(|| pool.stats().active == 0));
        let started = Instant::now();
        assert!(pool.shutdown(WAIT), "{kind}");
        assert!(started.elapsed() < Duration::from_secs(5), "{kind}");
        assert_eq!(pool.stats().pool_size, 0);
    }
}

#[test]
fn shutdown_times_out_while_a_task_is_stuck() {
    for kind in KINDS {
        let pool = WorkerPool::new(config(kind, 1, 1, 10)).unwrap();
        let gate = Gate::new();
        pool.submit(gate.blocker()).unwrap();
        gate.wait_started(1);
        assert!(!pool.shutdown(Duration::from_millis(20)), "{kind}");
        assert_eq!(pool.stats().pool_size, 1);
        gate.open();
        assert!(pool.shutdown(WAIT), "{kind}");
    }
}

#[test]
fn drop_does_not_block_and_still_drains() {
    for kind in KINDS {
        let pool = WorkerPool::new(config(kind, 1, 1, 10)).unwrap();
        let gate = Gate::new();
        pool.submit(gate.blocker()).unwrap();
        gate.wait_started(1);
        let (tx, rx) = mpsc::channel();
        pool.execute(move || {
            tx.send(()).ok();
        })
        .unwrap();
        drop(pool); // must return although a task is blocked
        gate.open();
        rx.recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("{kind}: queued task lost on drop"));
    }
}

#[test]
fn concurrent_submit_and_shutdown_loses_nothing() {
    // Every submit either is rejected or its task runs, even when racing
    // shutdown, including with a pool that may have no threads at all.
    for kind in KINDS {
        for core in [0, 2] {
            let pool = Arc::new(
                WorkerPool::new(PoolConfig {
                    keep_alive: Duration::from_millis(1),
                    ..config(kind, core, 4, 10_000)
                })
                .unwrap(),
            );
            let ran = Arc::new(AtomicUsize::new(0));
            let accepted = Arc::new(AtomicUsize::new(0));
            let start = Arc::new(Barrier::new(5));
            let submitters: Vec<_> = (0..4)
                .map(|_| {
                    let (pool, ran, accepted, start) = (
                        Arc::clone(&pool),
                        Arc::clone(&ran),
                        Arc::clone(&accepted),
                        Arc::clone(&start),
                    );
                    thread::spawn(move || {
                        start.wait();
                        for _ in 0..2_000 {
                            let ran = Arc::clone(&ran);
                            let ok = pool
                                .execute(move || {
                                    ran.fetch_add(1, Ordering::SeqCst);
                                })
                                .is_ok();
                            if ok {
                                accepted.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    })
                })
                .collect();
            start.wait();
            thread::yield_now();
            let _ = pool.shutdown(WAIT);
            for s in submitters {
                s.join().unwrap();
            }
            // A submit accepted just before the flag flipped may still have
            // started a thread; a second shutdown waits for it.
            assert!(pool.shutdown(WAIT), "{kind}/{core}");
            assert!(
                eventually(|| ran.load(Ordering::SeqCst) == accepted.load(Ordering::SeqCst)),
                "{kind}/{core}: accepted {} ran {}",
                accepted.load(Ordering::SeqCst),
                ran.load(Ordering::SeqCst)
            );
        }
    }
}

/// Regression test for the bug the loom model
/// `submit_racing_shutdown_is_rejected_or_run` found: with no thread alive
/// (`core_threads = 0`), a submit that has counted its task and seen no
/// shutdown flag, but has not yet started the thread for it, must hold
/// `shutdown` off until that task has run. Before the fix `shutdown` saw
/// `pool_size == 0` and returned `true` at once; the task then ran on a thread
/// it never joined. The submitter's steps are replayed by hand here, so the
/// interleaving is forced rather than hoped for.
#[test]
fn shutdown_waits_for_an_accepted_task_whose_thread_is_not_started_yet() {
    for kind in KINDS {
        let pool = WorkerPool::new(config(kind, 0, 1, 1)).unwrap();
        let s = Arc::clone(&pool.shared);
        // `submit`: counted, and the shutdown flag was still clear …
        s.submitted.fetch_add(1, Ordering::SeqCst);
        // … then the submitter is preempted. Shutdown must not claim success.
        assert!(!pool.shutdown(Duration::from_millis(20)), "{kind}");
        // The submitter resumes: it grows a thread for its task.
        let (tx, rx) = mpsc::channel();
        assert!(s.reserve_thread(), "{kind}");
        let task: Task = Box::new(move || {
            tx.send(()).ok();
        });
        if let Err((_, e)) = Shared::spawn_worker(&s, Some(task)) {
            panic!("{kind}: spawn failed: {e}");
        }
        assert!(pool.shutdown(WAIT), "{kind}");
        assert!(
            rx.try_recv().is_ok(),
            "{kind}: shutdown returned before the accepted task ran"
        );
        assert_eq!(pool.stats().submitted, 0, "{kind}");
        assert_eq!(pool.stats().pool_size, 0, "{kind}");
    }
}

/// The other half of that fix: a submit that counted its task and then finds
/// the shutdown flag set withdraws the task, and must wake a `shutdown` that
/// is waiting for `submitted` to drain (otherwise it would sleep until its
/// timeout).
#[test]
fn withdrawn_submit_wakes_a_waiting_shutdown() {
    for kind in KINDS {
        let pool = Arc::new(WorkerPool::new(config(kind, 0, 1, 1)).unwrap());
        pool.shared.submitted.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel();
        let waiter = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                tx.send(pool.shutdown(WAIT)).ok();
            })
        };
        assert!(eventually(|| pool.is_shutdown()), "{kind}");
        // What `submit` does when its re-check sees the flag.
        drop(pool.shared.withdraw(Box::new(|| {})));
        // Well before `WAIT`, which a missed notification would take.
        assert_eq!(rx.recv_timeout(WAIT / 2), Ok(true), "{kind}");
        waiter.join().unwrap();
        assert_eq!(pool.stats().rejected, 1, "{kind}");
    }
}

/// Two core threads, one blocked in its task: the task submitted behind it
/// finds no worker awake to take it (the blocked one counts as awake), so the
/// monitor must wake the parked one — within a couple of ticks, while the
/// blocker is still blocked.
#[test]
fn a_task_behind_a_blocked_worker_is_rescued_by_the_monitor() {
    for kind in KINDS {
        let pool = WorkerPool::new(config(kind, 2, 2, 100)).unwrap();
        let gate = Gate::new();
        pool.submit(gate.blocker()).unwrap();
        gate.wait_started(1);
        let (tx, rx) = mpsc::channel();
        let queued_at = Instant::now();
        pool.execute(move || {
            tx.send(Instant::now()).ok();
        })
        .unwrap();
        let ran_at = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("{kind}: the queued task waited behind the blocked worker"));
        assert!(
            ran_at - queued_at < WAIT / 2,
            "{kind}: rescued in {:?}",
            ran_at - queued_at
        );
        // The rescued task's worker leaves `active` just after its send.
        assert!(
            eventually(|| pool.stats().active == 1),
            "{kind}: the blocker still runs"
        );
        gate.open();
        assert!(pool.shutdown(WAIT));
    }
}

/// Tasks submitted quietly run once `wake_idle` is called, by one worker:
/// the others stay parked (a wake-up per task would put all eight to work).
#[test]
fn a_quiet_batch_is_run_after_one_wake() {
    let pool = WorkerPool::new(config(QueueKind::Transfer, 8, 8, 100)).unwrap();
    // Every worker parked first: one still on its way to its first poll
    // would take from the batch without a wake-up.
    assert!(eventually(|| pool.shared.queue.parked() == 8));
    let threads = Arc::new(parking_lot::Mutex::new(std::collections::HashSet::new()));
    let (tx, rx) = mpsc::channel();
    for _ in 0..20 {
        let threads = threads.clone();
        let tx = tx.clone();
        pool.submit_quietly(Box::new(move || {
            threads.lock().insert(thread::current().id());
            tx.send(()).ok();
        }))
        .unwrap();
    }
    let ticks_before = pool.shared.pulse.tick.load(Ordering::Relaxed);
    pool.wake_idle();
    for _ in 0..20 {
        rx.recv_timeout(WAIT).unwrap();
    }
    let ticks = pool.shared.pulse.tick.load(Ordering::Relaxed) - ticks_before;
    // One worker normally takes the whole batch. On a loaded machine (tests
    // run in parallel, a host that steals the CPU for milliseconds) more
    // may: a second one with no monitor tick passing has been seen, and the
    // monitor adds one worker per tick in which a task waited a full tick.
    // A wake-up per task would put all eight to work.
    let ran = threads.lock().len() as u64;
    assert!(
        ran <= 4 + ticks,
        "{ran} workers ran the batch, in {ticks} monitor ticks"
    );
    assert!(pool.shutdown(WAIT));
}

/// A wake-up deferred by a task goes out when the worker's run of tasks
/// ends, and — when the worker then blocks in its next task — from the
/// monitor, while the worker is still blocked.
#[test]
fn a_deferred_wake_is_sent_even_when_the_next_task_blocks() {
    use std::task::{Wake, Waker};
    struct Flag(mpsc::SyncSender<()>);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.try_send(()).ok();
        }
    }
    let pool = WorkerPool::new(config(QueueKind::Transfer, 1, 1, 100)).unwrap();
    let gate = Gate::new();
    let (woken_tx, woken_rx) = mpsc::sync_channel(4);
    let waker = Waker::from(Arc::new(Flag(woken_tx)));
    // Both queued before the one worker wakes: it runs them back to back.
    pool.submit_quietly(Box::new(move || super::wake_soon(waker)))
        .unwrap();
    pool.submit_quietly(gate.blocker()).unwrap();
    pool.wake_idle();
    gate.wait_started(1);
    woken_rx
        .recv_timeout(WAIT)
        .expect("the deferred wake-up is sent while the worker blocks");
    gate.open();
    assert!(pool.shutdown(WAIT));
}

/// Two tasks offered back to back while the worker that will take the
/// first is on its way — woken for it, or spinning after a lone task — so
/// neither offer wakes anybody, with the monitor asleep: when that worker
/// blocks in the first task, the second must still run while it blocks.
/// (Whether the offers find the worker on its way depends on timing here;
/// `transfer.rs` checks the spinning worker's hand-off deterministically.)
#[test]
fn a_task_queued_behind_a_worker_on_its_way_that_blocks_is_not_stranded() {
    let pool = WorkerPool::new(config(QueueKind::Transfer, 2, 2, 100)).unwrap();
    for round in 0..40 {
        if round % 2 == 0 {
            // Let the monitor fall asleep (it sleeps after ten quiet ticks).
            thread::sleep(Duration::from_millis(15));
        }
        // Lone tasks in a row first, as a lone caller's: their worker then
        // spins for the next one.
        for _ in 0..rhythm::LONE_STREAK + 2 {
            let (lone_tx, lone_rx) = mpsc::channel();
            pool.submit(Box::new(move || {
                lone_tx.send(()).ok();
            }))
            .unwrap();
            lone_rx.recv_timeout(WAIT).unwrap();
        }
        let (ran_tx, ran_rx) = crossbeam_channel::bounded::<()>(1);
        let (done_tx, done_rx) = mpsc::channel();
        pool.submit(Box::new(move || {
            // Blocks until the task behind it has run.
            done_tx.send(ran_rx.recv_timeout(WAIT).is_ok()).ok();
        }))
        .unwrap();
        pool.submit(Box::new(move || {
            ran_tx.send(()).ok();
        }))
        .unwrap();
        assert_eq!(
            done_rx.recv_timeout(WAIT * 2),
            Ok(true),
            "round {round}: the second task waited behind the blocked first"
        );
    }
    assert!(pool.shutdown(WAIT));
}

/// What a stuck run has not started: each call a task sending its number.
struct TestRest(parking_lot::Mutex<Vec<Task>>);

impl Rest for TestRest {
    fn take_rest(&self) -> Vec<Task> {
        std::mem::take(&mut *self.0.lock())
    }
}

#[test]
fn a_run_counts_as_its_calls_and_ends_with_none_unfinished() {
    let pool = Arc::new(WorkerPool::new(config(QueueKind::Transfer, 2, 4, 100)).unwrap());
    let (tx, rx) = mpsc::channel();
    let on_worker = pool.clone();
    let run: Task = Box::new(move || {
        for call in 0..5 {
            if call > 0 {
                on_worker.step();
            }
            tx.send(call).ok();
        }
        on_worker.discount(4);
    });
    pool.submit_run(run, 5).unwrap();
    pool.wake_idle();
    let ran: Vec<i32> = (0..5).map(|_| rx.recv_timeout(WAIT).unwrap()).collect();
    assert_eq!(ran, vec![0, 1, 2, 3, 4], "one after another, in order");
    assert!(
        eventually(|| pool.stats().submitted == 0),
        "{:?}",
        pool.stats()
    );
    assert_eq!(pool.stats().completed, 5, "each call counts as completed");
    assert!(pool.shutdown(WAIT));
}

#[test]
fn a_run_over_the_bound_comes_back_counted_nowhere() {
    // queue_size + max_threads = 4 calls admitted at most.
    let pool = Arc::new(WorkerPool::new(config(QueueKind::Transfer, 1, 2, 2)).unwrap());
    let back = pool.submit_run(Box::new(|| {}), 5).unwrap_err();
    drop(back.into_task());
    let s = pool.stats();
    assert_eq!((s.submitted, s.rejected), (0, 0), "{s:?}");
    // A run of 4 is within the bound.
    let (tx, rx) = mpsc::channel();
    let on_worker = pool.clone();
    let run: Task = Box::new(move || {
        tx.send(()).ok();
        on_worker.discount(3);
    });
    pool.submit_run(run, 4).unwrap();
    pool.wake_idle();
    rx.recv_timeout(WAIT).unwrap();
    assert!(
        eventually(|| pool.stats().submitted == 0),
        "{:?}",
        pool.stats()
    );
    assert!(pool.shutdown(WAIT), "{:?}", pool.stats());
}

/// A run of `1 + rest` calls for `pool`: the first blocks on `gate`, each
/// of the rest sends its number (1, 2, …) on the returned channel. It shows
/// its rest before its first call, as `dispatch::run` does, and runs
/// whatever the monitor left it after the gate opens.
fn stuck_run(
    pool: &Arc<WorkerPool>,
    gate: &Gate,
    rest: i32,
) -> (Task, Arc<TestRest>, mpsc::Receiver<i32>) {
    let blocker = gate.blocker();
    let (tx, rx) = mpsc::channel();
    let calls: Vec<Task> = (1..=rest)
        .map(|call| {
            let tx = tx.clone();
            Box::new(move || {
                tx.send(call).ok();
            }) as Task
        })
        .collect();
    let rest = Arc::new(TestRest(parking_lot::Mutex::new(calls)));
    let on_worker = pool.clone();
    let held = rest.clone();
    let run: Task = Box::new(move || {
        on_worker.hold_rest(Some(held.clone() as Arc<dyn Rest>));
        blocker.run();
        let left = std::mem::take(&mut *held.0.lock());
        for call in left {
            on_worker.step();
            on_worker.discount(1);
            call.run();
        }
        on_worker.hold_rest(None);
    });
    (run, rest, rx)
}

#[test]
fn the_monitor_queues_the_rest_of_a_run_stuck_in_one_call() {
    let pool = Arc::new(WorkerPool::new(config(QueueKind::Transfer, 1, 4, 100)).unwrap());
    let gate = Gate::new();
    let (run, rest, rx) = stuck_run(&pool, &gate, 3);
    pool.submit_run(run, 4).unwrap();
    pool.wake_idle();
    gate.wait_started(1);
    // The rest runs on another worker (grown for it: the only one is
    // stuck) while the first call still blocks.
    let mut got: Vec<i32> = (0..3).map(|_| rx.recv_timeout(WAIT).unwrap()).collect();
    got.sort_unstable();
    assert_eq!(got, vec![1, 2, 3]);
    assert!(rest.0.lock().is_empty());
    gate.open();
    assert!(
        eventually(|| pool.stats().submitted == 0),
        "{:?}",
        pool.stats()
    );
    assert_eq!(pool.stats().completed, 4);
    assert!(pool.shutdown(WAIT));
}

#[test]
fn at_shutdown_the_rest_of_a_run_stuck_in_one_call_still_runs() {
    let pool = Arc::new(WorkerPool::new(config(QueueKind::Transfer, 2, 2, 100)).unwrap());
    let gate = Gate::new();
    let (run, _, rx) = stuck_run(&pool, &gate, 2);
    pool.submit_run(run, 3).unwrap();
    pool.wake_idle();
    gate.wait_started(1);
    let stopping = pool.clone();
    let stopped = thread::spawn(move || stopping.shutdown(WAIT));
    // The rest runs on the other worker while the first call blocks.
    let mut got: Vec<i32> = (0..2).map(|_| rx.recv_timeout(WAIT).unwrap()).collect();
    got.sort_unstable();
    assert_eq!(got, vec![1, 2]);
    gate.open();
    assert!(stopped.join().unwrap(), "shutdown drains");
    let s = pool.stats();
    assert_eq!((s.submitted, s.completed), (0, 3), "{s:?}");
}

/// The only worker blocked in its task: a run submitted then gets a thread
/// of its own, as a task would, while the blocker still blocks.
#[test]
fn a_run_submitted_while_the_only_worker_is_blocked_gets_a_new_thread() {
    let pool = Arc::new(WorkerPool::new(config(QueueKind::Transfer, 1, 2, 100)).unwrap());
    let gate = Gate::new();
    pool.submit(gate.blocker()).unwrap();
    gate.wait_started(1);
    let (tx, rx) = mpsc::channel();
    let on_worker = pool.clone();
    let run: Task = Box::new(move || {
        tx.send(()).ok();
        on_worker.step();
        on_worker.discount(1);
    });
    pool.submit_run(run, 2).unwrap();
    pool.wake_idle();
    runs_on_a_second_thread(&pool, gate, &rx);
}

/// `rx` hears from work queued behind the pool's only worker, blocked on
/// `gate`: it runs while the blocker still blocks, on a second thread; then
/// the gate opens, and the pool drains and stops.
fn runs_on_a_second_thread(pool: &WorkerPool, gate: Gate, rx: &mpsc::Receiver<()>) {
    assert!(
        rx.recv_timeout(WAIT / 2).is_ok(),
        "it waited behind the blocked worker: {:?}",
        pool.stats()
    );
    assert_eq!(pool.stats().largest_pool_size, 2, "{:?}", pool.stats());
    gate.open();
    assert!(
        eventually(|| pool.stats().submitted == 0),
        "{:?}",
        pool.stats()
    );
    assert!(pool.shutdown(WAIT));
}

/// A run is one thread's work however many calls it counts: a task
/// submitted while it runs grows the pool by one thread for itself, and the
/// next, once that thread is free, grows nothing (counting the run's calls
/// as tasks grew the pool by a thread per submit, to `max_threads`).
#[test]
fn a_run_counts_as_one_thread_when_the_pool_grows() {
    let pool = Arc::new(WorkerPool::new(config(QueueKind::Transfer, 1, 4, 100)).unwrap());
    let gate = Gate::new();
    let blocker = gate.blocker();
    let on_worker = pool.clone();
    // Ten calls; the first blocks. It shows the monitor no rest, so its
    // calls stay its own however long it blocks.
    let run: Task = Box::new(move || {
        blocker.run();
        on_worker.discount(9);
    });
    pool.submit_run(run, 10).unwrap();
    pool.wake_idle();
    gate.wait_started(1);
    let (tx, rx) = mpsc::channel();
    for n in 0..3 {
        let tx = tx.clone();
        pool.execute(move || {
            tx.send(n).ok();
        })
        .unwrap();
        assert_eq!(rx.recv_timeout(WAIT), Ok(n), "{:?}", pool.stats());
        // Done (its worker counts it after the send).
        assert!(
            eventually(|| pool.stats().submitted == 10),
            "{:?}",
            pool.stats()
        );
    }
    assert_eq!(
        pool.stats().largest_pool_size,
        2,
        "one thread for the run, one for the tasks: {:?}",
        pool.stats()
    );
    gate.open();
    assert!(
        eventually(|| pool.stats().submitted == 0),
        "{:?}",
        pool.stats()
    );
    assert_eq!(pool.stats().completed, 13);
    assert!(pool.shutdown(WAIT));
}

/// A run of twelve calls of 0.6 ms each, run as `dispatch::run` runs its
/// calls: none is stuck for a tick, but together they are long, so once
/// the run has gone on past the previous tick the monitor queues its rest
/// and other workers take it — calls overlap (one after another on one
/// thread, twelve took 7 ms while the other workers idled).
#[test]
fn a_long_run_of_short_calls_has_its_rest_spread_over_the_workers() {
    let pool = Arc::new(WorkerPool::new(config(QueueKind::Transfer, 1, 4, 100)).unwrap());
    let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (tx, rx) = mpsc::channel();
    let call = {
        let (now, most) = (now.clone(), most.clone());
        move || {
            let (now, most, tx) = (now.clone(), most.clone(), tx.clone());
            Box::new(move || {
                most.fetch_max(now.fetch_add(1, SeqCst) + 1, SeqCst);
                thread::sleep(Duration::from_micros(600));
                now.fetch_sub(1, SeqCst);
                tx.send(()).ok();
            }) as Task
        }
    };
    let first = call();
    let rest = Arc::new(TestRest(parking_lot::Mutex::new(
        (1..12).map(|_| call()).collect(),
    )));
    let on_worker = pool.clone();
    let run: Task = Box::new(move || {
        on_worker.hold_rest(Some(rest.clone() as Arc<dyn Rest>));
        first.run();
        loop {
            on_worker.step();
            let next = {
                let mut left = rest.0.lock();
                (!left.is_empty()).then(|| left.remove(0))
            };
            let Some(next) = next else {
                break;
            };
            on_worker.discount(1);
            next.run();
        }
        on_worker.hold_rest(None);
    });
    pool.submit_run(run, 12).unwrap();
    pool.wake_idle();
    for _ in 0..12 {
        rx.recv_timeout(WAIT).unwrap();
    }
    assert!(
        most.load(SeqCst) >= 2,
        "the run's calls ran one after another: {:?}",
        pool.stats()
    );
    assert!(
        eventually(|| pool.stats().submitted == 0),
        "{:?}",
        pool.stats()
    );
    assert_eq!(pool.stats().completed, 12);
    assert!(pool.shutdown(WAIT));
}

/// A task counted and queued while the only worker is blocked and none is
/// parked, without a thread started for it (what a submit that read the
/// counts while a run changed them does): the monitor starts one for it
/// within a few ticks, while the blocker still blocks.
#[test]
fn a_task_queued_with_no_worker_free_gets_a_thread_from_the_monitor() {
    let pool = WorkerPool::new(config(QueueKind::Transfer, 1, 2, 100)).unwrap();
    let gate = Gate::new();
    pool.submit(gate.blocker()).unwrap();
    gate.wait_started(1);
    let (tx, rx) = mpsc::channel();
    // Counted and queued as `WorkerPool::place` does when it does not grow.
    pool.shared.submitted.fetch_add(1, SeqCst);
    let task: Task = Box::new(move || {
        tx.send(()).ok();
    });
    let watch = pool.shared.queue.offer(task, true).ok().expect("queued");
    assert!(watch, "nobody is free to take it");
    pool.shared.monitor.nudge();
    runs_on_a_second_thread(&pool, gate, &rx);
}

/// A task that sends `n` on `tx` when it runs.
fn numbered(tx: &mpsc::Sender<usize>, n: usize) -> Task {
    let tx = tx.clone();
    Box::new(move || {
        tx.send(n).ok();
    })
}

/// A batch on a pool at its `max_threads` goes into the transfer queue
/// whole, wakes nobody until `wake_idle`, and every task runs exactly once.
#[test]
fn a_batch_goes_in_whole_and_runs_after_one_wake() {
    let pool = WorkerPool::new(config(QueueKind::Transfer, 2, 2, 100)).unwrap();
    assert!(eventually(|| pool.shared.queue.parked() == 2));
    let (tx, rx) = mpsc::channel();
    let mut batch: Vec<Task> = (0..10).map(|n| numbered(&tx, n)).collect();
    assert_eq!(pool.submit_batch(&mut batch), 10);
    assert!(batch.is_empty(), "every task taken");
    assert_eq!(pool.stats().queued, 10, "queued whole, nobody woken yet");
    pool.wake_idle();
    let mut ran: Vec<usize> = (0..10).map(|_| rx.recv_timeout(WAIT).unwrap()).collect();
    ran.sort_unstable();
    assert_eq!(ran, (0..10).collect::<Vec<_>>());
    assert!(pool.shutdown(WAIT));
    let s = pool.stats();
    assert_eq!((s.completed, s.rejected, s.submitted), (10, 0, 0), "{s:?}");
}

/// Over the bound, a batch is accepted as submits one after another would
/// be: its first tasks, up to the bound; the rest stay with the caller, in
/// order, counted as rejections. For both queue kinds.
#[test]
fn a_batch_over_the_bound_keeps_its_refused_tail_in_order() {
    for kind in KINDS {
        // Both threads blocked; room for 2 queued (the blocking queue's
        // size, the transfer queue's queue_size + max_threads - running).
        let pool = WorkerPool::new(config(kind, 2, 2, 2)).unwrap();
        let gate = Gate::new();
        pool.submit(gate.blocker()).unwrap();
        pool.submit(gate.blocker()).unwrap();
        gate.wait_started(2);
        let (tx, rx) = mpsc::channel();
        let mut batch: Vec<Task> = (0..5).map(|n| numbered(&tx, n)).collect();
        assert_eq!(pool.submit_batch(&mut batch), 2, "{kind}");
        assert_eq!(batch.len(), 3, "{kind}: the refused stay");
        assert_eq!(pool.stats().rejected, 3, "{kind}");
        // The refused are the batch's last three, in order.
        for (task, n) in batch.drain(..).zip(2..) {
            task.run();
            assert_eq!(rx.try_recv(), Ok(n), "{kind}");
        }
        gate.open();
        pool.wake_idle();
        let mut ran: Vec<usize> = (0..2).map(|_| rx.recv_timeout(WAIT).unwrap()).collect();
        ran.sort_unstable();
        assert_eq!(ran, vec![0, 1], "{kind}");
        assert!(pool.shutdown(WAIT));
        let s = pool.stats();
        assert_eq!((s.completed, s.submitted), (4, 0), "{kind}: {s:?}");
    }
}

/// A batch on a pool that may still grow is submitted task by task, so it
/// grows as those submits would (Tomcat's rule): with every thread
/// blocked, each of its tasks gets a thread of its own, up to the limit.
#[test]
fn a_batch_grows_the_pool_as_its_submits_would() {
    for kind in KINDS {
        let pool = WorkerPool::new(config(kind, 1, 4, 100)).unwrap();
        let gate = Gate::new();
        pool.submit(gate.blocker()).unwrap();
        gate.wait_started(1);
        let mut batch: Vec<Task> = (0..3).map(|_| gate.blocker()).collect();
        assert_eq!(pool.submit_batch(&mut batch), 3, "{kind}");
        // Three new threads, each running one blocker at once.
        gate.wait_started(3);
        assert_eq!(pool.stats().pool_size, 4, "{kind}");
        gate.open();
        assert!(pool.shutdown(WAIT));
    }
}

/// A shut-down pool refuses a batch whole, and it stays with the caller.
#[test]
fn a_shut_down_pool_refuses_a_batch_whole() {
    for kind in KINDS {
        let pool = WorkerPool::new(config(kind, 1, 1, 10)).unwrap();
        assert!(pool.shutdown(WAIT));
        let (tx, _rx) = mpsc::channel();
        let mut batch: Vec<Task> = (0..3).map(|n| numbered(&tx, n)).collect();
        assert_eq!(pool.submit_batch(&mut batch), 0, "{kind}");
        assert_eq!(batch.len(), 3, "{kind}");
        let s = pool.stats();
        assert_eq!((s.rejected, s.submitted), (3, 0), "{kind}: {s:?}");
    }
}
