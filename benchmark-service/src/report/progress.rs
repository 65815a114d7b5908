//! Live progress lines in the style of the Dubbo remoting performance test.
//!
//! While a long run is in flight the Dubbo test printed one line every 2 s:
//! `[HH:MM:SS] count: N, error: E, tps: T`, where `tps` is the rate over the last
//! interval (not since the start), which is what makes throughput *stability* visible —
//! the point of the Grizzly/Netty/Mina comparison. This module reproduces that line.
//!
//! Shape:
//! - [`progress_line`] is a pure formatter, so it is testable and reusable.
//! - [`ProgressMeter`] is the poll-style core: the runner hands it the current counters
//!   and gets the interval TPS back. Use it directly from a loop that already ticks.
//! - [`ProgressTicker`] owns one std thread that polls shared [`AtomicU64`] counters with a
//!   [`ProgressMeter`] and emits a line every interval until [`ProgressTicker::stop`] (or
//!   drop). A plain thread rather than a tokio task keeps it independent of the runtime
//!   flavour and, crucially, unaffected when the benchmark saturates the runtime's workers;
//!   it is bounded (exactly one thread, no queue) and stops within one wake-up.
//!
//! The timestamp is **UTC**, derived from [`SystemTime`] through the `time` crate's
//! calendar: the local time zone would need the system's time-zone database, and lines
//! from different machines compare directly in UTC.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use time::OffsetDateTime;

/// The Dubbo test's progress interval.
pub const DEFAULT_PROGRESS_INTERVAL: Duration = Duration::from_secs(2);

/// `HH:MM:SS` of a wall-clock time, in UTC (times before the epoch print `00:00:00`).
pub fn utc_hms(at: SystemTime) -> String {
    let t = utc(at);
    format!("{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second())
}

/// `YYYY-MM-DD HH:MM:SS UTC` of a wall-clock time (for report headers; times before the
/// epoch print the epoch).
pub fn utc_datetime(at: SystemTime) -> String {
    let t = utc(at);
    format!(
        "{:04}-{:02}-{:02} {} UTC",
        t.year(),
        u8::from(t.month()),
        t.day(),
        utc_hms(at)
    )
}

/// A wall-clock time as a UTC date and time, to the whole second. Times before the epoch,
/// and times past what [`OffsetDateTime`] holds (year 9999), become the epoch: a progress
/// line or a report header is never worth a panic.
fn utc(at: SystemTime) -> OffsetDateTime {
    at.duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_secs()).ok())
        .and_then(|secs| OffsetDateTime::from_unix_timestamp(secs).ok())
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// One Dubbo-style progress line: `[HH:MM:SS] count: N, error: E, tps: T`
/// (UTC time, `tps` rounded to an integer).
pub fn progress_line(at: SystemTime, count: u64, errors: u64, tps: f64) -> String {
    format!(
        "[{}] count: {count}, error: {errors}, tps: {:.0}",
        utc_hms(at),
        tps.max(0.0)
    )
}

/// One observation made by a [`ProgressMeter`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProgressSample {
    /// Wall-clock time of the observation.
    pub at: SystemTime,
    /// Counter value (completed calls so far).
    pub count: u64,
    /// Error counter value.
    pub errors: u64,
    /// Calls per second since the previous observation.
    pub tps: f64,
}

impl ProgressSample {
    /// This sample as a [`progress_line`].
    pub fn line(&self) -> String {
        progress_line(self.at, self.count, self.errors, self.tps)
    }
}

/// Poll-style interval-TPS computation: remembers the previous observation and reports
/// the rate since then.
#[derive(Debug, Clone)]
pub struct ProgressMeter {
    last_count: u64,
    last_at: Instant,
}

impl ProgressMeter {
    /// Starts measuring at `now` from an initial counter value.
    pub fn new(start_count: u64, now: Instant) -> Self {
        Self {
            last_count: start_count,
            last_at: now,
        }
    }

    /// Takes an observation at monotonic time `now` (wall time `at`) and returns it with
    /// the TPS since the previous one. A counter that went backwards counts as 0 new calls.
    pub fn sample(
        &mut self,
        count: u64,
        errors: u64,
        now: Instant,
        at: SystemTime,
    ) -> ProgressSample {
        let elapsed = now.saturating_duration_since(self.last_at).as_secs_f64();
        let delta = count.saturating_sub(self.last_count);
        let tps = if elapsed > 0.0 {
            delta as f64 / elapsed
        } else {
            0.0
        };
        self.last_count = count;
        self.last_at = now;
        ProgressSample {
            at,
            count,
            errors,
            tps,
        }
    }
}

/// Prints a progress line every interval from a background thread until stopped.
///
/// `count` should be incremented once per completed call (succeeded or failed — the
/// runner decides, Dubbo counted every completed call) and `errors` once per failed call.
#[derive(Debug)]
pub struct ProgressTicker {
    stop_tx: Option<mpsc::Sender<()>>,
    handle: Option<JoinHandle<u64>>,
}

impl ProgressTicker {
    /// Starts a ticker printing to stdout every `interval`.
    pub fn start(count: Arc<AtomicU64>, errors: Arc<AtomicU64>, interval: Duration) -> Self {
        Self::start_with_sink(count, errors, interval, |line: &str| println!("{line}"))
    }

    /// Starts a ticker that hands every line to `sink` (e.g. a logger or, in tests, a vec).
    ///
    /// An `interval` of zero is raised to 1 ms. If the thread cannot be spawned the ticker
    /// is inert (a warning is logged) — progress output is never worth failing a run over.
    pub fn start_with_sink<F>(
        count: Arc<AtomicU64>,
        errors: Arc<AtomicU64>,
        interval: Duration,
        mut sink: F,
    ) -> Self
    where
        F: FnMut(&str) + Send + 'static,
    {
        let interval = interval.max(Duration::from_millis(1));
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("brisk-progress".into())
            .spawn(move || {
                let start = Instant::now();
                let mut meter = ProgressMeter::new(count.load(Ordering::Relaxed), start);
                let mut lines = 0u64;
                let mut next = start + interval;
                loop {
                    let wait = next.saturating_duration_since(Instant::now());
                    match stop_rx.recv_timeout(wait) {
                        Err(RecvTimeoutError::Timeout) => {
                            let sample = meter.sample(
                                count.load(Ordering::Relaxed),
                                errors.load(Ordering::Relaxed),
                                Instant::now(),
                                SystemTime::now(),
                            );
                            sink(&sample.line());
                            lines += 1;
                            // Fixed schedule (no drift); skip ticks missed while stalled.
                            next += interval;
                            let now = Instant::now();
                            while next <= now {
                                next += interval;
                            }
                        }
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => return lines,
                    }
                }
            });
        match spawned {
            Ok(handle) => Self {
                stop_tx: Some(stop_tx),
                handle: Some(handle),
            },
            Err(e) => {
                tracing::warn!("progress ticker not started: {e}");
                Self {
                    stop_tx: None,
                    handle: None,
                }
            }
        }
    }

    /// Stops the ticker, waits for its thread, and returns how many lines it emitted.
    pub fn stop(mut self) -> u64 {
        self.shutdown()
    }

    fn shutdown(&mut self) -> u64 {
        if let Some(tx) = self.stop_tx.take() {
            let _ = tx.send(());
        }
        match self.handle.take() {
            Some(h) => h.join().unwrap_or(0),
            None => 0,
        }
    }
}

impl Drop for ProgressTicker {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    #[test]
    fn line_format_matches_dubbo_style() {
        // 1970-01-02 01:53:56 UTC
        let at = UNIX_EPOCH + Duration::from_secs(86_400 + 3600 + 53 * 60 + 56);
        assert_eq!(
            progress_line(at, 113_330, 0, 17_381.4),
            "[01:53:56] count: 113330, error: 0, tps: 17381"
        );
        assert_eq!(utc_hms(UNIX_EPOCH), "00:00:00");
    }

    #[test]
    fn utc_datetime_known_dates() {
        assert_eq!(utc_datetime(UNIX_EPOCH), "1970-01-01 00:00:00 UTC");
        // 2000-02-29 12:34:56 UTC = 951827696
        let at = UNIX_EPOCH + Duration::from_secs(951_827_696);
        assert_eq!(utc_datetime(at), "2000-02-29 12:34:56 UTC");
        // 2024-12-31 23:59:59 UTC = 1735689599
        let at = UNIX_EPOCH + Duration::from_secs(1_735_689_599);
        assert_eq!(utc_datetime(at), "2024-12-31 23:59:59 UTC");
    }

    #[test]
    fn meter_reports_interval_rate() {
        let t0 = Instant::now();
        let mut m = ProgressMeter::new(100, t0);
        let s = m.sample(4_100, 2, t0 + Duration::from_secs(2), UNIX_EPOCH);
        assert_eq!(s.tps, 2000.0);
        assert_eq!(s.count, 4_100);
        let s = m.sample(5_100, 2, t0 + Duration::from_secs(4), UNIX_EPOCH);
        assert_eq!(s.tps, 500.0);
        // Same instant: no division by zero.
        let s = m.sample(6_000, 2, t0 + Duration::from_secs(4), UNIX_EPOCH);
        assert_eq!(s.tps, 0.0);
    }

    #[test]
    fn ticker_emits_lines_and_stops() {
        let count = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink_lines = Arc::clone(&lines);
        let ticker = ProgressTicker::start_with_sink(
            Arc::clone(&count),
            Arc::clone(&errors),
            Duration::from_millis(20),
            move |l: &str| sink_lines.lock().push(l.to_owned()),
        );
        for _ in 0..10 {
            count.fetch_add(50, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(10));
        }
        errors.store(3, Ordering::Relaxed);
        // Wait (bounded) for a tick that saw the final counters, even on a loaded machine.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline
            && !lines
                .lock()
                .iter()
                .any(|l| l.contains("count: 500, error: 3, tps: "))
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        let emitted = ticker.stop();
        let lines = lines.lock();
        assert_eq!(emitted as usize, lines.len());
        assert!(lines[0].starts_with('['));
        assert!(lines
            .iter()
            .any(|l| l.contains("count: 500, error: 3, tps: ")));
    }

    #[test]
    fn dropping_the_ticker_stops_it_promptly() {
        let count = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let ticker =
            ProgressTicker::start_with_sink(count, errors, Duration::from_secs(3600), |_: &str| {});
        drop(ticker);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
