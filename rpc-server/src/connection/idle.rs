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

use std::time::Duration;

use tokio::time::Instant;

/// Decides, at each check, whether a connection has been silent too long.
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
        }
    }

    /// When the next check is due.
    pub(super) fn next_check(&self) -> Instant {
        self.next
    }

    /// Checks, when due, with the reader's byte count: `Some(silence)` once
    /// nothing arrived for the idle timeout. A late check counts as one
    /// period (a busy runtime must not turn one late wake-up into a timeout).
    pub(super) fn check(&mut self, now: Instant, bytes_read: u64) -> Option<Duration> {
        if now < self.next {
            return None;
        }
        self.next = now + self.every;
        if bytes_read != self.seen {
            self.seen = bytes_read;
            self.silent = Duration::ZERO;
            return None;
        }
        self.silent += self.every;
        (self.silent >= self.timeout).then_some(self.silent)
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
        assert_eq!(watch.check(start + 14 * S, 0), None, "not due yet");
        assert_eq!(watch.check(start + 15 * S, 0), None);
        assert_eq!(watch.check(start + 30 * S, 0), None);
        // A byte arrived: the silence starts over.
        assert_eq!(watch.check(start + 45 * S, 1), None);
        for k in 4..7 {
            assert_eq!(watch.check(start + 15 * k * S, 1), None);
        }
        assert_eq!(watch.check(start + 105 * S, 1), Some(60 * S));
    }

    #[test]
    fn checks_at_least_as_often_as_the_timeout() {
        let start = Instant::now();
        let mut watch = IdleWatch::new(60 * S, 5 * S, start);
        assert_eq!(watch.next_check(), start + 5 * S);
        assert_eq!(watch.check(start + 5 * S, 0), Some(5 * S));
    }

    #[test]
    fn a_late_check_counts_as_one_period() {
        let start = Instant::now();
        let mut watch = IdleWatch::new(S, 3 * S, start);
        assert_eq!(
            watch.check(start + 10 * S, 0),
            None,
            "one period, however late"
        );
        assert_eq!(watch.next_check(), start + 11 * S);
    }
}
