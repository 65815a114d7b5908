//! A worker's streak of tasks run back to back, as a clock: the end of one
//! pooled call is the start of the next.
//!
//! A pooled call reads the clock when it starts (whether its deadline has
//! passed) and when it ends (its latency, in its method's metrics). A worker
//! that runs calls back to back starts each one where the one before ended,
//! so that reading serves as the next call's start: one reading per call,
//! not two (each was ~1.4 % of the pool's CPU at 1:100:1024, `perf`). The
//! streak breaks when the worker finds the queue empty and waits: the next
//! call it runs reads the clock again. What a worker does between two calls
//! of a streak that is not a call (reading a lent socket, starting the calls
//! it read) counts in the next call's time, as the connection task's reads
//! count in direct dispatch, whose calls chain their readings the same way.

use std::cell::Cell;
use std::time::Instant;

thread_local! {
    /// When this thread's last pooled call ended, if it has not waited since.
    static LAST_END: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// When a call starting now on this thread starts: where the call before it
/// in the streak ended, or the clock's reading.
pub(crate) fn start() -> Instant {
    LAST_END.with(Cell::get).unwrap_or_else(Instant::now)
}

/// Reads the clock as a call ends on this thread: its end, and the start of
/// the streak's next call.
pub(crate) fn end() -> Instant {
    let now = Instant::now();
    LAST_END.with(|end| end.set(Some(now)));
    now
}

/// The worker is about to wait: the streak ends.
pub(super) fn broken() {
    LAST_END.with(|end| end.set(None));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streak_chains_ends_to_starts_until_it_breaks() {
        std::thread::spawn(|| {
            let first = start();
            let ended = end();
            assert!(ended >= first);
            assert_eq!(start(), ended, "the next call starts where this one ended");
            assert_eq!(start(), ended, "until a call ends, the start stays");
            broken();
            let fresh = start();
            assert!(fresh >= ended, "a broken streak reads the clock");
            let later = end();
            assert_eq!(start(), later);
        })
        .join()
        .expect("the streak test thread");
    }
}
