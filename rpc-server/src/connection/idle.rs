//! [`IdleWatch`]: the server side of the idle timeout, kept by the
//! connection task itself.
//!
//! A client pings when it has sent nothing for `heartbeat_interval`, so a
//! live client is never silent for long; a server closes a connection that
//! received nothing for `idle_timeout`. The check needs no task and no timer
//! of its own: every `min(heartbeat_interval, idle_timeout)` the connection's
//! one timer (which also carries the calls' deadlines) comes round, and the
//! watch compares the reader's byte count with the one it saw last time —
//! any byte counts, so a large frame that arrives slowly is not idleness.
//! A connection then costs no heartbeat task (about 500 bytes each, a tenth
//! of an idle connection's memory) and no shared activity counter.
//!
//! The same timer tidies: once a connection has had no call in progress and
//! received nothing for [`TIDY_AFTER`], it gives back what its calls left
//! behind (buffers kept for reuse, finished calls' entries) — the watch says
//! when, the connection knows what. A busy connection pays one timer reset
//! per [`TIDY_AFTER`] at most, not one per call, and an idle one tidies once.

use std::time::Duration;

use tokio::time::Instant;

/// How long a connection stays quiet (no call in progress, nothing read)
/// before it gives back the memory its calls left behind.
pub(super) const TIDY_AFTER: Duration = Duration::from_secs(1);

/// What the timer found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Check {
    /// Nothing to do.
    Busy,
    /// Quiet for [`TIDY_AFTER`]: give back what calls left behind.
    Tidy,
    /// Nothing received for the idle timeout (this long): close.
    Idle(Duration),
}

/// Decides, at each check, whether a connection has been silent too long,
/// and when it should tidy.
#[derive(Debug)]
pub(super) struct IdleWatch {
    /// Time between checks.
    every: Duration,
    timeout: Duration,
    /// Silence so far, in whole check periods.
    silent: Duration,
    /// Bytes read at the last check.
    seen: u64,
    next: Instant,
    /// A tidy planned at this time, if nothing is read before.
    tidy_at: Option<Instant>,
    /// Bytes read when the tidy was planned, or when it last ran.
    tidy_seen: u64,
    /// Tidied since the last byte: nothing more to give back.
    tidied: bool,
}

impl IdleWatch {
    /// A watch whose first check is one period after `now`.
    pub(super) fn new(heartbeat_interval: Duration, idle_timeout: Duration, now: Instant) -> Self {
        let every = heartbeat_interval
            .min(idle_timeout)
            .max(Duration::from_millis(1));
        IdleWatch {
            every,
            timeout: idle_timeout,
            silent: Duration::ZERO,
            seen: 0,
            next: now + every,
            tidy_at: None,
            tidy_seen: 0,
            tidied: true,
        }
    }

    /// When the timer must come round next.
    pub(super) fn next_check(&self) -> Instant {
        self.tidy_at.map_or(self.next, |at| at.min(self.next))
    }

    /// The connection has no call in progress at `now`: plans a tidy
    /// [`TIDY_AFTER`] later, unless one is planned or nothing was read
    /// since the last.
    #[inline]
    pub(super) fn quiet(&mut self, now: Instant, bytes_read: u64) {
        if self.tidy_at.is_some() || (self.tidied && bytes_read == self.tidy_seen) {
            return;
        }
        self.tidy_at = Some(now + TIDY_AFTER);
        self.tidy_seen = bytes_read;
        self.tidied = false;
    }

    /// The timer came round at `now`, the reader having read `bytes_read`
    /// bytes so far. Idleness is judged once per period; a late check
    /// counts as one period (a busy runtime must not turn one late wake-up
    /// into a timeout).
    pub(super) fn check(&mut self, now: Instant, bytes_read: u64) -> Check {
        let mut found = Check::Busy;
        if self.tidy_at.is_some_and(|at| at <= now) {
            self.tidy_at = None;
            if bytes_read == self.tidy_seen {
                self.tidied = true;
                found = Check::Tidy;
            }
        }
        if now < self.next {
            return found;
        }
        self.next = now + self.every;
        if bytes_read != self.seen {
            self.seen = bytes_read;
            self.silent = Duration::ZERO;
            return found;
        }
        self.silent += self.every;
        if self.silent >= self.timeout {
            return Check::Idle(self.silent);
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn silence_for_the_timeout_closes_and_any_byte_resets_it() {
        let start = Instant::now();
        let mut watch = IdleWatch::new(15 * S, 60 * S, start);
        assert_eq!(watch.next_check(), start + 15 * S);
        assert_eq!(watch.check(start + 14 * S, 0), Check::Busy, "not due yet");
        assert_eq!(watch.check(start + 15 * S, 0), Check::Busy);
        assert_eq!(watch.check(start + 30 * S, 0), Check::Busy);
        // A byte arrived: the silence starts over.
        assert_eq!(watch.check(start + 45 * S, 1), Check::Busy);
        for k in 4..7 {
            assert_eq!(watch.check(start + 15 * k * S, 1), Check::Busy);
        }
        assert_eq!(watch.check(start + 105 * S, 1), Check::Idle(60 * S));
    }

    #[test]
    fn checks_at_least_as_often_as_the_timeout() {
        let start = Instant::now();
        let mut watch = IdleWatch::new(60 * S, 5 * S, start);
        assert_eq!(watch.next_check(), start + 5 * S);
        assert_eq!(watch.check(start + 5 * S, 0), Check::Idle(5 * S));
    }

    #[test]
    fn a_late_check_counts_as_one_period() {
        let start = Instant::now();
        let mut watch = IdleWatch::new(S, 3 * S, start);
        assert_eq!(
            watch.check(start + 10 * S, 0),
            Check::Busy,
            "one period, however late"
        );
        assert_eq!(watch.next_check(), start + 11 * S);
    }

    #[test]
    fn a_quiet_connection_tidies_once_and_again_only_after_more_input() {
        let start = Instant::now();
        let mut watch = IdleWatch::new(15 * S, 60 * S, start);
        // A new connection has nothing to give back.
        watch.quiet(start, 0);
        assert_eq!(watch.next_check(), start + 15 * S);
        // A call came and went.
        watch.quiet(start + S, 100);
        assert_eq!(watch.next_check(), start + 2 * S);
        watch.quiet(start + S + S / 2, 100);
        assert_eq!(watch.next_check(), start + 2 * S, "planned once");
        assert_eq!(watch.check(start + 2 * S, 100), Check::Tidy);
        watch.quiet(start + 3 * S, 100);
        assert_eq!(watch.next_check(), start + 15 * S, "tidied: nothing new");
        // Input before the planned tidy: not quiet after all.
        watch.quiet(start + 4 * S, 200);
        assert_eq!(watch.check(start + 5 * S, 300), Check::Busy);
        watch.quiet(start + 6 * S, 300);
        assert_eq!(watch.check(start + 7 * S, 300), Check::Tidy);
    }
}
