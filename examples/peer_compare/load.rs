//! The closed-loop load generator shared by every implementation.
//!
//! `in_flight` tasks run on the client runtime; task `i` owns a clone of client
//! `i % clients.len()` and calls echo in a loop, one call at a time, so exactly
//! `in_flight` calls are outstanding at any moment. A call that completes while
//! the window is open is counted and its latency recorded (nanoseconds) in the
//! task's own histogram; the histograms are merged at the end, so the hot loop
//! shares nothing but two relaxed atomic flags.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;

/// One connection's (or one client's) echo call.
pub trait Caller: Clone + Send + 'static {
    /// Sends `payload` and returns what came back.
    fn call(&mut self, payload: Bytes) -> impl Future<Output = Result<Bytes, String>> + Send;
}

/// Flags the orchestrating thread flips to open and close the measured window.
#[derive(Default)]
pub struct Window {
    /// Calls completing while this is set are counted.
    pub recording: AtomicBool,
    /// Tasks exit after their current call once this is set.
    pub stop: AtomicBool,
}

/// What one run's tasks measured.
pub struct LoadResult {
    /// Latencies (ns) of the calls completed inside the window.
    pub hist: Histogram<u64>,
    /// Failed calls (any time).
    pub errors: u64,
    /// The first failure, for the report.
    pub first_error: Option<String>,
}

/// A task gives up after this many failed calls (a broken server must not spin forever).
const MAX_ERRORS_PER_TASK: u64 = 100;

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 120_000_000_000, 3).expect("valid histogram bounds")
}

/// Runs the closed loop until `window.stop`; bounded by `deadline` in case a
/// call never completes (the tasks are aborted then and the run is reported as hung).
pub async fn run<C: Caller>(
    clients: Vec<C>,
    in_flight: usize,
    payload: Bytes,
    window: Arc<Window>,
    deadline: Duration,
) -> Result<LoadResult, String> {
    assert!(!clients.is_empty(), "at least one client");
    let mut tasks = Vec::with_capacity(in_flight);
    for i in 0..in_flight {
        let client = clients[i % clients.len()].clone();
        tasks.push(tokio::spawn(task(client, payload.clone(), window.clone())));
    }
    drop(clients);
    let aborts: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
    let joined = tokio::time::timeout(deadline, futures::future::join_all(tasks)).await;
    let Ok(results) = joined else {
        aborts.iter().for_each(|a| a.abort());
        return Err(format!(
            "calls still outstanding {deadline:?} after the start: aborted"
        ));
    };
    let mut total = LoadResult {
        hist: new_hist(),
        errors: 0,
        first_error: None,
    };
    for r in results {
        let r = r.map_err(|e| format!("load task failed: {e}"))?;
        total.hist.add(&r.hist).map_err(|e| e.to_string())?;
        total.errors += r.errors;
        if total.first_error.is_none() {
            total.first_error = r.first_error;
        }
    }
    Ok(total)
}

async fn task<C: Caller>(mut client: C, payload: Bytes, window: Arc<Window>) -> LoadResult {
    let mut out = LoadResult {
        hist: new_hist(),
        errors: 0,
        first_error: None,
    };
    while !window.stop.load(Ordering::Relaxed) {
        let start = Instant::now();
        let result = client.call(payload.clone()).await;
        let nanos = start.elapsed().as_nanos() as u64;
        let failure = match result {
            Ok(echo) if echo.len() == payload.len() => {
                if window.recording.load(Ordering::Relaxed) {
                    out.hist.saturating_record(nanos.max(1));
                }
                None
            }
            Ok(echo) => Some(format!(
                "echo of {} bytes came back as {} bytes",
                payload.len(),
                echo.len()
            )),
            Err(e) => Some(e),
        };
        if let Some(e) = failure {
            out.errors += 1;
            out.first_error.get_or_insert(e);
            if out.errors >= MAX_ERRORS_PER_TASK {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    out
}
