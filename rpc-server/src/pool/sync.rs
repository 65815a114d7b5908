//! The synchronisation primitives the worker pool is written against, so the
//! same pool code runs on real threads and under the [loom] model checker.
//!
//! # Normal builds
//!
//! Plain re-exports: `parking_lot`'s `Mutex`/`Condvar`, `std`'s atomics, `Arc`
//! and `thread`. No wrapper, no indirection — the pool compiles to exactly
//! what it would if it named those crates directly.
//!
//! # Under `--cfg brisk_loom`
//!
//! (Not the customary `--cfg loom`: `RUSTFLAGS` reach every crate in the
//! build, and tokio compiles itself without `tokio::net` and `tokio::fs` under
//! `cfg(loom)` — tokio issue 5500 — which breaks `rpc-transport`. A
//! project-specific name switches only this module.)
//!
//! The same names come from `loom`, behind thin wrappers that give loom's
//! `std`-shaped API the `parking_lot` shape the pool uses (`lock()` without a
//! `Result`, `Condvar::wait(&mut guard)`, `wait_until(&mut guard, deadline)`),
//! and a `thread` module whose `JoinHandle` has the `is_finished` the pool
//! calls (always `false` under loom: finished handles are simply kept until
//! `shutdown` joins them).
//!
//! ## Time under loom
//!
//! Loom has no clock, and its own `Condvar::wait_timeout` never times out. The
//! pool's only timed waits are the idle `keep_alive` wait of a thread above
//! `core_threads` (the retire path) and `WorkerPool::shutdown` with a finite
//! timeout. A deadline can only ever *cut a wait short*, so the shim models a
//! timed wait as one of two policies, chosen per model with
//! `set_timed_waits`:
//!
//! * `TimedWaits::Expire` — every timed wait "times out" at once: it
//!   releases the lock, yields (other threads run; loom explores which), takes
//!   the lock back and reports a time-out. This is the schedule in which
//!   `keep_alive` elapses as early as it possibly could, so the retire path
//!   runs at every idle moment loom can find; a time-out that comes later is
//!   the same decision taken in a state loom also reaches.
//! * `TimedWaits::Never` — a timed wait is an untimed one (`keep_alive` is
//!   infinite, loom's own semantics). Then a waiter can only leave on a
//!   notification, so a notification that is lost shows up as a loom
//!   deadlock instead of being papered over by a time-out.
//!
//! Every model that has timed waiters runs under both policies. The deadline
//! `Instant`s are still computed from the real clock; under loom they are
//! simply ignored.
//!
//! ## `SeqCst` under loom
//!
//! The pool's protocol is a set of Dekker-style handshakes on `SeqCst`
//! atomics: a submitter bumps `submitted` and then reads `shutdown` (or
//! `pool_size`), while a worker or `shutdown` writes the other variable and
//! then reads `submitted`; the single total order of `SeqCst` operations
//! guarantees that at least one side sees the other's write. Loom does not
//! implement that total order — it treats `SeqCst` loads as `Acquire` and lets
//! them return stale values (its README, "Limitations"; tokio-rs/loom#180) —
//! so with loom's atomics as they are, every such handshake is reported as a
//! (false) lost update — e.g. a draining worker reading `submitted == 0` from
//! before a submit that had already seen `shutdown == false`, which `SeqCst`
//! forbids.
//!
//! The loom wrappers below therefore perform a `SeqCst` *load* as a
//! read-modify-write that writes the value back unchanged (`fetch_add(0)`,
//! `fetch_or(false)`). Loom always lets an RMW read the newest value in
//! modification order, so the `SeqCst` operations of an execution read as in
//! the interleaving loom is exploring — which is what `SeqCst` promises when,
//! as here, every write to these variables is itself `SeqCst`. The cost: the
//! RMW is also a release write, so loom may see a few happens-before edges
//! the real program does not have. The pool never passes data through these
//! counters (tasks travel through the queue's lock or the spawn slot's
//! mutex), so those edges hide nothing the models check. `Relaxed` and
//! `Acquire` loads are left to loom as they are.
//!
//! [loom]: https://docs.rs/loom

#[cfg(not(brisk_loom))]
pub(crate) use parking_lot::{Condvar, Mutex};
#[cfg(not(brisk_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
#[cfg(not(brisk_loom))]
pub(crate) use std::sync::Arc;
#[cfg(not(brisk_loom))]
pub(crate) use std::thread;

#[cfg(brisk_loom)]
pub(crate) use loom::sync::Arc;
#[cfg(all(brisk_loom, test))]
pub(crate) use loom_impl::{set_timed_waits, timed_waits, TimedWaits};
#[cfg(brisk_loom)]
pub(crate) use loom_impl::{thread, AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex};

#[cfg(brisk_loom)]
mod loom_impl {
    use std::cell::Cell;
    use std::ops::{Deref, DerefMut};
    use std::sync::atomic::Ordering;
    use std::sync::PoisonError;
    use std::time::Instant;

    /// How a timed wait behaves under loom; see the [module docs](super).
    /// (Only the loom tests choose `Expire`.)
    #[cfg_attr(not(test), allow(dead_code))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum TimedWaits {
        /// A timed wait never times out (loom's own `wait_timeout`).
        Never,
        /// A timed wait releases the lock, yields, and times out.
        Expire,
    }

    std::thread_local! {
        // Loom runs every thread of a model as a coroutine on the OS thread
        // that called `loom::model`, so a plain thread-local is per model.
        static TIMED_WAITS: Cell<TimedWaits> = const { Cell::new(TimedWaits::Never) };
    }

    /// Sets the timed-wait policy for models run on this OS thread.
    #[cfg(test)]
    pub(crate) fn set_timed_waits(policy: TimedWaits) {
        TIMED_WAITS.with(|p| p.set(policy));
    }

    /// The timed-wait policy in force on this OS thread.
    pub(crate) fn timed_waits() -> TimedWaits {
        TIMED_WAITS.with(Cell::get)
    }

    /// Loom atomics whose `SeqCst` loads read the newest value (see the
    /// [module docs](super)); every other operation is loom's own.
    macro_rules! atomic_int {
        ($name:ident, $int:ty) => {
            #[derive(Debug, Default)]
            pub(crate) struct $name(loom::sync::atomic::$name);

            #[allow(dead_code)] // the pool uses a different subset per type
            impl $name {
                pub(crate) fn new(value: $int) -> Self {
                    $name(loom::sync::atomic::$name::new(value))
                }

                pub(crate) fn load(&self, order: Ordering) -> $int {
                    match order {
                        Ordering::SeqCst => self.0.fetch_add(0, Ordering::SeqCst),
                        order => self.0.load(order),
                    }
                }

                pub(crate) fn store(&self, value: $int, order: Ordering) {
                    match order {
                        Ordering::SeqCst => drop(self.0.swap(value, Ordering::SeqCst)),
                        order => self.0.store(value, order),
                    }
                }

                pub(crate) fn fetch_add(&self, value: $int, order: Ordering) -> $int {
                    self.0.fetch_add(value, order)
                }

                pub(crate) fn fetch_sub(&self, value: $int, order: Ordering) -> $int {
                    self.0.fetch_sub(value, order)
                }

                pub(crate) fn fetch_max(&self, value: $int, order: Ordering) -> $int {
                    self.0.fetch_max(value, order)
                }

                pub(crate) fn compare_exchange_weak(
                    &self,
                    current: $int,
                    new: $int,
                    success: Ordering,
                    failure: Ordering,
                ) -> Result<$int, $int> {
                    self.0.compare_exchange_weak(current, new, success, failure)
                }
            }
        };
    }

    atomic_int!(AtomicUsize, usize);
    atomic_int!(AtomicU64, u64);

    /// `AtomicBool` counterpart of the integer wrappers.
    #[derive(Debug, Default)]
    pub(crate) struct AtomicBool(loom::sync::atomic::AtomicBool);

    impl AtomicBool {
        pub(crate) fn new(value: bool) -> Self {
            AtomicBool(loom::sync::atomic::AtomicBool::new(value))
        }

        pub(crate) fn load(&self, order: Ordering) -> bool {
            match order {
                Ordering::SeqCst => self.0.fetch_or(false, Ordering::SeqCst),
                order => self.0.load(order),
            }
        }

        pub(crate) fn swap(&self, value: bool, order: Ordering) -> bool {
            self.0.swap(value, order)
        }

        pub(crate) fn store(&self, value: bool, order: Ordering) {
            self.0.store(value, order)
        }
    }

    /// `parking_lot::Mutex`-shaped wrapper around `loom::sync::Mutex`.
    #[derive(Debug)]
    pub(crate) struct Mutex<T> {
        inner: loom::sync::Mutex<T>,
    }

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex {
                inner: loom::sync::Mutex::new(value),
            }
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard {
                mutex: &self.inner,
                guard: Some(self.inner.lock().unwrap_or_else(PoisonError::into_inner)),
            }
        }
    }

    /// Holds loom's guard in an `Option` so that a condvar wait can take it by
    /// value through `&mut` (the `parking_lot` signature).
    pub(crate) struct MutexGuard<'a, T> {
        mutex: &'a loom::sync::Mutex<T>,
        guard: Option<loom::sync::MutexGuard<'a, T>>,
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.guard
                .as_ref()
                .expect("guard is only empty inside a wait")
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.guard
                .as_mut()
                .expect("guard is only empty inside a wait")
        }
    }

    /// The result of [`Condvar::wait_until`].
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct WaitTimeoutResult(bool);

    impl WaitTimeoutResult {
        pub(crate) fn timed_out(self) -> bool {
            self.0
        }
    }

    /// `parking_lot::Condvar`-shaped wrapper around `loom::sync::Condvar`.
    #[derive(Debug)]
    pub(crate) struct Condvar {
        inner: loom::sync::Condvar,
    }

    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar {
                inner: loom::sync::Condvar::new(),
            }
        }

        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let inner = guard
                .guard
                .take()
                .expect("guard is only empty inside a wait");
            guard.guard = Some(
                self.inner
                    .wait(inner)
                    .unwrap_or_else(PoisonError::into_inner),
            );
        }

        /// A timed wait, behaving as the current [`TimedWaits`] policy says;
        /// `deadline` itself is ignored (loom has no clock).
        pub(crate) fn wait_until<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            _deadline: Instant,
        ) -> WaitTimeoutResult {
            match timed_waits() {
                TimedWaits::Never => {
                    self.wait(guard);
                    WaitTimeoutResult(false)
                }
                TimedWaits::Expire => {
                    drop(guard.guard.take());
                    loom::thread::yield_now();
                    guard.guard = Some(guard.mutex.lock().unwrap_or_else(PoisonError::into_inner));
                    WaitTimeoutResult(true)
                }
            }
        }

        pub(crate) fn notify_one(&self) {
            self.inner.notify_one();
        }

        pub(crate) fn notify_all(&self) {
            self.inner.notify_all();
        }
    }

    /// `std::thread` as the pool uses it, on loom threads.
    pub(crate) mod thread {
        use std::io;

        pub(crate) use loom::thread::{current, yield_now};

        /// `std::thread::Builder` on loom.
        pub(crate) struct Builder {
            inner: loom::thread::Builder,
        }

        impl Builder {
            pub(crate) fn new() -> Self {
                Builder {
                    inner: loom::thread::Builder::new(),
                }
            }

            pub(crate) fn name(self, name: String) -> Self {
                Builder {
                    inner: self.inner.name(name),
                }
            }

            pub(crate) fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
            where
                F: FnOnce() -> T + Send + 'static,
                T: Send + 'static,
            {
                self.inner.spawn(f).map(JoinHandle)
            }
        }

        /// `std::thread::JoinHandle` on loom.
        pub(crate) struct JoinHandle<T>(loom::thread::JoinHandle<T>);

        impl<T> JoinHandle<T> {
            pub(crate) fn join(self) -> std::thread::Result<T> {
                self.0.join()
            }

            pub(crate) fn thread(&self) -> &loom::thread::Thread {
                self.0.thread()
            }

            /// Loom cannot ask without a scheduling point; report "running" so
            /// the handle is kept and joined by `shutdown`.
            pub(crate) fn is_finished(&self) -> bool {
                false
            }
        }
    }
}
