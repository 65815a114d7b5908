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
//! once that call went to another of its connections; while the client has
//! no call in flight (between an answer and the caller's next call) its poll
//! also offers the thread's core to the OS at each turn
//! (`std::thread::yield_now`), since the caller may be a thread waiting for
//! that core to make the call. A stream the server
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
//! too, direct 1:1 twice the calls per second; with the client's poll
//! offering its core while no call is in flight ("The client's poll offers
//! its core"), no more 1:1 p99s at the poll's limit.
//! The default limit, 200 µs, is what that stretch needed: its clients came
//! back in 60–80 µs, past the 50 µs the poll started with.
//!
//! # Many connections in rhythm
//!
//! A poll spends a thread's idle time, and a server with many connections
//! in rhythm has little: its threads have the other connections' frames to
//! handle, which come without wake-ups anyway, and a thread that polls
//! instead of parking takes a core its callers may need (on a machine
//! shared with them, the CPU that makes their next requests). So a server's
//! connections form a [`PollGroup`], which counts the connections that
//! started a wait in rhythm within the last two windows of the limit each;
//! while more than one per two runtime threads (at least one) did, none of
//! them polls. Measured on 2 cores (BENCHMARKS.md): at 10 connections × 100
//! calls of 1 KiB, 6 % more calls per second and half the p99; one
//! pipelining connection (1:100) and a lone caller (1:1) poll as before.
//! Two lone callers on a two-thread server are not polled for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The connections of one server that may poll (see the module docs): it
/// counts those that started a wait in rhythm in the current window of the
/// limit and in the one before, and none polls while either count is more
/// than one per two runtime threads. Windows, not a count of connections
/// waiting now: a connection that stops coming back leaves the count by
/// itself, two windows later, without a timer.
#[derive(Debug)]
pub struct PollGroup {
    epoch: Instant,
    /// The current window's index (high 32 bits), the count of the window
    /// before it (next 16) and its own (low 16).
    windows: AtomicU64,
    most: u64,
}

impl PollGroup {
    /// The group of a server whose runtime has `workers` threads.
    pub fn new(workers: usize) -> Self {
        PollGroup {
            epoch: Instant::now(),
            windows: AtomicU64::new(0),
            most: (workers as u64 / 2).max(1),
        }
    }

    /// The index of the window of `limit` that `now` falls in (wrapping).
    fn window(&self, now: Instant, limit: Duration) -> u32 {
        let since = now.saturating_duration_since(self.epoch).as_micros();
        (since / limit.as_micros().max(1)) as u32
    }

    /// Counts a connection that starts a wait in rhythm in `window` (once
    /// per window: the caller remembers the last one it was counted in). A
    /// caller's clock may lag the group's newest window (read before an
    /// await, or preempted): the window before the current one is counted
    /// there, an older one not at all — the group never moves back.
    fn count(&self, window: u32) {
        let _ = self
            .windows
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |packed| {
                let (current, before, here) = unpack(packed);
                let ahead = window.wrapping_sub(current) as i32;
                Some(match ahead {
                    0 => pack(current, before, here.saturating_add(1)),
                    1 => pack(window, here, 1),
                    2.. => pack(window, 0, 1),
                    -1 => pack(current, before.saturating_add(1), here),
                    _ => packed,
                })
            });
    }

    /// Whether too many connections were in rhythm lately (as of `window`;
    /// a clock that lags the newest window sees that one).
    fn crowded(&self, window: u32) -> bool {
        let (current, before, here) = unpack(self.windows.load(Ordering::Relaxed));
        let lately = match window.wrapping_sub(current) as i32 {
            1 => here,
            2.. => 0,
            _ => before.max(here),
        };
        u64::from(lately) > self.most
    }
}

fn pack(window: u32, before: u16, here: u16) -> u64 {
    (u64::from(window) << 32) | (u64::from(before) << 16) | u64::from(here)
}

fn unpack(packed: u64) -> (u32, u16, u16) {
    ((packed >> 32) as u32, (packed >> 16) as u16, packed as u16)
}

/// Frames in a row that must come back within `busy_poll` before the
/// connection polls: one quick pair of frames is not yet a caller's rhythm.
const RHYTHM: u8 = 2;

/// One connection's busy-poll state (see the module docs). 40 bytes: it
/// lives in every connection's future, idle ones included.
#[derive(Debug)]
pub struct BusyPoll<'g> {
    /// When the connection started waiting, while no frame came since.
    waiting_since: Option<Instant>,
    /// How long to poll after the answers went out, in µs (`0`: never).
    limit_us: u32,
    /// Frames in a row that came within the limit of the answers before
    /// them (up to [`RHYTHM`]).
    quick: u8,
    /// Polling (until `waiting_since` + the limit) instead of parking.
    polling: bool,
    /// The window this connection was last counted in, in its group.
    counted_in: Option<u32>,
    /// The server's connections, if this is one of them.
    group: Option<&'g PollGroup>,
}

impl<'g> BusyPoll<'g> {
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
            counted_in: None,
            group: None,
        }
    }

    /// This connection is one of `group`'s (a server's connections): it
    /// polls only while the group is not crowded (see the module docs).
    pub fn in_group(mut self, group: &'g PollGroup) -> Self {
        self.group = Some(group);
        self
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
        if let Some(group) = self.group.filter(|_| self.quick >= RHYTHM) {
            let window = group.window(now, self.limit());
            if self.counted_in != Some(window) {
                self.counted_in = Some(window);
                group.count(window);
            }
        }
    }

    /// Whether the task should yield rather than park now. Reads the clock
    /// only while polling; once the limit has passed, polling is over until
    /// the next answers.
    pub fn keep_polling(&mut self) -> bool {
        self.polling && self.keep_polling_at(Instant::now())
    }

    fn keep_polling_at(&mut self, now: Instant) -> bool {
        let until = self.waiting_since.map(|since| since + self.limit());
        self.polling = self.polling
            && until.is_some_and(|until| now < until)
            && !self
                .group
                .is_some_and(|group| group.crowded(group.window(now, self.limit())));
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
        assert!(std::mem::size_of::<BusyPoll>() <= 40);
    }

    #[test]
    fn a_crowded_group_polls_for_none_of_its_connections() {
        // Two runtime threads: one connection in rhythm may poll.
        let group = PollGroup::new(2);
        let t = group.epoch;
        let mut a = BusyPoll::with_limit(LIMIT).in_group(&group);
        let mut b = BusyPoll::with_limit(LIMIT).in_group(&group);
        let t = calls(&mut a, t, SOON, 3);
        a.waits(t, true);
        assert!(a.keep_polling_at(t), "alone in rhythm: polled for");
        let t = calls(&mut b, t, SOON, 3);
        a.waits(t, true);
        assert!(!a.keep_polling_at(t), "b came back in rhythm too: crowded");
        assert!(!a.arrived(t + SOON), "not polled for");
        // b stops coming back: two windows later a is alone again.
        let t = t + 2 * LIMIT;
        a.waits(t, true);
        assert!(a.keep_polling_at(t), "alone again");

        // Four threads: two may poll, not three.
        let group = PollGroup::new(4);
        let mut polls: Vec<BusyPoll> = (0..3)
            .map(|_| BusyPoll::with_limit(LIMIT).in_group(&group))
            .collect();
        let t = group.epoch;
        let t = calls(&mut polls[0], t, SOON, 3);
        let t = calls(&mut polls[1], t, Duration::from_micros(1), 3);
        polls[0].waits(t, true);
        assert!(polls[0].keep_polling_at(t), "two of four threads");
        let t = calls(&mut polls[2], t, Duration::from_micros(1), 3);
        polls[0].waits(t, true);
        assert!(!polls[0].keep_polling_at(t), "three");
    }

    #[test]
    fn windows_count_each_connection_once_and_move_on() {
        let group = PollGroup::new(2);
        group.count(5);
        group.count(5);
        assert_eq!(unpack(group.windows.load(Ordering::Relaxed)), (5, 0, 2));
        assert!(group.crowded(5) && group.crowded(6) && !group.crowded(7));
        group.count(6);
        assert_eq!(unpack(group.windows.load(Ordering::Relaxed)), (6, 2, 1));
        assert!(group.crowded(6) && !group.crowded(7));
        group.count(9);
        assert_eq!(unpack(group.windows.load(Ordering::Relaxed)), (9, 0, 1));
        assert!(!group.crowded(9));
        // A lagging clock: the window before is counted there, older ones
        // not at all, and the group does not move back.
        group.count(8);
        assert_eq!(unpack(group.windows.load(Ordering::Relaxed)), (9, 1, 1));
        group.count(8);
        assert!(group.crowded(8) && group.crowded(9), "seen from either");
        group.count(3);
        assert_eq!(unpack(group.windows.load(Ordering::Relaxed)), (9, 2, 1));
        // Across the index's wrap.
        let group = PollGroup::new(2);
        group.count(u32::MAX);
        group.count(0);
        assert_eq!(unpack(group.windows.load(Ordering::Relaxed)), (0, 1, 1));
        group.count(u32::MAX);
        assert!(group.crowded(0));
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
