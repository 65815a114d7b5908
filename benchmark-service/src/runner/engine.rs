//! The one load engine of the suite: drives any player's client through a scene, round by
//! round, and measures it the same way whichever framework is under test.
//!
//! A *point* (see [`Plan::points`]) is a set of scenes that differ only in player and brisk
//! options. [`run_point`] connects every scene's client, then runs round 1 of each scene,
//! round 2 of each, … — interleaved, so a slow moment of the shared machine lands on every
//! variant — and reduces each scene's rounds to medians ([`super::reduce::scene_result`]).
//!
//! A round is either
//! - **timed** (the default): the callers run through a warm-up, then a measured window of
//!   `scene_secs`; calls completing inside the window count and their latencies are recorded;
//! - **counted** (jkbenchmark's mode, `--scene-secs 0`): `warmup` calls, then `requests`
//!   calls split evenly between the callers; the round lasts as long as they take.
//!
//! Call modes, as jkbenchmark defined them and the same for every player:
//! - **sync** — `concurrency` tasks, each waiting for its answer before the next call;
//! - **async** — `concurrency` callers that fire calls without awaiting each (every call its
//!   own task, so completions run on any runtime thread like jkrpc's callbacks), keeping up to
//!   `async_depth` in flight each when timed, or firing their whole share (bounded only by
//!   `max_in_flight`) when counted.
//!
//! Key `i % 10 + 1` like jkbenchmark. Every answer is checked ([`Reply::check`]): the record
//! with the asked id, or the echoed bytes. A failed call is counted and described in an
//! [`ErrorTally`]; it never stops the run. Around the measured window the runner reads the
//! server process's and its own CPU time ([`crate::procfs::process_cpu_seconds`]) and the TCP data segments
//! each side sent over the server's port ([`crate::sockstat::data_segments`]), which give CPU µs and writes (segments) per
//! call on each side.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::players::{brisk::BriskOptions, CallError, ClientSetup, PlayerClient, Reply};
use crate::report::{BatchedRecorder, LatencyRecorder, SceneResult, SharedRecorder};

use super::plan::{CallMode, ConnectKind, Plan, Scenario, Scene};
use super::reduce::{print_scene, scene_result};
use super::sample::{Counters, Edge, Sample};
use super::RunError;

pub use crate::players::brisk::{apply_target, client_config, probe, registry_target};

/// Distinct error descriptions kept per scene (the rest are counted as "other errors").
const MAX_ERROR_KINDS: usize = 8;

/// A caller that fails waits this long before its next call, so a broken server is not
/// hammered in a tight loop for the whole window.
const ERROR_BACKOFF: Duration = Duration::from_millis(1);

/// The largest payload each sync caller copies for itself (see [`SceneCtx::own_payload`]):
/// a few KiB, so that a hundred callers' copies still sit in the cache the shared payload did.
const OWN_PAYLOAD_MAX: usize = 4 * 1024;

/// How long after the window closes the callers may take to finish their last calls, beyond
/// the per-call timeout.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// Counts failed calls by description, so a report can say *why* calls failed.
#[derive(Debug, Default)]
pub struct ErrorTally {
    kinds: Mutex<BTreeMap<String, u64>>,
}

impl ErrorTally {
    /// Counts one error.
    pub fn note(&self, error: &CallError) {
        let mut text = error.to_string();
        if text.len() > 120 {
            let mut cut = 120;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push('…');
        }
        let mut kinds = self.kinds.lock();
        if kinds.len() >= MAX_ERROR_KINDS && !kinds.contains_key(&text) {
            text = "other errors".to_owned();
        }
        *kinds.entry(text).or_insert(0) += 1;
    }

    /// The counts so far, by description.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.kinds.lock().clone()
    }
}

/// What every caller of a scene shares.
struct SceneCtx {
    client: PlayerClient,
    scenario: Scenario,
    payload: Bytes,
    call_mode: CallMode,
    concurrency: u32,
    async_depth: usize,
    /// Count mode, async: the shared in-flight bound (`max_in_flight`).
    limit: Option<Arc<Semaphore>>,
    /// Timed rounds: calls completing while this is set are recorded.
    recording: AtomicBool,
    /// Timed rounds: callers stop firing once this is set.
    stop: AtomicBool,
    /// Failed calls outside the measured windows (warm-ups, drains), over all rounds.
    errors_outside_window: AtomicU64,
    tally: ErrorTally,
}

impl SceneCtx {
    /// One checked call of `payload` (a sync caller's [`own_payload`](Self::own_payload), an
    /// async caller's the scene's): the player's call, then the reply checked against what was
    /// asked.
    async fn call(&self, caller: usize, key: i64, payload: &Bytes) -> Result<(), CallError> {
        let reply: Reply = self
            .client
            .call(caller, self.scenario, key, payload)
            .await?;
        reply.check(self.scenario, key, payload)
    }

    /// The scene's payload, in an allocation of a sync caller's own when it is small.
    ///
    /// Every call clones its payload (a reference count) and drops the clone: on one `Bytes`
    /// shared by every caller, those are two atomic writes per call to a line both runtime
    /// threads write — a cost of the harness, not of the player. A sync caller's calls run in
    /// its one task, so its own copy's count is written by one thread at a time. An async
    /// caller's calls are tasks of their own on either thread, and each would clone the copy
    /// once more to move it in: they keep the scene's payload. A payload above
    /// [`OWN_PAYLOAD_MAX`] stays shared: its count costs little beside its bytes, and copies
    /// per caller would crowd the cache.
    fn own_payload(&self) -> Bytes {
        if self.payload.len() <= OWN_PAYLOAD_MAX {
            Bytes::copy_from_slice(&self.payload)
        } else {
            self.payload.clone()
        }
    }

    /// Records a finished call. Inside the window (`counted`) it goes into the round's
    /// figures; outside it (warm-up, drain) only a failure is kept, in
    /// `errors_outside_window`, so an error never hides and never changes the window's TPS.
    /// Every failure is described in the tally. True when the caller's batch went into the
    /// round's recorder (a pause of the caller's own, see [`CallClock`]).
    fn record(
        &self,
        rec: &mut BatchedRecorder,
        elapsed: Duration,
        result: &Result<(), CallError>,
        counted: bool,
    ) -> bool {
        match (result, counted) {
            (Ok(()), true) => return rec.record_ok(elapsed),
            (Ok(()), false) => {}
            (Err(e), counted) => {
                if counted {
                    rec.record_err(elapsed);
                } else {
                    self.errors_outside_window.fetch_add(1, Ordering::Relaxed);
                }
                self.tally.note(e);
            }
        }
        false
    }
}

fn key_of(i: u64) -> i64 {
    (i % 10 + 1) as i64
}

/// A scene with its client connected and its server known.
pub struct Variant {
    /// The scene.
    pub scene: Scene,
    /// The server's process (for its CPU time), when it is a child.
    pub server_pid: Option<u32>,
    /// The server's port (for the segments each side sent), when the address names one.
    server_port: Option<u16>,
    ctx: Arc<SceneCtx>,
}

impl Variant {
    /// Connects `scene`'s client to the server at `addr`.
    pub async fn connect(
        scene: &Scene,
        plan: &Plan,
        addr: &str,
        server_pid: Option<u32>,
    ) -> Result<Variant, RunError> {
        let callers = scene.concurrency.max(1) as usize;
        let setup = ClientSetup {
            addr,
            connections: scene.connections,
            calls_in_flight: match scene.call_mode {
                CallMode::Sync => callers,
                CallMode::Async => callers.saturating_mul(plan.async_depth.max(1)),
            },
            timeout: plan.timeout,
        };
        let options = BriskOptions {
            connect: scene.connect,
            write_mode: scene.write_mode,
            serializer: scene.serializer,
            compression: scene.compression,
            coalesce_calls: plan.coalesce_calls,
        };
        let volo_transport = scene.volo_transport.unwrap_or_default();
        let client = PlayerClient::connect(scene.player, &setup, &options, volo_transport)
            .await
            .map_err(|e| RunError::Connect(format!("{}: {e}", scene.player)))?;
        let payload = if scene.scenario.uses_payload() {
            Bytes::from(scene.payload_kind.bytes(scene.payload as usize))
        } else {
            Bytes::new()
        };
        let limit = match (scene.call_mode, plan.scene_secs) {
            (CallMode::Async, None) => plan.max_in_flight.map(|n| Arc::new(Semaphore::new(n))),
            _ => None,
        };
        Ok(Variant {
            scene: scene.clone(),
            server_pid,
            // Segment counts go with their sockets: a connection per call takes its count away.
            server_port: match scene.connect {
                ConnectKind::PerCall => None,
                _ => addr.parse::<std::net::SocketAddr>().ok().map(|a| a.port()),
            },
            ctx: Arc::new(SceneCtx {
                client,
                scenario: scene.scenario,
                payload,
                call_mode: scene.call_mode,
                concurrency: scene.concurrency,
                async_depth: plan.async_depth.max(1),
                limit,
                recording: AtomicBool::new(false),
                stop: AtomicBool::new(false),
                errors_outside_window: AtomicU64::new(0),
                tally: ErrorTally::default(),
            }),
        })
    }

    /// Runs one round (timed or counted, as the plan says).
    pub async fn round(&self, plan: &Plan) -> Result<Sample, RunError> {
        match plan.scene_secs {
            Some(window) => {
                self.timed_round(plan.warmup_time, window, plan.timeout)
                    .await
            }
            None => {
                self.counted_round(plan.warmup, self.scene.requests, plan.timeout)
                    .await
            }
        }
    }

    /// Closes the client.
    pub fn close(&self) {
        self.ctx.client.close();
    }

    async fn timed_round(
        &self,
        warmup: Duration,
        window: Duration,
        timeout: Duration,
    ) -> Result<Sample, RunError> {
        let ctx = &self.ctx;
        ctx.recording.store(false, Ordering::Relaxed);
        ctx.stop.store(false, Ordering::Relaxed);
        let mut callers = JoinSet::new();
        let recorder = SharedRecorder::default();
        for caller in 0..ctx.concurrency.max(1) as usize {
            let ctx = ctx.clone();
            let rec = BatchedRecorder::new(&recorder);
            callers.spawn(async move {
                match ctx.call_mode {
                    CallMode::Sync => timed_sync(ctx, caller, rec).await,
                    CallMode::Async => timed_async(ctx, caller, rec).await,
                }
            });
        }
        tokio::time::sleep(warmup).await;
        let before = Counters::read(self.server_pid, self.server_port, Edge::Open).await;
        ctx.recording.store(true, Ordering::Relaxed);
        let opened = Instant::now();
        tokio::time::sleep(window).await;
        ctx.recording.store(false, Ordering::Relaxed);
        let elapsed = opened.elapsed();
        let after = Counters::read(self.server_pid, self.server_port, Edge::Close).await;
        ctx.stop.store(true, Ordering::Relaxed);
        let rec = join_callers(callers, &recorder, timeout + DRAIN_GRACE).await?;
        Ok(Sample::new(&rec, elapsed, before, after))
    }

    async fn counted_round(
        &self,
        warmup: u64,
        requests: u64,
        timeout: Duration,
    ) -> Result<Sample, RunError> {
        if warmup > 0 {
            self.counted_calls(warmup, false, timeout).await?;
        }
        let before = Counters::read(self.server_pid, self.server_port, Edge::Open).await;
        let started = Instant::now();
        let rec = self.counted_calls(requests, true, timeout).await?;
        let elapsed = started.elapsed();
        let after = Counters::read(self.server_pid, self.server_port, Edge::Close).await;
        Ok(Sample::new(&rec, elapsed, before, after))
    }

    /// `requests` calls split between the callers. Bounded: each caller's calls run one after
    /// another, each within the framework's timeout, so a round that outlasts
    /// `timeout × calls per caller` (plus a grace) has a call the framework did not time out.
    async fn counted_calls(
        &self,
        requests: u64,
        counted: bool,
        timeout: Duration,
    ) -> Result<LatencyRecorder, RunError> {
        let c = u64::from(self.ctx.concurrency.max(1));
        let mut callers = JoinSet::new();
        let recorder = SharedRecorder::default();
        let mut next = 0u64;
        for caller in 0..c {
            let n = requests / c + u64::from(caller < requests % c);
            let (start, ctx) = (next, self.ctx.clone());
            let rec = BatchedRecorder::new(&recorder);
            next += n;
            let calls = Calls { start, n, counted };
            callers.spawn(async move {
                match ctx.call_mode {
                    CallMode::Sync => counted_sync(ctx, caller as usize, calls, rec).await,
                    CallMode::Async => counted_async(ctx, caller as usize, calls, rec).await,
                }
            });
        }
        let per_caller = u32::try_from(requests.div_ceil(c).max(1)).unwrap_or(u32::MAX);
        let bound = timeout.saturating_mul(per_caller) + DRAIN_GRACE;
        join_callers(callers, &recorder, bound).await
    }
}

async fn timed_sync(ctx: Arc<SceneCtx>, caller: usize, mut rec: BatchedRecorder) {
    let payload = ctx.own_payload();
    let mut i = caller as u64;
    let mut clock = CallClock::start();
    while !ctx.stop.load(Ordering::Relaxed) {
        let result = ctx.call(caller, key_of(i), &payload).await;
        let elapsed = clock.lap();
        i += 1;
        let counted = ctx.recording.load(Ordering::Relaxed);
        let flushed = ctx.record(&mut rec, elapsed, &result, counted);
        if result.is_err() {
            tokio::time::sleep(ERROR_BACKOFF).await;
        }
        if flushed || result.is_err() {
            clock.restart();
        }
    }
    rec.finish()
}

/// A sync caller's clock: one reading per call, the end of one call being the start of the
/// next (between a successful call and the next lies only the push of its latency onto the
/// caller's batch). Three readings a call — the harness's two and the framework's — were
/// 4.5 % of brisk's client CPU at 10:100:1024 (`perf`). Anything more of the caller's own
/// restarts the clock: a batch folded into the round's recorder, a failure's bookkeeping
/// (its description tallied under a lock) and back-off.
struct CallClock {
    started: Instant,
}

impl CallClock {
    fn start() -> CallClock {
        CallClock {
            started: Instant::now(),
        }
    }

    /// The time since the call that just ended started; the next one starts now.
    fn lap(&mut self) -> Duration {
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(self.started);
        self.started = now;
        elapsed
    }

    /// The next call starts now.
    fn restart(&mut self) {
        self.started = Instant::now();
    }
}

/// A timed async caller: fires calls without awaiting each, up to `async_depth` in flight; a
/// call counts if it completed while the window was open.
async fn timed_async(ctx: Arc<SceneCtx>, caller: usize, mut rec: BatchedRecorder) {
    let mut in_flight = JoinSet::new();
    let mut i = caller as u64;
    loop {
        while in_flight.len() < ctx.async_depth && !ctx.stop.load(Ordering::Relaxed) {
            let (call_ctx, key) = (ctx.clone(), key_of(i));
            i += 1;
            in_flight.spawn(async move {
                let t = Instant::now();
                let result = call_ctx.call(caller, key, &call_ctx.payload).await;
                let counted = call_ctx.recording.load(Ordering::Relaxed);
                (t.elapsed(), result, counted)
            });
        }
        match in_flight.join_next().await {
            Some(done) => {
                if record_joined(&ctx, &mut rec, done) {
                    tokio::time::sleep(ERROR_BACKOFF).await;
                }
            }
            None => break,
        }
    }
    rec.finish()
}

/// A counted caller's share of a round: keys `start..start + n`, recorded when `counted`.
#[derive(Clone, Copy)]
struct Calls {
    start: u64,
    n: u64,
    counted: bool,
}

async fn counted_sync(ctx: Arc<SceneCtx>, caller: usize, calls: Calls, mut rec: BatchedRecorder) {
    let Calls { start, n, counted } = calls;
    let payload = ctx.own_payload();
    let mut clock = CallClock::start();
    for i in start..start + n {
        let result = ctx.call(caller, key_of(i), &payload).await;
        if ctx.record(&mut rec, clock.lap(), &result, counted) || result.is_err() {
            clock.restart();
        }
    }
    rec.finish()
}

/// jkbenchmark's async caller: fires its whole share without waiting (each call holding a
/// permit of the shared bound, if any) and records completions as they come.
async fn counted_async(ctx: Arc<SceneCtx>, caller: usize, calls: Calls, mut rec: BatchedRecorder) {
    let Calls { start, n, counted } = calls;
    let mut in_flight = JoinSet::new();
    for i in start..start + n {
        let permit = match &ctx.limit {
            Some(sem) => sem.clone().acquire_owned().await.ok(),
            None => None,
        };
        let call_ctx = ctx.clone();
        in_flight.spawn(async move {
            let t = Instant::now();
            let result = call_ctx.call(caller, key_of(i), &call_ctx.payload).await;
            drop(permit);
            (t.elapsed(), result, counted)
        });
        while let Some(done) = in_flight.try_join_next() {
            record_joined(&ctx, &mut rec, done);
        }
    }
    while let Some(done) = in_flight.join_next().await {
        record_joined(&ctx, &mut rec, done);
    }
    rec.finish()
}

/// Records a joined call task; true when it failed.
fn record_joined(
    ctx: &SceneCtx,
    rec: &mut BatchedRecorder,
    done: Result<(Duration, Result<(), CallError>, bool), tokio::task::JoinError>,
) -> bool {
    let (elapsed, result, counted) = match done {
        Ok(done) => done,
        Err(e) => (
            Duration::ZERO,
            Err(CallError::new(format!("call task failed: {e}"))),
            true,
        ),
    };
    ctx.record(rec, elapsed, &result, counted);
    result.is_err()
}

/// Waits for a round's callers; a caller still busy after `bound` is a hung call (the
/// framework did not honour its timeout) and fails the round.
async fn join_callers(
    mut callers: JoinSet<()>,
    recorder: &SharedRecorder,
    bound: Duration,
) -> Result<LatencyRecorder, RunError> {
    let joined = tokio::time::timeout(bound, async {
        while let Some(done) = callers.join_next().await {
            done.map_err(|e| RunError::Scene(format!("a benchmark caller failed: {e}")))?;
        }
        Ok::<(), RunError>(())
    })
    .await;
    match joined {
        Ok(result) => result.map(|()| std::mem::take(&mut *recorder.lock())),
        Err(_) => {
            callers.abort_all();
            Err(RunError::Scene(format!(
                "calls still outstanding after {bound:?}: aborted (the framework did not time them out)"
            )))
        }
    }
}

/// What a scene produced.
#[derive(Debug)]
pub struct SceneOutcome {
    /// The scene's medians over its rounds, with its options.
    pub result: SceneResult,
    /// Failed calls over all rounds, by description.
    pub errors: BTreeMap<String, u64>,
}

/// Output switches of a run.
#[derive(Debug, Clone, Copy)]
pub struct SceneOutput {
    /// Print a line per round and the scene lines.
    pub verbose: bool,
    /// Fill `dispatch`/`queue` of brisk's results (false when the server's settings are
    /// unknown).
    pub server_labels: bool,
}

/// One scene of a point, with where its server is.
#[derive(Debug, Clone)]
pub struct PointScene<'a> {
    /// The scene.
    pub scene: &'a Scene,
    /// Its server's address.
    pub addr: &'a str,
    /// Its server's process, when it is a child.
    pub server_pid: Option<u32>,
}

/// Runs the scenes of one point interleaved, round by round; returns one outcome per scene,
/// in order (a scene whose client cannot connect, or whose round fails, is an error and the
/// others go on).
pub async fn run_point(
    point: &[PointScene<'_>],
    plan: &Plan,
    output: SceneOutput,
) -> Vec<Result<SceneOutcome, RunError>> {
    let mut variants = Vec::with_capacity(point.len());
    for p in point {
        variants.push(Variant::connect(p.scene, plan, p.addr, p.server_pid).await);
    }
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); point.len()];
    let mut failed: Vec<Option<RunError>> = (0..point.len()).map(|_| None).collect();
    let n = variants.len().max(1);
    for round in 1..=plan.rounds {
        // Each round starts one variant later, so no player always runs first (right after
        // the previous point, or after the pause) or always last.
        let start = (round as usize - 1) % n;
        for i in (0..variants.len()).map(|k| (start + k) % n) {
            let variant = &variants[i];
            let Ok(variant) = variant else { continue };
            if failed[i].is_some() {
                continue;
            }
            if !plan.pause.is_zero() {
                tokio::time::sleep(plan.pause).await;
            }
            match variant.round(plan).await {
                Ok(sample) => {
                    if output.verbose {
                        let messages = if variant.scene.scenario.is_stream() {
                            format!(
                                " ({:.0} msgs/s)",
                                sample.stats.tps
                                    * variant.scene.scenario.messages_per_call() as f64
                            )
                        } else {
                            String::new()
                        };
                        println!(
                            "  round {round}/{} {} {}: TPS {:.0}{messages}, p50 {:.3} ms, p99 {:.3} ms{}",
                            plan.rounds,
                            variant.scene.name(sample.stats.requests),
                            variant.scene.options(),
                            sample.stats.tps,
                            sample.stats.p50_ms,
                            sample.stats.p99_ms,
                            if sample.stats.errors > 0 {
                                format!(", {} errors", sample.stats.errors)
                            } else {
                                String::new()
                            }
                        );
                    }
                    samples[i].push(sample);
                }
                Err(e) => failed[i] = Some(e),
            }
        }
    }
    let mut out = Vec::with_capacity(point.len());
    for ((variant, rounds), failure) in variants.into_iter().zip(samples).zip(failed) {
        let variant = match variant {
            Ok(v) => v,
            Err(e) => {
                out.push(Err(e));
                continue;
            }
        };
        variant.close();
        if let Some(e) = failure {
            out.push(Err(e));
            continue;
        }
        let mut result = scene_result(&variant.scene, plan, &rounds, output.server_labels);
        let outside = variant.ctx.errors_outside_window.load(Ordering::Relaxed);
        if outside > 0 {
            result
                .extra
                .insert("errors_outside_window".into(), outside as f64);
        }
        let errors = variant.ctx.tally.snapshot();
        if output.verbose {
            print_scene(&variant.scene, plan, &result, &rounds, &errors);
        }
        out.push(Ok(SceneOutcome { result, errors }));
    }
    out
}

/// Runs one scene on its own (its rounds back to back).
pub async fn run_scene(
    scene: &Scene,
    plan: &Plan,
    addr: &str,
    server_pid: Option<u32>,
    output: SceneOutput,
) -> Result<SceneOutcome, RunError> {
    let point = [PointScene {
        scene,
        addr,
        server_pid,
    }];
    run_point(&point, plan, output)
        .await
        .pop()
        .unwrap_or_else(|| Err(RunError::Scene("no round ran".into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each lap is the time since the one before, and laps together cover the caller's time
    /// once; a restart leaves what came before it (the caller's own pause) out of the next lap.
    #[test]
    fn laps_cover_a_caller_s_time_once_and_a_restart_leaves_its_pause_out() {
        let outer = Instant::now();
        let mut clock = CallClock::start();
        std::thread::sleep(Duration::from_millis(3));
        let first = clock.lap();
        std::thread::sleep(Duration::from_millis(2));
        let second = clock.lap();
        let total = outer.elapsed();
        assert!(first >= Duration::from_millis(3), "{first:?}");
        assert!(second >= Duration::from_millis(2), "{second:?}");
        assert!(
            first + second <= total,
            "{first:?} + {second:?} > {total:?}"
        );

        std::thread::sleep(Duration::from_millis(5));
        let restarted = Instant::now();
        clock.restart();
        let after_pause = clock.lap();
        assert!(
            after_pause <= restarted.elapsed(),
            "the pause before the restart counted: {after_pause:?}"
        );
    }
}
