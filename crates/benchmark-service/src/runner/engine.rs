//! Runs one scene: builds the client the scene asks for, warms up, runs the rounds
//! with `concurrency` callers in the scene's call mode, and keeps the shortest round.
//!
//! Call modes, as jkbenchmark defined them:
//! - **sync** — `concurrency` tokio tasks, each waiting for its response before the
//!   next call; the requests are split evenly between them;
//! - **async** — `concurrency` workers that fire their share of calls without waiting
//!   (each call its own task, collected in a `JoinSet` per worker, so completions run on
//!   any runtime thread like jkrpc's callbacks on its I/O threads) and only record
//!   completions; in-flight calls are unbounded unless `max_in_flight` bounds them with
//!   a shared semaphore that a worker waits on before firing.
//!
//! Key `i % 10 + 1` like jkbenchmark. Latency is measured per call from the moment the
//! call is made (after its in-flight permit, if bounded). A failed call (timeout, server
//! busy, closed connection…) is counted and described in an [`ErrorTally`]; it never
//! stops the run.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::players::{brisk::BriskOptions, CallError, ClientSetup, Player, PlayerClient};
use crate::report::{
    dubbo_report, round_report, scene_line, DubboScene, LatencyRecorder, ProgressTicker,
    RoundStats, SceneResult, TestEnvironment, DEFAULT_PROGRESS_INTERVAL,
};
use crate::server::process_cpu_seconds;

use super::plan::{CallMode, Plan, Scenario, Scene};
use super::RunError;

/// Shortest round whose server CPU % is reported.
const MIN_CPU_SAMPLE: Duration = Duration::from_millis(250);

/// Distinct error descriptions kept per scene (the rest are counted as "other errors").
const MAX_ERROR_KINDS: usize = 8;

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

    fn clear(&self) {
        self.kinds.lock().clear();
    }
}

pub use crate::players::brisk::{apply_target, client_config, probe, registry_target};

/// What every caller of a round shares.
struct RoundCtx {
    client: PlayerClient,
    scenario: Scenario,
    payload: Bytes,
    call_mode: CallMode,
    concurrency: u32,
    limit: Option<Arc<Semaphore>>,
    count: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
    tally: Arc<ErrorTally>,
}

impl RoundCtx {
    fn record(&self, rec: &mut LatencyRecorder, elapsed: Duration, result: Result<(), CallError>) {
        match result {
            Ok(()) => rec.record_ok(elapsed),
            Err(e) => {
                rec.record_err(elapsed);
                self.tally.note(&e);
                self.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
    }
}

fn key_of(i: u64) -> i64 {
    (i % 10 + 1) as i64
}

impl RoundCtx {
    /// One checked call: the player's call, then the reply checked against what was asked.
    async fn call(&self, caller: usize, key: i64) -> Result<(), CallError> {
        let reply = self
            .client
            .call(caller, self.scenario, key, &self.payload)
            .await?;
        reply.check(self.scenario, key, &self.payload)
    }
}

async fn sync_worker(ctx: Arc<RoundCtx>, caller: usize, start: u64, n: u64) -> LatencyRecorder {
    let mut rec = LatencyRecorder::new();
    for i in start..start + n {
        let t = Instant::now();
        let result = ctx.call(caller, key_of(i)).await;
        ctx.record(&mut rec, t.elapsed(), result);
    }
    rec
}

async fn async_worker(ctx: Arc<RoundCtx>, caller: usize, start: u64, n: u64) -> LatencyRecorder {
    let mut rec = LatencyRecorder::new();
    let mut in_flight = JoinSet::new();
    for i in start..start + n {
        // With a bound, the caller waits for a permit before firing; the call holds it
        // until its response (or error) arrives.
        let permit = match &ctx.limit {
            Some(sem) => sem.clone().acquire_owned().await.ok(),
            None => None,
        };
        let call_ctx = ctx.clone();
        in_flight.spawn(async move {
            let t = Instant::now();
            let result = call_ctx.call(caller, key_of(i)).await;
            drop(permit);
            (t.elapsed(), result)
        });
        // Record what already completed, without waiting.
        while let Some(done) = in_flight.try_join_next() {
            record_joined(&ctx, &mut rec, done);
        }
    }
    while let Some(done) = in_flight.join_next().await {
        record_joined(&ctx, &mut rec, done);
    }
    rec
}

fn record_joined(
    ctx: &RoundCtx,
    rec: &mut LatencyRecorder,
    done: Result<(Duration, Result<(), CallError>), tokio::task::JoinError>,
) {
    match done {
        Ok((elapsed, result)) => ctx.record(rec, elapsed, result),
        Err(e) => ctx.record(
            rec,
            Duration::ZERO,
            Err(CallError::new(format!("call task failed: {e}"))),
        ),
    }
}

/// Runs `requests` calls with the context's callers; returns the merged recorder and the
/// wall-clock runtime.
async fn run_round(
    ctx: &Arc<RoundCtx>,
    requests: u64,
) -> Result<(LatencyRecorder, Duration), RunError> {
    let c = u64::from(ctx.concurrency.max(1));
    let started = Instant::now();
    let mut handles = Vec::with_capacity(c as usize);
    let mut next = 0u64;
    for w in 0..c {
        let n = requests / c + u64::from(w < requests % c);
        let start = next;
        next += n;
        let ctx = ctx.clone();
        handles.push(tokio::spawn(async move {
            match ctx.call_mode {
                CallMode::Sync => sync_worker(ctx, w as usize, start, n).await,
                CallMode::Async => async_worker(ctx, w as usize, start, n).await,
            }
        }));
    }
    let mut total = LatencyRecorder::new();
    for h in handles {
        let rec = h
            .await
            .map_err(|e| RunError::Scene(format!("a benchmark worker failed: {e}")))?;
        total.merge(&rec);
    }
    Ok((total, started.elapsed()))
}

/// What a scene produced beyond its [`SceneResult`].
#[derive(Debug)]
pub struct SceneOutcome {
    /// The kept (shortest) round, with the scene's options.
    pub result: SceneResult,
    /// Failed calls of the kept round by description.
    pub errors: BTreeMap<String, u64>,
}

/// Output switches of a scene run.
#[derive(Debug, Clone, Copy)]
pub struct SceneOutput {
    /// Print progress lines, round reports and the scene line.
    pub verbose: bool,
    /// Fill `dispatch`/`queue` of the result (false when the server's settings are unknown).
    pub server_labels: bool,
}

/// Runs one scene against the server at `addr` (`server_pid`: its process, for CPU time).
pub async fn run_scene(
    scene: &Scene,
    plan: &Plan,
    addr: &str,
    server_pid: Option<u32>,
    output: SceneOutput,
) -> Result<SceneOutcome, RunError> {
    let setup = ClientSetup {
        addr,
        connections: scene.connections,
        timeout: plan.timeout,
        brisk: BriskOptions {
            connect: scene.connect,
            write_mode: scene.write_mode,
            serializer: scene.serializer,
        },
    };
    let client = PlayerClient::connect(Player::Brisk, &setup)
        .await
        .map_err(|e| RunError::Connect(e.to_string()))?;
    let payload = if scene.scenario == Scenario::Echo {
        Bytes::from(vec![b'x'; scene.payload as usize])
    } else {
        Bytes::new()
    };
    let ctx = Arc::new(RoundCtx {
        client: client.clone(),
        scenario: scene.scenario,
        payload,
        call_mode: scene.call_mode,
        concurrency: scene.concurrency,
        limit: match scene.call_mode {
            CallMode::Async => plan.max_in_flight.map(|n| Arc::new(Semaphore::new(n))),
            CallMode::Sync => None,
        },
        count: Arc::new(AtomicU64::new(0)),
        errors: Arc::new(AtomicU64::new(0)),
        tally: Arc::new(ErrorTally::default()),
    });
    let result = run_rounds(scene, plan, &ctx, server_pid, output).await;
    client.close();
    result
}

async fn run_rounds(
    scene: &Scene,
    plan: &Plan,
    ctx: &Arc<RoundCtx>,
    server_pid: Option<u32>,
    output: SceneOutput,
) -> Result<SceneOutcome, RunError> {
    let label = scene.label();
    if output.verbose {
        println!("\n=== {label}");
    }
    if plan.warmup > 0 {
        run_round(ctx, plan.warmup).await?;
    }
    type Kept = (
        RoundStats,
        Option<f64>,
        BTreeMap<String, u64>,
        Vec<(String, f64)>,
    );
    let mut best: Option<Kept> = None;
    for round in 1..=plan.rounds {
        if round > 1 && !plan.pause.is_zero() {
            tokio::time::sleep(plan.pause).await;
        }
        ctx.count.store(0, Ordering::Relaxed);
        ctx.errors.store(0, Ordering::Relaxed);
        ctx.tally.clear();
        let ticker = output.verbose.then(|| {
            ProgressTicker::start(
                ctx.count.clone(),
                ctx.errors.clone(),
                DEFAULT_PROGRESS_INTERVAL,
            )
        });
        let cpu_before = server_pid.and_then(process_cpu_seconds);
        let (rec, runtime) = run_round(ctx, scene.requests).await?;
        let cpu_after = server_pid.and_then(process_cpu_seconds);
        drop(ticker);
        let stats = RoundStats::from_recorder(&rec, runtime);
        let percentages = if plan.http_load {
            super::http_load::recorder_percentages(&rec)
        } else {
            Vec::new()
        };
        let cpu_pct = match (cpu_before, cpu_after) {
            // /proc counts CPU time in clock ticks (10 ms): shorter rounds give noise.
            (Some(a), Some(b)) if runtime >= MIN_CPU_SAMPLE => {
                Some((b - a).max(0.0) * 100.0 / runtime.as_secs_f64())
            }
            _ => None,
        };
        if output.verbose {
            print!(
                "{}",
                round_report(&stats, &format!("{label} round {round}/{}", plan.rounds))
            );
            if let Some(p) = cpu_pct {
                println!("Server CPU: {p:.1}%");
            }
        }
        let keep = best
            .as_ref()
            .is_none_or(|(b, _, _, _)| stats.runtime_ms < b.runtime_ms);
        if keep {
            best = Some((stats, cpu_pct, ctx.tally.snapshot(), percentages));
        }
    }
    let Some((stats, cpu_pct, errors, percentages)) = best else {
        return Err(RunError::Scene("no round ran".into()));
    };

    let mut result = SceneResult::new(
        "brisk",
        scene.scenario.name(),
        scene.concurrency,
        scene.requests,
        scene.call_mode.name(),
    )
    .with_stats(&stats);
    result.connect_type = scene.connect.name().to_owned();
    result.connections = scene.connections;
    result.write_mode = scene.write_mode.name().to_owned();
    result.serializer = scene.serializer.name().to_owned();
    result.payload = scene.payload;
    if output.server_labels {
        result.dispatch = scene.server.dispatch.name().to_owned();
        result.queue = scene.server.queue_name();
    }
    if let Some(p) = cpu_pct {
        result.extra.insert("server_cpu_pct".into(), round3(p));
    }
    result.extra.extend(percentages);
    if scene.scenario == Scenario::Echo && stats.runtime_ms > 0.0 {
        // Application payload both ways over the runtime (like the Dubbo report), in MB/s.
        let mb = scene.payload as f64 * 2.0 * stats.succeeded as f64 / 1e6;
        result
            .extra
            .insert("mb_per_s".into(), round3(mb * 1000.0 / stats.runtime_ms));
    }

    if output.verbose {
        println!("{}", scene_line(&result));
        if let Some(mb) = result.extra.get("mb_per_s") {
            println!("  payload throughput: {mb:.2} MB/s");
        }
        for (what, n) in &errors {
            println!("  errors: {n} × {what}");
        }
        if plan.dubbo_report {
            print!(
                "{}",
                dubbo_report(
                    &TestEnvironment::detect(),
                    &dubbo_scene(scene, plan),
                    &stats
                )
            );
        }
    }
    Ok(SceneOutcome { result, errors })
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// The Dubbo report's "Test Scene" for a scene.
pub fn dubbo_scene(scene: &Scene, plan: &Plan) -> DubboScene {
    let mut transporter = format!("brisk {}", scene.connect);
    if scene.connect.uses_connection_count() {
        transporter.push_str(&format!("×{}", scene.connections));
    }
    transporter.push_str(&format!(
        ", {} write, {} calls",
        scene.write_mode, scene.call_mode
    ));
    let mut server = format!("brisk {} dispatch", scene.server.dispatch);
    if let Some(q) = scene.server.queue {
        server.push_str(&format!(", {q} queue"));
    }
    DubboScene {
        transporter,
        server_transporter: Some(server),
        server_threads: None,
        serialization: scene.serializer.name().to_owned(),
        timeout_ms: u64::try_from(plan.timeout.as_millis()).unwrap_or(u64::MAX),
        data_length: scene.payload,
        shared_connections: scene.connections,
        concurrent_threads: scene.concurrency,
        runs_per_thread: scene.requests / u64::from(scene.concurrency.max(1)),
    }
}
