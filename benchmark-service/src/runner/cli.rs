//! The benchmark client's command line, and the `__serve` entry point the spawned
//! server runs.
//!
//! Every matrix flag is an optional comma list: a flag that is not given leaves the
//! preset's value (or the built-in default) in place, so `--preset connect-type
//! --concurrency 50` changes only the concurrency. A preset is a settings file —
//! `--preset NAME` one compiled in, `--preset-file PATH` one of the user's, in the same format —
//! read once, before anything runs, so a bad file stops the run with exit code 2. See
//! [`plan`](super::plan) for the layering and the file format.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use brisk::{Compression, Dispatch, QueueKind, SerializerKind, WriteMode};
use clap::Parser;

use crate::host::CpuList;
use crate::report::{ReportMeta, TestEnvironment};
use crate::server::{self, ServerArgs};

use super::plan::{
    cpus, parse_bytes, parse_count, CallMode, ConnectKind, LoadShape, PayloadKind, Player, Preset,
    PresetFile, PresetFileError, Scenario, Settings, VoloTransport,
};
use super::target::{ServerSource, Transport};
use super::{run, summary_table, write_results, OutFormat, RunOptions};

fn parse_secs(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=3600.0).contains(&v) => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!(
            "`{s}` is not a number of seconds between 0 and 3600"
        )),
    }
}

/// A name read by `T`'s `FromStr`, surrounding spaces ignored (`--players "brisk, tonic"`).
fn parse_name<T: std::str::FromStr<Err = String>>(s: &str) -> Result<T, String> {
    s.trim().parse()
}

/// A brisk setting (write mode, serializer, compression, dispatch, queue) read by its `FromStr`.
fn parse_setting<T: std::str::FromStr<Err = brisk::RpcError>>(s: &str) -> Result<T, String> {
    s.parse().map_err(|e: brisk::RpcError| e.to_string())
}

/// Which boxed report to print per scene.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportKind {
    /// The Dubbo Remoting Performance Test Report.
    Dubbo,
    /// None (only jkbenchmark's lines).
    None,
}

const AFTER_HELP: &str = "\
Presets (flags given beside a preset override it; results go to bench-results/<preset>/):
  jkrpc-matrix   brisk, tarpc, tonic, volo on nth,cache,file,db × c 1,20,50,100 × sync,async,
                 10 connections; seed 004's framework table and verdicts (~9 min)
  dubbo-report   echo 1 KiB, 1 connection, 100 sync callers, brisk per serializer and every peer;
                 prints the boxed Dubbo report (seeds 000/003)
  payload-sweep  echo 1k,2k,5k,10k,50k,100k at c = cores, every player, CPU % and MB/s (seed 002)
  peers          echo over C:N:P 1:1:1024,1:100:1024,10:100:1024,1:100:10240: brisk direct and
                 pool, tarpc, tonic, volo pool and mux, raw; CPU µs and TCP segments per call on
                 each side
  connect-type   nth async, brisk reused/pooled/fixed × c 1,20,50,100 (seed 004)
  queue          nth async, brisk pool dispatch, blocking/transfer queue × c 1,20,50,100 (seed 004)
  write-mode     nth async, brisk sync/async write × c 1,20,50,100 (seed 004)
  keepalive      nth, a new connection per call vs persistent, c = 10, counted; then ab, ab -k and
                 wrk against the server's HTTP/JSON listener when installed (seed 001)
  smoke          every player and scenario, tiny counts, 1 round — an end-to-end check in seconds
  streams        brisk vs tonic on stream (a server stream of 100 × 1 KiB) and pingpong (100
                 round trips on a bidirectional stream), 1:1:1024 and 1:10:1024, 5 rounds;
                 messages/s and the verdict brisk ≥ 2× tonic (issue 19)
  compression    echo 1k,10k,100k of text and of random bytes at c = cores, brisk with no, zstd
                 and gzip body compression; bytes on the wire per call (~2 min)
A preset is a TOML file (benchmark-service/presets/<name>.toml, compiled in); --preset-file PATH
runs one of your own in the same format: a title and a [settings] table (players, scenarios,
concurrency, payloads, call_modes, connect_types, configs, scene_secs, rounds, ...) whose values
are spelled as on the command line; an unknown key is an error.

Scenes are timed (--scene-secs after a warm-up; 0 = jkbenchmark's count mode with --requests),
the scenes of one point are interleaved round by round (--rounds, default 3), and every figure is
the median over the rounds. Claims (brisk vs every peer, the seeds' setting claims) are judged:
holds when every round agrees, does not hold when every round disagrees, inconclusive otherwise.

Without --addr the client starts every server itself (child processes running this executable's
hidden `__serve` subcommand): one per --dispatch × --queue value for brisk, one per
--volo-transport value for volo, one per other peer. With --addr or --registry it measures a
brisk server somebody else started (`benchmark_server --registry`), spreading the calls with
--balancer; peers need started servers.";

/// `benchmark_client`: runs the jkbenchmark scene matrix against brisk's benchmark server.
#[derive(Debug, Clone, Default, Parser)]
#[command(
    name = "benchmark_client",
    about = "brisk benchmark client: jkbenchmark's scene matrix, Dubbo's report",
    after_help = AFTER_HELP
)]
pub struct ClientArgs {
    /// Server to measure, HOST:PORT; without it the client starts a server per dispatch × queue
    #[arg(long, value_name = "HOST:PORT")]
    pub addr: Option<String>,

    /// Start the server inside this process instead of a child process (shares the CPU)
    #[arg(long, conflicts_with = "addr")]
    pub in_process: bool,

    /// What the brisk servers the client starts listen on: `tcp` (a free loopback port) or
    /// `unix` (a Unix domain socket in the temp directory); peers stay on loopback TCP
    #[arg(long, value_enum, default_value_t = Transport::Tcp, conflicts_with = "addr")]
    pub transport: Transport,

    /// Discover the servers in this registry instead, e.g. `etcd://127.0.0.1:2379`, and spread
    /// the calls over every registered BenchmarkService server (needs brisk's `etcd` feature)
    #[arg(long, value_name = "URL", conflicts_with_all = ["addr", "in_process"])]
    pub registry: Option<String>,

    /// With --registry: how calls are spread: random, round_robin, consistent_hash,
    /// least_active [default: round_robin]
    #[arg(long, value_name = "NAME", requires = "registry")]
    pub balancer: Option<brisk::client::Balancer>,

    /// Named set of defaults (see below)
    #[arg(long, value_name = "NAME", value_parser = parse_name::<Preset>)]
    pub preset: Option<Preset>,

    /// A preset of your own: a TOML file in the format of benchmark-service/presets/*.toml (a
    /// title and a `[settings]` table); results go to `bench-results/<file stem>/`
    #[arg(long, value_name = "PATH", conflicts_with = "preset")]
    pub preset_file: Option<PathBuf>,

    /// Frameworks under test, interleaved round by round: brisk, tarpc, tonic, volo, raw (echo
    /// only; tarpc and volo have no streams) [default: brisk; jkrpc-matrix:
    /// brisk,tarpc,tonic,volo; streams: brisk,tonic; peers, payload-sweep, dubbo-report, smoke:
    /// all five]
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = parse_name::<Player>)]
    pub players: Option<Vec<Player>>,

    /// Measured window per scene and round, in seconds (after the warm-up); 0 selects
    /// jkbenchmark's count mode, where --requests calls make a round [default: 1; peers: 2;
    /// keepalive, smoke: 0]
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub scene_secs: Option<Duration>,

    /// Warm-up before each measured window, ms [default: 300]
    #[arg(long, value_name = "MS")]
    pub warmup_ms: Option<u64>,

    /// Calls each async caller keeps in flight in a timed window [default: 8]
    #[arg(long, value_name = "N")]
    pub async_depth: Option<usize>,

    /// Load points C:N:P (connections : calls in flight : payload bytes), comma separated;
    /// replaces --connections × --concurrency × --payload [peers: 1:1:1024,1:100:1024,
    /// 10:100:1024,1:100:10240]
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub configs: Option<Vec<LoadShape>>,

    /// Scenarios: nth,cache,file,db,echo; stream (a server stream of 100 items of --payload
    /// bytes), pingpong (100 round trips on a bidirectional stream) — brisk and tonic only
    /// [default: nth]
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = parse_name::<Scenario>)]
    pub scenario: Option<Vec<Scenario>>,

    /// Concurrent callers [default: 20]
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub concurrency: Option<Vec<u32>>,

    /// Requests per scene and round in count mode (--scene-secs 0), e.g. 20000 or 20k
    /// [default: 20000]
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = parse_count)]
    pub requests: Option<Vec<u64>>,

    /// Call modes: sync (wait for each response), async (fire, record completions) [default: sync]
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = parse_name::<CallMode>)]
    pub call_mode: Option<Vec<CallMode>>,

    /// Connect types: reused, pooled, fixed, percall (a new connection per call) [default: fixed]
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = parse_name::<ConnectKind>)]
    pub connect_type: Option<Vec<ConnectKind>>,

    /// Connections (fixed: count, pooled: maximum) [default: 10]
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub connections: Option<Vec<u32>>,

    /// Write completion: sync, async [default: async]
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = parse_setting::<WriteMode>)]
    pub write_mode: Option<Vec<WriteMode>>,

    /// Serializers: msgpack, protobuf, json [default: msgpack]
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = parse_setting::<SerializerKind>)]
    pub serializer: Option<Vec<SerializerKind>>,

    /// brisk's body compression: none, zstd, gzip — its requests from 1 KiB up, and the
    /// answers it asks for (brisk only) [default: none; compression: none,zstd,gzip]
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = parse_setting::<Compression>)]
    pub compression: Option<Vec<Compression>>,

    /// Payload sizes in bytes (echo, and each item of the streams), e.g. 1024,10k,100KiB
    /// [default: 1024]
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = parse_bytes)]
    pub payload: Option<Vec<u64>>,

    /// What the payload holds: fill (one byte repeated), text (JSON-like records, 3-6×
    /// compressible), random (incompressible) — every player [default: fill; compression:
    /// text,random]
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = parse_name::<PayloadKind>)]
    pub payload_kind: Option<Vec<PayloadKind>>,

    /// Server dispatch: direct, pool (one server per value) [default: pool]
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = parse_setting::<Dispatch>)]
    pub dispatch: Option<Vec<Dispatch>>,

    /// Server worker-pool queue: blocking, transfer (one server per value) [default: transfer]
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = parse_setting::<QueueKind>)]
    pub queue: Option<Vec<QueueKind>>,

    /// volo-thrift's transport, on its client and its server: pool (its default pooled
    /// ping-pong transport), mux (multiplexed; the scene's connections as that many clients) —
    /// one volo server per value [default: pool; peers: pool,mux]
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = parse_name::<VoloTransport>)]
    pub volo_transport: Option<Vec<VoloTransport>>,

    /// Warm-up requests before each round in count mode [default: 1000]
    #[arg(long, value_name = "N", value_parser = parse_count)]
    pub warmup: Option<u64>,

    /// Rounds per scene, interleaved with the other players and settings; figures are medians
    /// [default: 3]
    #[arg(long, value_name = "N")]
    pub rounds: Option<u32>,

    /// Pause before each round of each scene, ms [default: 0]
    #[arg(long, value_name = "MS")]
    pub pause_ms: Option<u64>,

    /// Bound on calls in flight in async call mode, count mode [default: unbounded, as in
    /// jkbenchmark]
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<usize>,

    /// brisk's fixed connections: most calls one connection's next write gathers before calls
    /// move on round-robin; 1 spreads every call over the connections in turn, so that C:N with
    /// N = C puts one call on each connection [default: the client's, 16]
    #[arg(long, value_name = "N")]
    pub coalesce_calls: Option<usize>,

    /// Per-request timeout in ms [default: 5000]
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,

    /// Client runtime worker threads [default: number of CPUs]
    #[arg(long, value_name = "N")]
    pub client_threads: Option<usize>,

    /// Run the client on these CPUs only, as `taskset -c` writes them (`0`, `0-1`; Linux).
    /// With `--server-cpus` on other CPUs, client and server run as on separate hosts, as the
    /// seeds measured them; the client's default threads count these CPUs [default: every CPU]
    #[arg(long, value_name = "LIST")]
    pub client_cpus: Option<CpuList>,

    /// Boxed report to print per scene [default: none; dubbo for the dubbo-report preset]
    #[arg(long, value_name = "KIND")]
    pub report: Option<ReportKind>,

    /// Result files to write into --out: json, csv [default: json,csv]
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub format: Option<Vec<OutFormat>>,

    /// Directory for results, SVG charts and report.html [default: none; presets: bench-results/{preset}]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Write no files, even for a preset
    #[arg(long, conflicts_with = "out")]
    pub no_out: bool,

    /// Option the charts compare, one series per value (e.g. connect_type, queue, write_mode,
    /// serializer, compression, payload_kind, call_mode) [default: what the run varies]
    #[arg(long, value_name = "OPTION")]
    pub compare_by: Option<String>,

    /// Chart x axis: concurrency, requests, connections, payload [default: concurrency, or
    /// payload for a payload sweep]
    #[arg(long, value_name = "OPTION")]
    pub x_by: Option<String>,

    /// Server: worker threads started up front
    #[arg(long, value_name = "N", help_heading = "Started server")]
    pub core_threads: Option<usize>,

    /// Server: upper bound on worker threads
    #[arg(long, value_name = "N", help_heading = "Started server")]
    pub max_threads: Option<usize>,

    /// Server: worker-pool queue bound
    #[arg(long, value_name = "N", help_heading = "Started server")]
    pub queue_size: Option<usize>,

    /// Server: idle time before an extra worker thread exits
    #[arg(long, value_name = "MS", help_heading = "Started server")]
    pub keep_alive_ms: Option<u64>,

    /// Server: tokio I/O threads
    #[arg(long, value_name = "N", help_heading = "Started server")]
    pub io_threads: Option<usize>,

    /// Server: run every server process the client starts on these CPUs only (`1`, `2-3`;
    /// Linux); its default thread counts count them. Not with `--in-process`
    #[arg(long, value_name = "LIST", help_heading = "Started server")]
    pub server_cpus: Option<CpuList>,

    /// Server: database URL (sqlite:PATH, sqlite::memory:, postgres://…)
    #[arg(long, value_name = "URL", help_heading = "Started server")]
    pub db: Option<String>,

    /// Server: database connections
    #[arg(long, value_name = "N", help_heading = "Started server")]
    pub db_pool_size: Option<usize>,

    /// Server: directory of messages.json
    #[arg(long, value_name = "DIR", help_heading = "Started server")]
    pub data_dir: Option<PathBuf>,

    /// Server: config file (TOML/YAML) of the started server
    #[arg(long, value_name = "FILE", help_heading = "Started server")]
    pub server_config: Option<PathBuf>,
}

impl ClientArgs {
    /// The settings layer the flags make (only the flags given).
    pub fn settings(&self) -> Settings {
        Settings {
            players: self.players.clone(),
            scene_secs: self.scene_secs,
            warmup_time: self.warmup_ms.map(Duration::from_millis),
            async_depth: self.async_depth,
            configs: self.configs.clone(),
            scenarios: self.scenario.clone(),
            concurrency: self.concurrency.clone(),
            requests: self.requests.clone(),
            requests_by_scenario: None,
            call_modes: self.call_mode.clone(),
            connect_types: self.connect_type.clone(),
            connections: self.connections.clone(),
            write_modes: self.write_mode.clone(),
            serializers: self.serializer.clone(),
            compressions: self.compression.clone(),
            payloads: self.payload.clone(),
            payload_kinds: self.payload_kind.clone(),
            dispatches: self.dispatch.clone(),
            queues: self.queue.clone(),
            volo_transports: self.volo_transport.clone(),
            warmup: self.warmup,
            rounds: self.rounds,
            pause: self.pause_ms.map(Duration::from_millis),
            max_in_flight: self.max_in_flight,
            coalesce_calls: self.coalesce_calls,
            timeout: self.timeout_ms.map(Duration::from_millis),
            dubbo_report: self.report.map(|r| r == ReportKind::Dubbo),
            compare_by: self.compare_by.clone(),
            x_by: self.x_by.clone(),
            http_load: None,
        }
    }

    /// The preset the run starts from: `--preset`'s compiled-in file, `--preset-file`'s file,
    /// or an empty one (no settings, the plain title).
    pub fn preset_file(&self) -> Result<PresetFile, PresetFileError> {
        match (&self.preset_file, self.preset) {
            (Some(path), _) => PresetFile::load(path),
            (None, Some(preset)) => Ok(preset.file()),
            (None, None) => Ok(PresetFile::default()),
        }
    }

    /// The flags layered over the preset (if any).
    pub fn layered_settings(&self) -> Result<Settings, PresetFileError> {
        Ok(self.settings().over(self.preset_file()?.settings))
    }

    /// The flag that makes the client call a server it does not start (`--addr`,
    /// `--registry`, `--in-process`), if any.
    fn no_server_started(&self) -> Option<&'static str> {
        if self.addr.is_some() {
            Some("--addr")
        } else if self.registry.is_some() {
            Some("--registry")
        } else if self.in_process {
            Some("--in-process")
        } else {
            None
        }
    }

    /// Settings of a server the client starts (besides address, dispatch and queue).
    pub fn server_base(&self) -> ServerArgs {
        ServerArgs {
            core_threads: self.core_threads,
            max_threads: self.max_threads,
            queue_size: self.queue_size,
            keep_alive_ms: self.keep_alive_ms,
            io_threads: self.io_threads,
            cpus: self.server_cpus.clone(),
            db: self.db.clone(),
            db_pool_size: self.db_pool_size,
            data_dir: self.data_dir.clone(),
            config: self.server_config.clone(),
            ..ServerArgs::default()
        }
    }

    /// Where results are written: `--out`, else `bench-results/<preset>` for a preset (the
    /// file's stem for `--preset-file`).
    pub fn out_dir(&self) -> Option<PathBuf> {
        if self.no_out {
            return None;
        }
        let preset_name = match (&self.preset_file, self.preset) {
            (Some(path), _) => path.file_stem().map(PathBuf::from),
            (None, Some(p)) => Some(PathBuf::from(p.name())),
            (None, None) => None,
        };
        self.out
            .clone()
            .or_else(|| preset_name.map(|name| PathBuf::from("bench-results").join(name)))
    }
}

/// Runs the client: parses nothing (see [`ClientArgs`]), builds the runtime, runs every
/// scene, prints the summary and writes the result files. Exit code 1 when the server
/// cannot be started or reached, a scene could not run, or files could not be written;
/// 2 for invalid settings.
pub fn main(args: ClientArgs) -> ExitCode {
    if let Some(no_child) = args.server_cpus.as_ref().and(args.no_server_started()) {
        eprintln!(
            "error: --server-cpus pins the server processes the client starts, and {no_child} \
             starts none (pin that server itself: `benchmark_server --cpus`, or use \
             --client-cpus)"
        );
        return ExitCode::from(2);
    }
    // First: every thread started below inherits it, and the thread count counts its CPUs.
    if let Some(list) = &args.client_cpus {
        if let Err(e) = crate::host::pin_process(list) {
            eprintln!("error: cannot run the client on CPUs {list} (--client-cpus): {e}");
            return ExitCode::from(2);
        }
    }
    let preset = match args.preset_file() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let title = preset.title;
    let goals = preset.goals;
    let plan = match args.settings().over(preset.settings).resolve() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let source = match (&args.addr, &args.registry, args.in_process) {
        (Some(addr), _, _) => ServerSource::Remote(addr.clone()),
        (None, Some(url), _) => ServerSource::Remote(super::engine::registry_target(
            url,
            args.balancer.unwrap_or(brisk::client::Balancer::RoundRobin),
        )),
        (None, None, true) => ServerSource::InProcess {
            base: args.server_base(),
            transport: args.transport,
        },
        (None, None, false) => {
            match ServerSource::spawn_current_exe(args.server_base(), args.transport) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    };
    let threads = args.client_threads.unwrap_or(cpus() as usize).max(1);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("brisk-bench-client")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the client runtime with {threads} threads: {e}");
            return ExitCode::FAILURE;
        }
    };

    for warning in super::goals::goals_off_plan(&plan, &goals) {
        eprintln!("warning: {warning}");
    }
    let scene_count = plan.scenes().len();
    let env = TestEnvironment::detect();
    println!("{title}");
    let players: Vec<&str> = plan.players.iter().map(|p| p.name()).collect();
    let sizing = match plan.scene_secs {
        Some(window) => format!(
            "{:.1} s window after {} ms warm-up",
            window.as_secs_f64(),
            plan.warmup_time.as_millis()
        ),
        None => format!("counted: warm-up {} calls", plan.warmup),
    };
    println!(
        "players {}; {scene_count} scene(s) in {} point(s); {} interleaved round(s) each, {sizing}; client threads {threads}",
        players.join(", "),
        plan.points().len(),
        plan.rounds,
    );
    println!("machine: {}", env.summary());
    if args.client_cpus.is_some() || args.server_cpus.is_some() {
        let show =
            |list: &Option<CpuList>| list.as_ref().map_or("all".to_owned(), |l| l.to_string());
        println!(
            "CPUs: client {}, started servers {}",
            show(&args.client_cpus),
            show(&args.server_cpus)
        );
    }

    let started = Instant::now();
    let options = RunOptions {
        plan: plan.clone(),
        server: source,
        verbose: true,
    };
    let outcome = runtime.block_on(run(&options));
    runtime.shutdown_timeout(Duration::from_secs(2));
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };

    println!(
        "\n===== summary: {} scene(s) in {:.1} s =====",
        outcome.scenes.len(),
        started.elapsed().as_secs_f64()
    );
    print!("{}", summary_table(&outcome.scenes));
    if let Some(table) = super::http_load::seed001_table(&outcome.scenes) {
        println!("\n===== binary vs HTTP/JSON (seed 001's columns; times in ms) =====");
        print!("{table}");
    }
    let framework = super::claims::framework_table(&outcome.scenes);
    if let Some(table) = &framework {
        println!("\n===== frameworks: median TPS per scene (seed 004's table) =====");
        print!("{table}");
    }
    let judgements = super::claims::judge_all(&plan, &outcome.scenes);
    let verdicts = super::claims::verdict_lines(&judgements);
    if !verdicts.is_empty() {
        println!("\n===== verdicts (holds: every round agrees; does not hold: every round disagrees) =====");
        print!("{verdicts}");
    }
    let goal_verdicts = super::goals::goal_lines(&plan, &goals, &outcome.scenes);
    if !goal_verdicts.is_empty() {
        println!("\n===== goals (the preset's targets, judged like the verdicts) =====");
        print!("{goal_verdicts}");
    }
    let errors = outcome.total_errors();
    if errors > 0 {
        println!("failed calls: {errors}");
    }
    let mut code = ExitCode::SUCCESS;
    for (scene, why) in &outcome.failed {
        eprintln!("not run: {scene}: {why}");
        code = ExitCode::FAILURE;
    }

    if let Some(dir) = args.out_dir() {
        let formats = args
            .format
            .clone()
            .unwrap_or_else(|| vec![OutFormat::Json, OutFormat::Csv]);
        let mut meta = ReportMeta::now(title);
        if let Some(table) = framework {
            meta.notes
                .push(("Frameworks: median TPS per scene".to_owned(), table));
        }
        if !verdicts.is_empty() {
            meta.notes.push(("Verdicts".to_owned(), verdicts));
        }
        if !goal_verdicts.is_empty() {
            meta.notes.push(("Goals".to_owned(), goal_verdicts));
        }
        let compare_by = plan.chart_compare_by();
        let x_by = plan.chart_x_by();
        match write_results(&dir, &formats, &meta, &outcome.scenes, &compare_by, &x_by) {
            Ok(files) => {
                println!(
                    "wrote {} file(s) to {} (charts compare {compare_by} over {x_by}), e.g. {}",
                    files.len(),
                    dir.display(),
                    dir.join("report.html").display()
                );
            }
            Err(e) => {
                eprintln!("error: {e}");
                code = ExitCode::FAILURE;
            }
        }
    }
    code
}

/// The command line of the `__serve` subcommand: the server's own flags.
#[derive(Debug, Parser)]
#[command(
    name = "__serve",
    about = "Runs the benchmark server (used by benchmark_client)"
)]
struct ServeCommandLine {
    #[command(flatten)]
    args: ServerArgs,
}

/// Entry of `<exe> __serve <flags>`: `argv` are the flags after `__serve`. Runs the
/// benchmark server until stdin closes (with `--exit-on-stdin-eof`), Ctrl-C or SIGTERM.
pub fn serve_main<I, T>(argv: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let line = std::iter::once(OsString::from(server::SERVE_SUBCOMMAND))
        .chain(argv.into_iter().map(Into::into));
    let cli = match ServeCommandLine::try_parse_from(line) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    match server::run(cli.args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("benchmark server: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests;
