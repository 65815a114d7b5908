//! [`BusyPoll`]: a connection whose peer answers fast is polled for its
//! next frame for a moment before its task parks. Both sides use it: a
//! server connection polls for its client's next request or stream item, a
//! client connection for the answer to its lone call.
//!
//! # Why
//!
//! A lone caller (one call or one stream item at a time) waits a full round
//! trip per message, and on loopback most of that round trip is wake-ups: the
//! runtime thread parked in `epoll_wait` must be woken when the next frame
//! arrives (on the test machine's VM, 10 µs to tens of µs of a 30–80 µs
//! round trip). A thread that is still running when the bytes land needs no
//! wake-up.
//!
//! # How, and what it costs
//!
//! A connection is *in rhythm* once its peer's last two frames (`RHYTHM`) each
//! came within `busy_poll` of the moment the connection started waiting for
//! them ([`BusyPoll::waits`]: a server after writing its answers, a client
//! after reading an answer while at most one call is in flight). Then, with
//! nothing else to do, the connection's task yields
//! (`tokio::task::yield_now`) instead of parking, and reads its socket at
//! each turn ([`FrameReader::read_now`](crate::FrameReader::read_now), a
//! non-blocking `recv` that does not wait for the runtime to see the socket
//! readable), until a frame comes or `busy_poll` has passed. A yielded task
//! runs again once its runtime thread has run what else was ready, so other
//! tasks keep their turns: the poll spends what would otherwise be idle
//! time, at most `busy_poll` of one thread's CPU each time the connection
//! starts waiting.
//!
//! The caller decides when it may poll (`waits(now, may_poll)`): a server
//! not for calls that go to its worker pool (the worker needs the core) nor
//! while a call is pending on the connection; a client only with at most one
//! call in flight on the whole client (a loaded client has answers coming
//! anyway, and its CPU is the server's too on a shared machine), and it stops
//! once that call went to another of its connections. A stream the server
//! pushes at the client, with items less than `busy_poll` apart, keeps the
//! client's reader polling for as long as it lasts.
//!
//! **TLS** connections poll only on a runtime with one worker: their bytes
//! can only be read through the session, after the runtime has seen the
//! socket readable, and tokio lets one worker at a time poll the I/O driver
//! — the one blocked in `epoll_wait` is woken for the socket while this one
//! polls a driver it cannot take (measured before `read_now`: the poll then
//! only burned CPU). With one worker the yield itself polls the driver
//! without sleeping.
//!
//! Measured (BENCHMARKS.md, "Busy-polling a lone caller", "Busy-polling on
//! every runtime" and "The client polls for a lone caller's answer"): on one
//! worker the direct 1:1 p50 10–18 µs lower; on two workers, reading the
//! socket itself, ping-pong with one caller 3.9–4.2× the messages per
//! second on a slow stretch of the test machine; with the client polling
//! too, direct 1:1 twice the calls per second.
//! The default limit, 200 µs, is what that stretch needed: its clients came
//! back in 60–80 µs, past the 50 µs the poll started with.

use std::time::{Duration, Instant};

/// Frames in a row that must come back within `busy_poll` before the
/// connection polls: one quick pair of frames is not yet a caller's rhythm.
const RHYTHM: u8 = 2;

/// One connection's busy-poll state (see the module docs). 24 bytes: it
/// lives in every connection's future, idle ones included.
#[derive(Debug)]
pub struct BusyPoll {
    /// When the connection started waiting, while no frame came since.
    waiting_since: Option<Instant>,
    /// How long to poll after the answers went out, in µs (`0`: never).
    limit_us: u32,
    /// Frames in a row that came within the limit of the answers before
    /// them (up to [`RHYTHM`]).
    quick: u8,
    /// Polling (until `waiting_since` + the limit) instead of parking.
    polling: bool,
}

impl BusyPoll {
    /// `limit` when the connection's socket can be read without the
    /// runtime's readiness (`reads_now`) or its runtime has one worker
    /// thread, `ZERO` otherwise (see the module docs).
    pub fn new(limit: Duration, reads_now: bool) -> Self {
        let one_worker = || {
            tokio::runtime::Handle::try_current()
                .is_ok_and(|runtime| runtime.metrics().num_workers() == 1)
        };
        Self::with_limit(if reads_now || one_worker() {
            limit
        } else {
            Duration::ZERO
        })
    }

    fn with_limit(limit: Duration) -> Self {
        BusyPoll {
            waiting_since: None,
            limit_us: u32::try_from(limit.as_micros()).unwrap_or(u32::MAX),
            quick: 0,
            polling: false,
        }
    }

    /// The largest limit a config accepts: a millisecond of spinning per
    /// wait is already more than any round trip it could save.
    pub const MAX_LIMIT: Duration = Duration::from_millis(1);

    /// Checks a configured limit (`busy_poll_us`) against [`MAX_LIMIT`](Self::MAX_LIMIT).
    pub fn validate_limit(limit: Duration) -> Result<(), rpc_core::RpcError> {
        if limit > Self::MAX_LIMIT {
            return Err(rpc_core::RpcError::config(
                "busy_poll_us",
                format!(
                    "must be at most {} (it is CPU spent each time a connection waits; 0 turns it off)",
                    Self::MAX_LIMIT.as_micros()
                ),
            ));
        }
        Ok(())
    }

    /// Whether this connection may ever poll (a limit, and a socket it can
    /// read or a one-worker runtime): when not, callers skip the clock.
    pub fn is_on(&self) -> bool {
        self.limit_us > 0
    }

    fn limit(&self) -> Duration {
        Duration::from_micros(u64::from(self.limit_us))
    }

    /// The rhythm starts over: a server connection whose turn handed calls
    /// to the worker pool (the worker that runs them needs the core).
    pub fn start_over(&mut self) {
        self.quick = 0;
        self.stop();
    }

    /// Ends a poll in progress (what it waits for will not come here);
    /// the rhythm is kept.
    pub fn stop(&mut self) {
        self.polling = false;
        self.waiting_since = None;
    }

    /// A frame arrived (handled from `now`): it keeps the rhythm if it came
    /// within the limit of the start of the wait. Returns whether the
    /// connection was polling for it (a wake-up saved).
    pub fn arrived(&mut self, now: Instant) -> bool {
        if let Some(since) = self.waiting_since.take() {
            self.quick = if now.saturating_duration_since(since) <= self.limit() {
                (self.quick + 1).min(RHYTHM)
            } else {
                0
            };
        }
        std::mem::take(&mut self.polling)
    }

    /// The connection starts waiting for its peer at `now` (a server's
    /// answers went out, a client read an answer); `may_poll`: polling is
    /// allowed now (see the module docs).
    pub fn waits(&mut self, now: Instant, may_poll: bool) {
        if self.limit_us == 0 {
            return;
        }
        self.waiting_since = Some(now);
        self.polling = may_poll && self.quick >= RHYTHM;
    }

    /// Whether the task should yield rather than park now. Reads the clock
    /// only while polling; once the limit has passed, polling is over until
    /// the next answers.
    pub fn keep_polling(&mut self) -> bool {
        self.polling && self.keep_polling_at(Instant::now())
    }

    fn keep_polling_at(&mut self, now: Instant) -> bool {
        let until = self.waiting_since.map(|since| since + self.limit());
        self.polling = self.polling && until.is_some_and(|until| now < until);
        self.polling
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_micros(50);
    const SOON: Duration = Duration::from_micros(20);

    /// Waits from `t`, the next frame `gap` later, `times` times; returns
    /// when the last wait began.
    fn calls(poll: &mut BusyPoll, mut t: Instant, gap: Duration, times: usize) -> Instant {
        for _ in 0..times {
            poll.waits(t, true);
            t += gap;
            poll.arrived(t);
            t += Duration::from_micros(1);
        }
        t
    }

    #[test]
    fn a_client_that_keeps_coming_back_within_the_limit_is_polled_for() {
        let mut poll = BusyPoll::with_limit(LIMIT);
        let t = calls(&mut poll, Instant::now(), SOON, 1);
        poll.waits(t, true);
        assert!(!poll.keep_polling_at(t), "one quick frame is not a rhythm");
        poll.arrived(t + SOON);
        let t = t + SOON + Duration::from_micros(1);
        poll.waits(t, true);
        assert!(poll.keep_polling_at(t + SOON), "two in a row are");
        assert!(poll.arrived(t + SOON), "it was polled for");
        assert!(
            !poll.keep_polling_at(t + SOON),
            "a frame came: no more polling"
        );
    }

    #[test]
    fn a_slow_client_or_pending_work_is_not_polled_for() {
        let mut poll = BusyPoll::with_limit(LIMIT);
        let t = calls(&mut poll, Instant::now(), SOON, 3);
        let t = calls(&mut poll, t, Duration::from_millis(1), 1);
        poll.waits(t, true);
        assert!(!poll.keep_polling_at(t), "one slow frame breaks the rhythm");

        let mut poll = BusyPoll::with_limit(LIMIT);
        let t = calls(&mut poll, Instant::now(), SOON, 3);
        poll.waits(t, false);
        assert!(!poll.keep_polling_at(t), "a pending call needs the thread");
    }

    #[test]
    fn polling_ends_at_the_limit() {
        let mut poll = BusyPoll::with_limit(LIMIT);
        let t = calls(&mut poll, Instant::now(), SOON, 3);
        poll.waits(t, true);
        assert!(poll.keep_polling_at(t + LIMIT - Duration::from_micros(1)));
        assert!(!poll.keep_polling_at(t + LIMIT));
        assert!(!poll.polling, "over until the next answers");
        assert!(!poll.keep_polling());
    }

    #[test]
    fn starting_over_or_stopping_ends_a_poll_in_progress() {
        for end in [BusyPoll::start_over, BusyPoll::stop] {
            let mut poll = BusyPoll::with_limit(LIMIT);
            let t = calls(&mut poll, Instant::now(), SOON, 3);
            poll.waits(t, true);
            assert!(poll.keep_polling_at(t));
            end(&mut poll);
            assert!(!poll.keep_polling_at(t));
            assert!(!poll.arrived(t + SOON), "not polled for");
        }
    }

    #[test]
    fn it_stays_small() {
        assert!(std::mem::size_of::<BusyPoll>() <= 24);
    }

    #[test]
    fn starting_over_each_turn_keeps_the_connection_from_polling() {
        let mut poll = BusyPoll::with_limit(LIMIT);
        let t = calls(&mut poll, Instant::now(), SOON, 3);
        poll.start_over();
        poll.waits(t, true);
        assert!(!poll.keep_polling_at(t));
        let t = calls(&mut poll, t, SOON, 1);
        poll.start_over();
        let t = calls(&mut poll, t, SOON, 1);
        poll.waits(t, true);
        assert!(
            !poll.keep_polling_at(t),
            "a pooled call in every other turn"
        );
    }

    #[test]
    fn never_for_tls_with_more_workers_or_when_off() {
        let two = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        assert_eq!(
            two.block_on(async { BusyPoll::new(LIMIT, false) }).limit_us,
            0
        );
        assert_eq!(
            two.block_on(async { BusyPoll::new(LIMIT, true) }).limit(),
            LIMIT
        );
        let one = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(
            one.block_on(async { BusyPoll::new(LIMIT, false) }).limit(),
            LIMIT
        );
        let mut off = one.block_on(async { BusyPoll::new(Duration::ZERO, true) });
        let t = calls(&mut off, Instant::now(), SOON, 3);
        off.waits(t, true);
        assert!(!off.keep_polling_at(t));
    }
}
