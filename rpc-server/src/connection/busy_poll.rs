//! [`BusyPoll`]: a connection whose client answers fast is polled for its
//! next frame for a moment before its task parks.
//!
//! # Why
//!
//! A lone caller (one call or one stream item at a time) waits a full round
//! trip per message, and on loopback most of that round trip is wake-ups: the
//! runtime thread parked in `epoll_wait` must be woken when the next request
//! arrives (on this machine's VM, 10–15 µs of a 30 µs round trip). A thread
//! that is still running when the bytes land needs no wake-up.
//!
//! # How, and what it costs
//!
//! After writing the answers to a batch, a connection *in rhythm* — its last
//! request came within `busy_poll` of the answers before it —
//! yields (`tokio::task::yield_now`) instead of parking, until a frame comes
//! or `busy_poll` has passed since the answers went out. A yielded task runs
//! again only once the runtime thread has nothing else to do, and the
//! runtime polls its I/O driver without sleeping (`epoll_wait` with a zero
//! timeout) before it does: other connections' tasks run as usual, so this
//! only spends what would otherwise be idle time — at most `busy_poll` of
//! one thread's CPU per answered batch. It never spins while calls are on
//! the worker pool (the worker needs the core) or pending on the task, nor
//! for a client that is slower than `busy_poll`.
//!
//! Only on a runtime with one worker thread (`current_thread`, or
//! `multi_thread` with one worker): with more, another worker may be the one
//! blocked in `epoll_wait` when the bytes land, and it is woken for them
//! while this one polls a driver it cannot take — measured, the spin then
//! only burned CPU. On one worker it took the 1:1 round trip from 32–41 µs
//! to 22–24 µs (BENCHMARKS.md, "Busy-polling a lone caller").

use std::time::{Duration, Instant};

/// One connection's busy-poll state (see the module docs).
#[derive(Debug)]
pub(super) struct BusyPoll {
    /// How long to poll after the answers went out (`ZERO`: never).
    limit: Duration,
    /// When the last batch's answers went out, while no frame came since.
    answered: Option<Instant>,
    /// The client's last frame came within `limit` of the answers before it.
    in_rhythm: bool,
    /// Polling until then instead of parking.
    until: Option<Instant>,
}

impl BusyPoll {
    /// `limit` on a runtime with one worker thread; on a runtime with more
    /// the poll would not see the socket (see the module docs), so `ZERO`.
    pub(super) fn new(limit: Duration) -> Self {
        let one_worker = tokio::runtime::Handle::try_current()
            .is_ok_and(|runtime| runtime.metrics().num_workers() == 1);
        BusyPoll {
            limit: if one_worker { limit } else { Duration::ZERO },
            answered: None,
            in_rhythm: false,
            until: None,
        }
    }

    /// A frame arrived (the turn that handles it began at `now`): whether
    /// the client is in rhythm is how long after the last answers it came.
    pub(super) fn arrived(&mut self, now: Instant) {
        if let Some(answered) = self.answered.take() {
            self.in_rhythm = now.saturating_duration_since(answered) <= self.limit;
        }
        self.until = None;
    }

    /// The answers to the frames that arrived went out at `now`; `may_spin`:
    /// nothing else is in progress that needs this thread or another core.
    pub(super) fn answered(&mut self, now: Instant, may_spin: bool) {
        if self.limit.is_zero() {
            return;
        }
        self.answered = Some(now);
        self.until = (may_spin && self.in_rhythm).then(|| now + self.limit);
    }

    /// Whether the task should yield rather than park now. Reads the clock
    /// only while polling.
    pub(super) fn polling(&mut self) -> bool {
        match self.until {
            Some(until) if Instant::now() < until => true,
            Some(_) => {
                self.until = None;
                false
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_micros(50);

    fn on_one_worker() -> BusyPoll {
        BusyPoll {
            limit: LIMIT,
            answered: None,
            in_rhythm: false,
            until: None,
        }
    }

    #[test]
    fn a_client_that_comes_back_within_the_limit_is_polled_for() {
        let mut poll = on_one_worker();
        let t0 = Instant::now();
        poll.arrived(t0);
        poll.answered(t0, true);
        assert!(
            !poll.polling(),
            "the first frame says nothing of the rhythm"
        );
        poll.arrived(t0 + Duration::from_micros(20));
        poll.answered(Instant::now(), true);
        assert!(poll.polling());
        poll.arrived(Instant::now());
        assert!(!poll.polling(), "a frame came: no more polling");
    }

    #[test]
    fn a_slow_client_or_other_work_is_not_polled_for() {
        let mut poll = on_one_worker();
        let t0 = Instant::now();
        poll.answered(t0, true);
        poll.arrived(t0 + Duration::from_millis(1));
        poll.answered(t0 + Duration::from_millis(1), true);
        assert!(!poll.polling(), "came back after the limit");

        let mut poll = on_one_worker();
        poll.answered(t0, true);
        poll.arrived(t0 + Duration::from_micros(10));
        poll.answered(Instant::now(), false);
        assert!(
            !poll.polling(),
            "calls on the pool or pending need the core"
        );
    }

    #[test]
    fn polling_ends_at_the_limit() {
        let mut poll = on_one_worker();
        let t0 = Instant::now();
        poll.answered(t0, true);
        poll.arrived(t0);
        poll.answered(t0 - LIMIT, true);
        assert!(!poll.polling(), "the limit has passed since the answers");
        assert!(poll.until.is_none());
    }

    #[test]
    fn never_on_a_runtime_with_more_workers_or_when_off() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let poll = runtime.block_on(async { BusyPoll::new(LIMIT) });
        assert!(poll.limit.is_zero());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let poll = runtime.block_on(async { BusyPoll::new(LIMIT) });
        assert_eq!(poll.limit, LIMIT);
        let mut off = runtime.block_on(async { BusyPoll::new(Duration::ZERO) });
        let t0 = Instant::now();
        off.answered(t0, true);
        off.arrived(t0);
        off.answered(t0, true);
        assert!(!off.polling());
    }
}
