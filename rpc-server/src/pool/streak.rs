//! A worker's streak of calls run back to back, as a clock: the end of one
//! pooled call is the start of the next.
//!
//! A pooled call reads the clock when it starts (whether its deadline has
//! passed) and when it ends (its latency, in its method's metrics). A worker
//! that runs calls back to back starts each one where the one before ended,
//! so that reading serves as the next call's start: one reading per call,
//! not two (each was ~1.4 % of the pool's CPU at 1:100:1024, `perf`).
//!
//! # When the streak breaks
//!
//! The end a call reads is carried to the *next task* only
//! ([`next_task`], at the start of every task): a task that ends no call —
//! a handler still waiting after its poll, a job given up before it ran, a
//! worker's read of a lent socket — breaks the streak, and so does a wait
//! for work ([`broken`]). The next call then reads the clock, so a call's
//! start is never carried over time the worker spent on something that was
//! not a call, and a call whose deadline passed in the queue is still seen
//! as late. A call never starts before it was received. What a worker does
//! between ending one call and starting the next (delivering the answer)
//! counts in the next call's time, as the connection task's work does in
//! direct dispatch, whose calls chain their readings the same way.

use std::cell::Cell;
use std::time::Instant;

thread_local! {
    /// When the call the running task ended ended.
    static ENDED: Cell<Option<Instant>> = const { Cell::new(None) };
    /// When the call the task before this one ended ended, if it did.
    static CARRIED: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// A task starts on this worker: the end of a call the task before it
/// ended, if any, is where a call of this task starts.
pub(super) fn next_task() {
    CARRIED.with(|carried| carried.set(ENDED.with(Cell::take)));
}

/// When a call received at `received` and starting now on this thread
/// starts: where the call the task before ended (or when it was received,
/// if later: the worker read it after that end), or the clock's reading.
pub(crate) fn start(received: Instant) -> Instant {
    match CARRIED.with(Cell::take) {
        Some(end) => end.max(received),
        None => Instant::now(),
    }
}

/// Reads the clock as a call ends on this thread: its end, and the start of
/// a call in the next task.
pub(crate) fn end() -> Instant {
    let now = Instant::now();
    ENDED.with(|ended| ended.set(Some(now)));
    now
}

/// The worker is about to wait: the streak ends.
pub(super) fn broken() {
    ENDED.with(|ended| ended.set(None));
    CARRIED.with(|carried| carried.set(None));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streak_carries_one_end_to_the_next_task_only() {
        std::thread::spawn(|| {
            let received = Instant::now();
            next_task();
            let first = start(received);
            assert!(first >= received, "no streak yet: the clock");
            let ended = end();
            assert!(ended >= first);
            next_task();
            assert_eq!(
                start(received),
                ended,
                "the next task's call starts where this one ended"
            );
            let second_end = end();
            next_task();
            let read_later = Instant::now();
            assert_eq!(start(read_later), read_later, "not before it was received");
            // A task that ends no call breaks the streak.
            let _ = second_end;
            next_task();
            let fresh = start(received);
            assert!(
                fresh >= read_later,
                "a task without a call between: the clock"
            );
            // So does a wait.
            end();
            broken();
            next_task();
            let after_wait = start(received);
            assert!(after_wait >= fresh, "after a wait: the clock");
        })
        .join()
        .expect("the streak test thread");
    }
}
