//! What one round of one scene measured ([`Sample`]) and the counters read at the edges of its
//! window ([`Counters`]: the server's and the load generator's CPU time, the TCP data segments
//! each side sent). The engine takes samples; [`super::reduce`] turns a scene's samples into
//! its result — both depend on this module, not on each other.

use std::time::Duration;

use crate::procfs::process_cpu_seconds;
use crate::report::{LatencyRecorder, RoundStats};
use crate::runner::http_load::recorder_percentages;
use crate::sockstat::{data_segments, SegmentCounts};

/// Shortest window whose CPU figures are reported (CPU time comes in 10 ms ticks).
const MIN_CPU_SAMPLE: Duration = Duration::from_millis(250);

/// Which edge of the measured window a reading is taken at.
#[derive(Debug, Clone, Copy)]
pub enum Edge {
    /// Just before the window opens.
    Open,
    /// Just after it closes.
    Close,
}

/// The server's and this process's counters at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Counters {
    server_cpu: Option<f64>,
    client_cpu: Option<f64>,
    segments: Option<SegmentCounts>,
}

impl Counters {
    /// Reads CPU times first (a `/proc` read each), then the segment counts (an `ss` run,
    /// some milliseconds, on a blocking thread so the callers keep their runtime threads).
    pub async fn read(server_pid: Option<u32>, server_port: Option<u16>, at: Edge) -> Counters {
        let segments = || async move {
            match server_port {
                Some(port) => tokio::task::spawn_blocking(move || data_segments(port))
                    .await
                    .ok()
                    .flatten(),
                None => None,
            }
        };
        let cpu = || {
            (
                server_pid.and_then(process_cpu_seconds),
                process_cpu_seconds(std::process::id()),
            )
        };
        // The CPU readings sit next to the window's edge, the slow `ss` run outside it.
        let (segments, (server_cpu, client_cpu)) = match at {
            Edge::Open => {
                let segments = segments().await;
                (segments, cpu())
            }
            Edge::Close => {
                let cpu = cpu();
                (segments().await, cpu)
            }
        };
        Counters {
            server_cpu,
            client_cpu,
            segments,
        }
    }
}

/// What one round of one scene measured.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Latencies and counts of the window (or the counted calls).
    pub stats: RoundStats,
    /// Server CPU seconds spent in the window.
    pub server_cpu: Option<f64>,
    /// TCP data segments the server sent in the window (≈ its writes).
    pub server_writes: Option<u64>,
    /// This process's (the load generator's) CPU seconds in the window.
    pub client_cpu: Option<f64>,
    /// TCP data segments the clients sent in the window (≈ their writes).
    pub client_writes: Option<u64>,
    /// Bytes the server sent in the window (TCP payload: its frames, as compressed).
    pub server_bytes: Option<u64>,
    /// Bytes the clients sent in the window.
    pub client_bytes: Option<u64>,
    /// Seed 001's latency percentages of the window (`p50_ms` … `p100_ms`), which its
    /// keep-alive table sets beside the HTTP tools' figures.
    pub percentages: Vec<(String, f64)>,
}

impl Sample {
    pub fn new(
        rec: &LatencyRecorder,
        elapsed: Duration,
        before: Counters,
        after: Counters,
    ) -> Sample {
        let cpu = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if elapsed >= MIN_CPU_SAMPLE => Some((b - a).max(0.0)),
            _ => None,
        };
        let segments = |f: fn(&SegmentCounts) -> u64| {
            Some(f(&after.segments?).saturating_sub(f(&before.segments?)))
        };
        Sample {
            stats: RoundStats::from_recorder(rec, elapsed),
            server_cpu: cpu(before.server_cpu, after.server_cpu),
            server_writes: segments(|c| c.server),
            client_cpu: cpu(before.client_cpu, after.client_cpu),
            client_writes: segments(|c| c.client),
            server_bytes: segments(|c| c.server_bytes),
            client_bytes: segments(|c| c.client_bytes),
            percentages: recorder_percentages(rec),
        }
    }

    /// A per-call figure: `total / calls completed in the window`.
    pub fn per_call(&self, total: Option<f64>, scale: f64) -> Option<f64> {
        let calls = self.stats.requests;
        (calls > 0).then_some(total? * scale / calls as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_keeps_seed_001s_percentages_for_the_keep_alive_table() {
        let mut rec = LatencyRecorder::new();
        for ms in 1..=100 {
            rec.record_ok(Duration::from_millis(ms));
        }
        let none = Counters {
            server_cpu: None,
            client_cpu: None,
            segments: None,
        };
        let sample = Sample::new(&rec, Duration::from_secs(1), none, none);
        let p50 = sample
            .percentages
            .iter()
            .find(|(k, _)| k == "p50_ms")
            .map(|(_, v)| *v)
            .expect("p50_ms");
        assert!((45.0..=55.0).contains(&p50), "{p50}");
        assert!(sample.percentages.iter().any(|(k, _)| k == "p100_ms"));
    }
}
