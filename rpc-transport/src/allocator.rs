//! Handing freed memory back to the operating system.
//!
//! glibc's allocator raises its mmap threshold to the size of the largest
//! block freed so far (up to 32 MiB), so after the first large frame every
//! later one comes from its heaps, and freeing them leaves the pages with the
//! process: measured, a server whose 20 connections each received three
//! 16 MiB requests kept 287–335 MiB of freed memory resident, with 0 MiB in
//! use, for as long as it ran; `malloc_trim` got some of it back, not the top
//! of each thread's heap (glibc trims that only past a threshold that grew
//! with the mmap threshold).
//!
//! Two remedies, both no-ops with other allocators and platforms:
//! - [`mmap_large_blocks`] fixes the mmap threshold at 1 MiB (turning its
//!   growth off), so every block of 1 MiB or more is its own mapping, given
//!   back the moment it is freed. A server does this at start unless told not
//!   to (`memory.return_to_os = false`): it is a process-wide setting.
//!   Measured: 11 MiB resident right after the load above (baseline 7 MiB),
//!   and the peak under a 64 MiB frame budget fell from 310–358 to 108 MiB.
//!   Fixing the mmap threshold also fixes glibc's trim threshold, which it
//!   would otherwise keep at twice the mmap threshold, at its 128 KiB
//!   default: a heap whose top had that much free was shrunk at every
//!   `free`, and a busy connection's next turn faulted the same pages back
//!   in, one per 4 KiB (measured: a server streaming 1 MB per turn spent a
//!   third of its CPU in page faults). So it sets the trim threshold to
//!   twice [`LARGE_BLOCK`], glibc's own ratio: each heap keeps at most
//!   2 MiB of free top, and [`release_freed`] trims past that when
//!   connections go idle.
//! - [`release_freed`] runs `malloc_trim` for smaller blocks when a connection
//!   goes idle — a client's that had large frames, a server's that served
//!   calls — at most once per [`MIN_INTERVAL`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The least time between two trims, process-wide.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// When the last trim ran, in ms after [`epoch`] (0: never).
static LAST_TRIM_MS: AtomicU64 = AtomicU64::new(0);
/// A trim is scheduled and has not started yet: later requests join it.
static SCHEDULED: AtomicBool = AtomicBool::new(false);

/// A monotonic origin for the times above (a wall clock stepping back would
/// stretch the wait).
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    // +1: 0 means "never".
    epoch().elapsed().as_millis() as u64 + 1
}

/// Clears [`SCHEDULED`] however the scheduled trim ends: run, or dropped
/// with its runtime before it ran.
struct Scheduled;

impl Drop for Scheduled {
    fn drop(&mut self) {
        SCHEDULED.store(false, Ordering::Release);
    }
}

/// Asks the allocator to return freed memory: now, or — when the last trim
/// was less than [`MIN_INTERVAL`] ago — once that interval is over. Requests
/// made while one is scheduled join it, so a burst of connections going idle
/// costs one trim, and the last of them is still followed by one. The trim
/// runs on a blocking thread (it can take milliseconds); without a tokio
/// runtime it runs here.
pub fn release_freed() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return; // nothing to trim: no timer or blocking thread for it
    }
    if SCHEDULED.swap(true, Ordering::AcqRel) {
        return;
    }
    let scheduled = Scheduled;
    let last = LAST_TRIM_MS.load(Ordering::Acquire);
    let due = if last == 0 {
        0
    } else {
        last + MIN_INTERVAL.as_millis() as u64
    };
    let wait = Duration::from_millis(due.saturating_sub(now_ms()));
    let run = move || {
        drop(scheduled);
        LAST_TRIM_MS.store(now_ms(), Ordering::Release);
        trim();
    };
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async move {
                tokio::time::sleep(wait).await;
                let _ = tokio::task::spawn_blocking(run).await;
            });
        }
        Err(_) => run(),
    }
}

/// Blocks at least this large are mapped on their own (see the module docs).
pub const LARGE_BLOCK: usize = 1 << 20;

/// Free memory at the top of a heap that `free` leaves in place (twice
/// [`LARGE_BLOCK`], as glibc's dynamic thresholds would).
pub const TRIM_SLACK: usize = 2 * LARGE_BLOCK;

/// Makes glibc map every block of [`LARGE_BLOCK`] bytes or more on its own,
/// so freeing it returns its memory to the system at once, and keep up to
/// [`TRIM_SLACK`] free at the top of each heap (see the module docs).
/// Process-wide and idempotent; does nothing under other allocators and
/// platforms. Returns whether the settings were made.
pub fn mmap_large_blocks() -> bool {
    static DONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DONE.get_or_init(set_mmap_threshold)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_mmap_threshold() -> bool {
    // SAFETY: `mallopt` takes two integers and only changes allocator tuning;
    // it is safe to call from any thread at any time.
    let mapped = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, LARGE_BLOCK as libc::c_int) };
    // SAFETY: as above.
    let trimmed = unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_SLACK as libc::c_int) };
    mapped == 1 && trimmed == 1
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_mmap_threshold() -> bool {
    false
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: `malloc_trim` takes no pointers and may be called from any
    // thread at any time; it only returns free pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[tokio::test]
    async fn requests_made_together_cost_one_trim_and_the_last_is_followed_by_one() {
        let before = LAST_TRIM_MS.load(Ordering::Acquire);
        for _ in 0..10 {
            release_freed();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while LAST_TRIM_MS.load(Ordering::Acquire) == before {
            assert!(
                std::time::Instant::now() < deadline,
                "the trim ran within its interval"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!SCHEDULED.load(Ordering::Acquire), "nothing left scheduled");
    }
}
