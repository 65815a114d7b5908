//! CPU time of the threads of one tokio runtime, read per thread.
//!
//! Every thread the runtime starts (workers and, if any, blocking-pool threads)
//! registers its POSIX per-thread CPU clock from `on_thread_start`
//! (`pthread_getcpuclockid(pthread_self())`; on Linux that clock id encodes the
//! thread id, so reading it from another thread is well defined and fails with
//! `EINVAL` instead of misbehaving once the thread is gone). A thread that stops
//! adds its final `CLOCK_THREAD_CPUTIME_ID` to an "exited" total from
//! `on_thread_stop` and unregisters. [`RuntimeCpu::total`] is that total plus
//! `clock_gettime` of every live thread: user + system time with nanosecond
//! resolution (the scheduler's `sum_exec_runtime`), unlike the 10 ms ticks of
//! `/proc/self/task/<tid>/stat`.
//!
//! Reading it before and after the measured window gives exactly the CPU the
//! runtime spent in that window, whatever else (the orchestrating main thread,
//! the other side's runtime, other processes) ran on the machine meanwhile.

use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Duration;

use parking_lot::Mutex;

#[derive(Default)]
struct Inner {
    live: Vec<(ThreadId, libc::clockid_t)>,
    exited_ns: u64,
    started: usize,
}

/// The CPU-time registry of one runtime's threads.
#[derive(Default)]
pub struct RuntimeCpu {
    inner: Mutex<Inner>,
}

impl RuntimeCpu {
    /// A fresh registry, to hook into a runtime builder.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Call from `on_thread_start`: registers the calling thread.
    pub fn register_current(&self) {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: pthread_self() is the calling, live thread; `clock` is a valid out pointer.
        let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) };
        let mut inner = self.inner.lock();
        inner.started += 1;
        if rc == 0 {
            inner.live.push((std::thread::current().id(), clock));
        } else {
            eprintln!("peer_compare: pthread_getcpuclockid failed ({rc}); this thread's CPU is not counted");
        }
    }

    /// Call from `on_thread_stop`: banks the calling thread's CPU time and unregisters it.
    pub fn unregister_current(&self) {
        let final_ns = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0);
        let id = std::thread::current().id();
        let mut inner = self.inner.lock();
        inner.exited_ns += final_ns;
        inner.live.retain(|(t, _)| *t != id);
    }

    /// CPU time (user + system) used so far by every thread the runtime started.
    pub fn total(&self) -> Duration {
        let inner = self.inner.lock();
        let live: u64 = inner.live.iter().filter_map(|(_, c)| clock_ns(*c)).sum();
        Duration::from_nanos(inner.exited_ns + live)
    }

    /// How many threads the runtime has started so far.
    pub fn threads_started(&self) -> usize {
        self.inner.lock().started
    }
}

fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out pointer; an invalid clock id only yields an error code.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}
