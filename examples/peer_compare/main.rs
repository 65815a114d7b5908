//! Peer comparison: the same closed-loop echo on brisk, a raw tokio loop, tarpc
//! and tonic, in one process run.
//!
//! ```sh
//! cargo run --release --example peer_compare
//! cargo run --release --example peer_compare -- --configs 1:100:1024 --impls brisk,raw \
//!     --duration-secs 3 --repeats 3 --format json --out bench-results/peers
//! ```
//!
//! # What is measured
//!
//! A config `C:N:P` is C connections, N calls in flight in total and P bytes of
//! payload. N closed-loop tasks (task `i` uses client `i % C`) each send an echo
//! of P bytes and wait for it before sending the next, so exactly N calls are
//! outstanding. brisk uses one `Client` with C `fixed` connections (round-robin,
//! calls made together sharing a write: default `coalesce_calls`), direct dispatch, msgpack and the async write mode; tonic
//! C channels (one HTTP/2 connection each, gRPC unary, prost); tarpc C TCP
//! transports (length-delimited, bincode); raw C connections of a hand-written
//! pipelined echo (see `raw.rs`) — the ceiling of what tokio on this machine
//! does with this traffic. Every socket has `TCP_NODELAY`.
//!
//! Each run builds a fresh pair of runtimes — the server's and the client's, each
//! a multi-thread runtime of `--server-threads` / `--client-threads` workers (one
//! each by default) — starts the server on loopback with an ephemeral port,
//! connects, runs a warm-up (`--warmup-ms`), then a window of `--duration-secs`.
//! Calls completed inside the window give QPS and the latency histogram
//! (hdrhistogram, ns, 3 significant digits). Dropping both runtimes afterwards
//! leaves nothing of one implementation running during the next.
//!
//! # Why interleaved
//!
//! The machine is shared and noisy (two cores, other builds running). Running
//! brisk, raw, tarpc, tonic, brisk, raw, … (`--repeats` rounds per config) spreads
//! any slow period over every implementation instead of handing it to whichever
//! ran then; each reported figure is the median of its repeats (every metric's
//! median taken on its own).
//!
//! # Why per-thread CPU
//!
//! QPS alone hides how hard each side works; process CPU time would mix server,
//! client and this orchestrating thread. Every thread either runtime starts
//! registers its POSIX per-thread CPU clock (`pthread_getcpuclockid`) from
//! `on_thread_start` (see `cpu.rs`); the CPU time (user + system, ns resolution)
//! of the server's threads and of the client's threads is read just before and
//! just after the window, and the deltas divided by the calls completed in the
//! window give CPU µs per call on each side. The client side includes the load
//! generator itself (two `Instant::now()` and a histogram record per call), which
//! is the same for every implementation.

mod brisk_echo;
mod cpu;
mod load;
mod raw;
mod tarpc_echo;
mod tonic_echo;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use brisk::Dispatch;
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use tokio::runtime::Runtime;
use tokio::sync::oneshot;

use crate::cpu::RuntimeCpu;
use crate::load::{Caller, LoadResult, Window};

/// Command-line options.
#[derive(Parser, Debug)]
#[command(about = "brisk vs raw tokio vs tarpc vs tonic: the same closed-loop echo, interleaved")]
struct Args {
    /// Configs `C:N:P` (connections : calls in flight : payload bytes), comma separated.
    #[arg(long, default_value = "1:1:1024,1:100:1024,10:100:1024,1:100:10240")]
    configs: String,
    /// Implementations to run, comma separated (brisk, raw, tarpc, tonic).
    #[arg(long, default_value = "brisk,raw,tarpc,tonic")]
    impls: String,
    /// Length of each measured window.
    #[arg(long, default_value_t = 3.0)]
    duration_secs: f64,
    /// Warm-up before each window.
    #[arg(long, default_value_t = 500)]
    warmup_ms: u64,
    /// Interleaved rounds per config; the report gives medians.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Worker threads of the server runtime.
    #[arg(long, default_value_t = 1)]
    server_threads: usize,
    /// `brisk-pool` only: the worker pool's `max_threads` (default: the pool's
    /// default, 8 × CPUs); core threads are capped to it.
    #[arg(long)]
    pool_max_threads: Option<usize>,
    /// Worker threads of the client runtime.
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
    /// `text` prints the tables; `json` also writes `OUT/peers.json`.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Where `--format json` writes `peers.json`.
    #[arg(long, default_value = "bench-results/peers")]
    out: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Impl {
    Brisk,
    /// brisk with `pool` dispatch and the transfer queue (handlers on worker threads).
    BriskPool,
    Raw,
    Tarpc,
    Tonic,
}

impl Impl {
    fn name(self) -> &'static str {
        match self {
            Impl::Brisk => "brisk",
            Impl::BriskPool => "brisk-pool",
            Impl::Raw => "raw",
            Impl::Tarpc => "tarpc",
            Impl::Tonic => "tonic",
        }
    }

    fn parse(s: &str) -> Result<Impl, String> {
        match s.trim() {
            "brisk" => Ok(Impl::Brisk),
            "brisk-pool" => Ok(Impl::BriskPool),
            "raw" => Ok(Impl::Raw),
            "tarpc" => Ok(Impl::Tarpc),
            "tonic" => Ok(Impl::Tonic),
            other => Err(format!(
                "unknown impl `{other}` (brisk, brisk-pool, raw, tarpc, tonic)"
            )),
        }
    }
}

/// One `C:N:P` config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Config {
    conns: usize,
    in_flight: usize,
    payload: usize,
}

impl Config {
    fn parse(s: &str) -> Result<Config, String> {
        let parts: Vec<&str> = s.trim().split(':').collect();
        let [c, n, p] = parts[..] else {
            return Err(format!("config `{s}` is not C:N:P"));
        };
        let num = |v: &str, what: &str| -> Result<usize, String> {
            match v.parse::<usize>() {
                Ok(x) if x > 0 => Ok(x),
                _ => Err(format!("config `{s}`: {what} must be a positive integer")),
            }
        };
        Ok(Config {
            conns: num(c, "C (connections)")?,
            in_flight: num(n, "N (calls in flight)")?,
            payload: num(p, "P (payload bytes)")?,
        })
    }

    fn label(&self) -> String {
        format!("{}:{}:{}", self.conns, self.in_flight, self.payload)
    }
}

/// What one run of one implementation measured.
#[derive(Clone, Debug)]
struct Sample {
    qps: f64,
    p50_us: f64,
    p99_us: f64,
    server_cpu_us_per_call: f64,
    client_cpu_us_per_call: f64,
    /// Threads the server / client runtime started (workers plus any blocking threads).
    threads: (usize, usize),
}

/// The medians of one implementation's samples for one config.
#[derive(Clone, Debug)]
struct Summary {
    imp: Impl,
    config: Config,
    median: Sample,
    repeats: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("peer_compare: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let configs = args
        .configs
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(Config::parse)
        .collect::<Result<Vec<_>, _>>()?;
    let mut impls: Vec<Impl> = Vec::new();
    for name in args.impls.split(',').filter(|s| !s.trim().is_empty()) {
        let imp = Impl::parse(name)?;
        if !impls.contains(&imp) {
            impls.push(imp);
        }
    }
    if configs.is_empty() || impls.is_empty() {
        return Err("nothing to run: --configs and --impls must not be empty".into());
    }
    if args.repeats == 0 || args.server_threads == 0 || args.client_threads == 0 {
        return Err("--repeats, --server-threads and --client-threads must be at least 1".into());
    }
    if !(args.duration_secs.is_finite() && args.duration_secs > 0.0 && args.duration_secs <= 3600.0)
    {
        return Err("--duration-secs must be in (0, 3600]".into());
    }

    println!("{}", machine_line(args));
    let mut all = Vec::new();
    for config in &configs {
        let mut samples: BTreeMap<Impl, Vec<Sample>> = BTreeMap::new();
        for round in 1..=args.repeats {
            for &imp in &impls {
                match run_once(imp, *config, args) {
                    Ok(s) => {
                        eprintln!(
                            "[{}] round {round}/{} {:<5} {:>10.0} calls/s  p50 {:>8.1} µs  p99 {:>8.1} µs  cpu/call server {:>6.2} µs client {:>6.2} µs  threads {}/{}",
                            config.label(),
                            args.repeats,
                            imp.name(),
                            s.qps,
                            s.p50_us,
                            s.p99_us,
                            s.server_cpu_us_per_call,
                            s.client_cpu_us_per_call,
                            s.threads.0,
                            s.threads.1
                        );
                        samples.entry(imp).or_default().push(s);
                    }
                    Err(e) => eprintln!(
                        "[{}] round {round}/{} {}: FAILED: {e}",
                        config.label(),
                        args.repeats,
                        imp.name()
                    ),
                }
            }
        }
        let summaries: Vec<Summary> = impls
            .iter()
            .filter_map(|imp| {
                let s = samples.get(imp)?;
                Some(Summary {
                    imp: *imp,
                    config: *config,
                    median: median_sample(s),
                    repeats: s.len(),
                })
            })
            .collect();
        println!("{}", table(config, &summaries, args));
        all.extend(summaries);
    }
    if args.format == Format::Json {
        std::fs::create_dir_all(&args.out)
            .map_err(|e| format!("creating {}: {e}", args.out.display()))?;
        let path = args.out.join("peers.json");
        std::fs::write(&path, to_json(&all))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// One measured run of `imp` on fresh runtimes.
fn run_once(imp: Impl, config: Config, args: &Args) -> Result<Sample, String> {
    let server_cpu = RuntimeCpu::new();
    let client_cpu = RuntimeCpu::new();
    let server_rt = runtime("peer-server", args.server_threads, server_cpu.clone())?;
    let client_rt = runtime("peer-client", args.client_threads, client_cpu.clone())?;
    let warmup = Duration::from_millis(args.warmup_ms);
    let window_len = Duration::from_secs_f64(args.duration_secs);
    // Bounds every wait below: nothing here may hang the run.
    let setup_limit = Duration::from_secs(10);
    let load_limit = warmup + window_len + Duration::from_secs(20);

    let (stop_tx, stop_rx) = oneshot::channel();
    let (ready_tx, ready_rx) = mpsc::channel();
    match imp {
        Impl::Brisk => {
            server_rt.spawn(brisk_echo::serve(stop_rx, ready_tx, Dispatch::Direct, None))
        }
        Impl::BriskPool => server_rt.spawn(brisk_echo::serve(
            stop_rx,
            ready_tx,
            Dispatch::Pool,
            args.pool_max_threads,
        )),
        Impl::Raw => server_rt.spawn(raw::serve(stop_rx, ready_tx)),
        Impl::Tarpc => server_rt.spawn(tarpc_echo::serve(stop_rx, ready_tx)),
        Impl::Tonic => server_rt.spawn(tonic_echo::serve(stop_rx, ready_tx)),
    };
    let addr: SocketAddr = ready_rx
        .recv_timeout(setup_limit)
        .map_err(|_| "server did not start".to_string())??;

    let window = Arc::new(Window::default());
    let payload = Bytes::from(
        (0..config.payload)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<u8>>(),
    );
    let (connected_tx, connected_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let d = Driver {
        config,
        payload,
        window: window.clone(),
        limit: load_limit,
        connected: connected_tx,
        done: done_tx,
    };
    match imp {
        Impl::Brisk | Impl::BriskPool => {
            client_rt.spawn(d.drive(brisk_echo::connect(addr, config.conns)))
        }
        Impl::Raw => client_rt.spawn(d.drive(raw::connect(addr, config.conns))),
        Impl::Tarpc => client_rt.spawn(d.drive(tarpc_echo::connect(addr, config.conns))),
        Impl::Tonic => client_rt.spawn(d.drive(tonic_echo::connect(addr, config.conns))),
    };
    connected_rx
        .recv_timeout(setup_limit)
        .map_err(|_| "client did not connect".to_string())?
        .map_err(|e| format!("connecting: {e}"))?;

    std::thread::sleep(warmup);
    let (server0, client0) = (server_cpu.total(), client_cpu.total());
    let t0 = Instant::now();
    window.recording.store(true, Ordering::Relaxed);
    std::thread::sleep(window_len);
    window.recording.store(false, Ordering::Relaxed);
    let elapsed = t0.elapsed();
    let (server1, client1) = (server_cpu.total(), client_cpu.total());
    window.stop.store(true, Ordering::Relaxed);

    let load: Result<LoadResult, String> = done_rx
        .recv_timeout(load_limit)
        .map_err(|_| "load did not finish".to_string())?;
    let _ = stop_tx.send(());
    client_rt.shutdown_timeout(Duration::from_secs(2));
    server_rt.shutdown_timeout(Duration::from_secs(2));
    let load = load?;

    if load.errors > 0 {
        eprintln!(
            "[{}] {}: {} failed calls; first: {}",
            config.label(),
            imp.name(),
            load.errors,
            load.first_error.as_deref().unwrap_or("?")
        );
    }
    let calls = load.hist.len();
    if calls == 0 {
        return Err("no call completed inside the window".into());
    }
    let per_call = |d: Duration| d.as_secs_f64() * 1e6 / calls as f64;
    Ok(Sample {
        qps: calls as f64 / elapsed.as_secs_f64(),
        p50_us: load.hist.value_at_quantile(0.50) as f64 / 1e3,
        p99_us: load.hist.value_at_quantile(0.99) as f64 / 1e3,
        server_cpu_us_per_call: per_call(server1.saturating_sub(server0)),
        client_cpu_us_per_call: per_call(client1.saturating_sub(client0)),
        threads: (server_cpu.threads_started(), client_cpu.threads_started()),
    })
}

/// A multi-thread runtime whose threads register with `cpu`.
fn runtime(name: &str, threads: usize, cpu: Arc<RuntimeCpu>) -> Result<Runtime, String> {
    let on_stop = cpu.clone();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(name)
        .enable_all()
        .on_thread_start(move || cpu.register_current())
        .on_thread_stop(move || on_stop.unregister_current())
        .build()
        .map_err(|e| format!("building the {name} runtime: {e}"))
}

/// The client side of one run, spawned on the client runtime.
struct Driver {
    config: Config,
    payload: Bytes,
    window: Arc<Window>,
    limit: Duration,
    connected: mpsc::Sender<Result<(), String>>,
    done: mpsc::Sender<Result<LoadResult, String>>,
}

impl Driver {
    async fn drive<C, F>(self, connect: F)
    where
        C: Caller,
        F: Future<Output = Result<Vec<C>, String>>,
    {
        let clients = match tokio::time::timeout(Duration::from_secs(5), connect).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                let _ = self.connected.send(Err(e));
                return;
            }
            Err(_) => {
                let _ = self.connected.send(Err("connect timed out".into()));
                return;
            }
        };
        let _ = self.connected.send(Ok(()));
        let result = load::run(
            clients,
            self.config.in_flight,
            self.payload,
            self.window,
            self.limit,
        )
        .await;
        let _ = self.done.send(result);
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn median_sample(samples: &[Sample]) -> Sample {
    let m = |f: fn(&Sample) -> f64| median(samples.iter().map(f).collect());
    Sample {
        qps: m(|s| s.qps),
        p50_us: m(|s| s.p50_us),
        p99_us: m(|s| s.p99_us),
        server_cpu_us_per_call: m(|s| s.server_cpu_us_per_call),
        client_cpu_us_per_call: m(|s| s.client_cpu_us_per_call),
        threads: samples.iter().map(|s| s.threads).max().unwrap_or_default(),
    }
}

fn machine_line(args: &Args) -> String {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "peer_compare: {cpus} CPUs, Linux {}; server {} / client {} runtime thread(s); {} s windows after {} ms warm-up, {} interleaved repeat(s), medians",
        kernel.trim(),
        args.server_threads,
        args.client_threads,
        args.duration_secs,
        args.warmup_ms,
        args.repeats
    )
}

fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// The markdown table of one config.
fn table(config: &Config, rows: &[Summary], args: &Args) -> String {
    let brisk = rows
        .iter()
        .find(|r| r.imp == Impl::Brisk)
        .map(|r| r.median.clone());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n### C={} connections, N={} in flight, P={} B (medians of {} × {} s)\n",
        config.conns, config.in_flight, config.payload, args.repeats, args.duration_secs
    );
    let _ = writeln!(
        out,
        "| impl | QPS | p50 µs | p99 µs | server CPU µs/call | client CPU µs/call | brisk QPS ÷ impl | brisk p50 ÷ impl |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let s = &r.median;
        let (qps_ratio, p50_ratio) = match (&brisk, r.imp) {
            (Some(_), Impl::Brisk) | (None, _) => ("—".to_string(), "—".to_string()),
            (Some(b), _) => (
                format!("{:.2}×", b.qps / s.qps),
                format!("{:.2}×", b.p50_us / s.p50_us),
            ),
        };
        let repeats = if r.repeats == args.repeats {
            String::new()
        } else {
            format!(" ({} of {} runs)", r.repeats, args.repeats)
        };
        let _ = writeln!(
            out,
            "| {}{} | {} | {:.1} | {:.1} | {:.2} | {:.2} | {} | {} |",
            r.imp.name(),
            repeats,
            thousands(s.qps),
            s.p50_us,
            s.p99_us,
            s.server_cpu_us_per_call,
            s.client_cpu_us_per_call,
            qps_ratio,
            p50_ratio
        );
    }
    out
}

/// `peers.json`: one record per (config, impl).
fn to_json(rows: &[Summary]) -> String {
    let num = |x: f64| {
        if x.is_finite() {
            format!("{x:.3}")
        } else {
            "null".into()
        }
    };
    let records: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "  {{\"impl\": \"{}\", \"conns\": {}, \"in_flight\": {}, \"payload\": {}, \"qps\": {}, \"p50_us\": {}, \"p99_us\": {}, \"server_cpu_us_per_call\": {}, \"client_cpu_us_per_call\": {}, \"repeats\": {}}}",
                r.imp.name(),
                r.config.conns,
                r.config.in_flight,
                r.config.payload,
                num(r.median.qps),
                num(r.median.p50_us),
                num(r.median.p99_us),
                num(r.median.server_cpu_us_per_call),
                num(r.median.client_cpu_us_per_call),
                r.repeats
            )
        })
        .collect();
    format!("[\n{}\n]\n", records.join(",\n"))
}
