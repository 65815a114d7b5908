//! A worker's streak of tasks run back to back, as a clock: the end of one
//! pooled call is the start of the next.
//!
//! A pooled call reads the clock when it starts (whether its deadline has
//! passed) and when it ends (its latency, in its method's metrics). A worker
//! that runs calls back to back starts each one where the one before ended,
//! so that reading serves as the next call's start: one reading per call,
//! not two (each was ~1.4 % of the pool's CPU at 1:100:1024, `perf`). The
//! streak breaks when the worker finds the queue empty and waits: the next
//! call it runs reads the clock again. A call never starts before it was
//! received; what a worker does after that and before it (starting the
//! calls it read) counts in the call's time, as the connection task's work
//! does in direct dispatch, whose calls chain their readings the same way.

use std::cell::Cell;
use std::time::Instant;

thread_local! {
    /// When this thread's last pooled call ended, if it has not waited since.
    static LAST_END: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// When a call received at `received` and starting now on this thread
/// starts: where the call before it in the streak ended (or when it was
/// received, if later: the worker read it after that end), or the clock's
/// reading.
pub(crate) fn start(received: Instant) -> Instant {
    match LAST_END.with(Cell::get) {
        Some(end) => end.max(received),
        None => Instant::now(),
    }
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
            let received = Instant::now();
            let first = start(received);
            assert!(first >= received, "no streak yet: the clock");
            let ended = end();
            assert!(ended >= first);
            assert_eq!(
                start(received),
                ended,
                "the next call starts where this one ended"
            );
            assert_eq!(start(received), ended, "until a call ends, the start stays");
            let read_later = Instant::now();
            assert_eq!(start(read_later), read_later, "not before it was received");
            broken();
            let fresh = start(received);
            assert!(fresh >= ended, "a broken streak reads the clock");
            let later = end();
            assert_eq!(start(received), later);
        })
        .join()
        .expect("the streak test thread");
    }
}
