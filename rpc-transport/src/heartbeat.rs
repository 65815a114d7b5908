//! Heartbeats and the idle timeout.
//!
//! Rather than arm a timer on every read, the reader bumps a counter per read
//! that returned bytes ([`Activity`]; any byte counts, so a large frame that
//! arrives slowly keeps its connection open) and one low-frequency task per
//! connection compares it between ticks. When nothing arrived for `heartbeat_interval`, a client sends a
//! ping (the server answers pong, which counts as activity); when nothing arrived
//! for `idle_timeout`, the connection is closed as dead. This task is the
//! client's: a server does not ping and keeps its idle timeout on each
//! connection's own timer (rpc-server's `connection::idle`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rpc_codec::{FrameKind, OutFrame};

use crate::{CloseSignal, FrameWriter};

/// Reads that returned bytes on a connection, bumped by its reader.
#[derive(Debug, Default)]
pub struct Activity(AtomicU64);

impl Activity {
    /// Records that something was received.
    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads counted so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Spawns the heartbeat task of one client connection: pings through
/// `pinger` when idle, closes at the idle timeout. It ends when `close` fires.
pub fn spawn(
    activity: Arc<Activity>,
    interval: Duration,
    idle_timeout: Duration,
    pinger: FrameWriter,
    close: Arc<CloseSignal>,
) {
    let check = interval.min(idle_timeout).max(Duration::from_millis(1));
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + check, check);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last = activity.get();
        let mut idle = Duration::ZERO;
        let mut ping_id = 0u64;
        loop {
            tokio::select! {
                biased;
                _ = close.closed() => return,
                _ = ticker.tick() => {}
            }
            let now = activity.get();
            if now != last {
                last = now;
                idle = Duration::ZERO;
                continue;
            }
            idle += check;
            if idle >= idle_timeout {
                close.close(format!(
                    "idle timeout: nothing received for {} ms",
                    idle.as_millis()
                ));
                return;
            }
            if idle >= interval {
                ping_id = ping_id.wrapping_add(1);
                let _ = pinger.try_send(&OutFrame::control(FrameKind::Ping, ping_id));
            }
        }
    });
}
