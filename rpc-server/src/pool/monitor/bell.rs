//! [`Monitor`]: the handle by which workers and submitters wake the
//! pool's monitor thread (`nudge`: there is work to watch again; `stop`:
//! the pool shuts down), and on which that thread sleeps.
//!
//! It holds no pool state, so the pool's shared state can own it while the
//! monitor's loop (`monitor/mod.rs`) reads that state.

use std::sync::atomic::Ordering::SeqCst;

use crate::pool::sync::{AtomicBool, Condvar, Mutex};

/// The monitor's sleep and wake-up.
pub(crate) struct Monitor {
    pub(super) asleep: AtomicBool,
    pub(super) lock: Mutex<()>,
    pub(super) wake: Condvar,
    /// Under loom (no monitor thread): whether anything nudged, so a model
    /// can play a monitor that sleeps until it is nudged.
    #[cfg(brisk_loom)]
    nudged: AtomicBool,
}

impl Monitor {
    pub(crate) fn new() -> Self {
        Monitor {
            asleep: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            #[cfg(brisk_loom)]
            nudged: AtomicBool::new(false),
        }
    }

    /// Wakes the monitor if it sleeps: the pool has work to watch again.
    pub(crate) fn nudge(&self) {
        #[cfg(brisk_loom)]
        self.nudged.swap(true, SeqCst);
        if self.asleep.load(SeqCst) {
            let _guard = self.lock.lock();
            self.wake.notify_one();
        }
    }

    /// Whether anything nudged the monitor yet (loom models only).
    #[cfg(all(brisk_loom, test))]
    pub(crate) fn was_nudged(&self) -> bool {
        self.nudged.load(SeqCst)
    }

    /// Wakes the monitor to see the shutdown flag (set before this call).
    pub(crate) fn stop(&self) {
        let _guard = self.lock.lock();
        self.wake.notify_one();
    }
}
