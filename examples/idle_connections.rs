//! Memory of idle connections: what 10 000 idle client connections cost one
//! brisk server, measured as the server process's resident set size (issue 5's
//! target: ≤ 100 MB).
//!
//! ```text
//! cargo build --release --example idle_connections
//! target/release/examples/idle_connections                    # 10 000 silent TCP connections
//! target/release/examples/idle_connections --brisk-clients    # 10 000 brisk clients, one call each
//! target/release/examples/idle_connections --malloc-arena-max 2
//! ```
//!
//! Why it is shaped so:
//!
//! - **The server runs in a child process** (the example re-executes itself as
//!   `<exe> serve`), so its RSS holds the server alone, not the 10 000 client
//!   ends. The parent reads the child's `VmRSS` / `VmHWM` / `RssAnon` from
//!   `/proc/<pid>/status` once after a warm-up call (baseline) and again after
//!   the connections are open and a settle period has passed. Kernel socket
//!   buffers are not part of RSS; this measures what brisk itself holds.
//! - **Both processes raise `RLIMIT_NOFILE`** themselves (up to the hard limit),
//!   since 10 000 sockets exceed the usual soft limit of 1024.
//! - **The child is a real brisk server** (the Hello service, default
//!   `ServerConfig`) with two changes the measurement needs: `max_connections`
//!   above the connection count (the default, 10 000, would refuse the
//!   verification call) and an idle timeout of an hour, so silent connections
//!   are not closed during the run (brisk clients' heartbeats would keep theirs
//!   open anyway).
//! - **Two kinds of connection.** Raw TCP connections that never send a byte
//!   show the floor: the server's per-connection tasks, channels and buffers for
//!   a connection it has accepted. `--brisk-clients` opens real clients
//!   (`ConnectType::Fixed`, one connection each) that each make one call, so
//!   every server connection has read a frame and written an answer, then sit
//!   idle.
//! - The parent talks to the child over its stdin/stdout (`stats` asks for the
//!   server's open-connection count; end of stdin stops it), so the child also
//!   dies with the parent. Connections are opened in bounded batches, each with a
//!   timeout; every wait has a deadline; running out of file descriptors or
//!   local ports ends the run with a message saying which.
//!
//! - `--malloc-arena-max N` runs the server with `MALLOC_ARENA_MAX=N`. It is not
//!   set by default: measured, it changed nothing here (connections are
//!   allocated on the two runtime workers and none are freed in between).
//!   Results are in BENCHMARKS.md, "Idle connections (10 000 per server)".
//!
//! The exit status is nonzero when the server's RSS exceeds `--max-rss-mb`, when
//! the server stopped answering, or when the connections could not be opened.

#[path = "support/hello.rs"]
mod hello;

use std::io::ErrorKind;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use brisk::{Client, Connect, Context, RpcError, Server, ServerConfig, Status};
use clap::{Parser, Subcommand};
use hello::{Hello, HelloClient, HelloServer};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Idle connections held by one brisk server: server RSS before and after.
#[derive(Parser, Debug)]
#[command(name = "idle_connections")]
struct Args {
    #[command(subcommand)]
    mode: Option<Mode>,
    /// Connections to open.
    #[arg(long, default_value_t = 10_000)]
    connections: usize,
    /// Open brisk clients (fixed, 1 connection each, one call each) instead of silent TCP connections.
    #[arg(long)]
    brisk_clients: bool,
    /// Fail when the server's RSS after opening the connections exceeds this (MB = 10^6 bytes).
    #[arg(long, default_value_t = 100.0)]
    max_rss_mb: f64,
    /// Seconds to wait between the last connection and the measurement.
    #[arg(long, default_value_t = 5)]
    settle_secs: u64,
    /// Connections opened concurrently per batch (keep it below the listen
    /// backlog: the next batch starts once the server has accepted this one).
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Time allowed for one batch.
    #[arg(long, default_value_t = 20)]
    batch_timeout_secs: u64,
    /// Time allowed for opening all connections.
    #[arg(long, default_value_t = 300)]
    open_timeout_secs: u64,
    /// Run the server with MALLOC_ARENA_MAX set to this (glibc malloc arenas).
    #[arg(long)]
    malloc_arena_max: Option<u32>,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Internal: run the server (started by the parent; talks over stdin/stdout).
    #[command(hide = true)]
    Serve {
        /// The server's max_connections.
        #[arg(long)]
        max_connections: usize,
    },
}

struct Greeter;

impl Hello for Greeter {
    async fn greet(&self, _cx: &Context, name: String) -> Result<String, Status> {
        Ok(format!("Hello, {name}!"))
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("idle_connections: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match args.mode {
        Some(Mode::Serve { max_connections }) => runtime.block_on(serve(max_connections)),
        None => runtime.block_on(measure(&args)),
    };
    // Do not wait for tasks still blocked on stdin or sockets.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match result {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("idle_connections: {msg}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------- limits, /proc

/// Raises the soft `RLIMIT_NOFILE` to at least `want` (never above the hard limit).
fn raise_fd_limit(want: u64, who: &str) -> Result<u64, String> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(format!(
            "{who}: getrlimit(RLIMIT_NOFILE) failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    let (cur, max): (u64, u64) = (lim.rlim_cur, lim.rlim_max);
    if cur >= want {
        return Ok(cur);
    }
    if max < want {
        return Err(format!(
            "{who}: needs {want} file descriptors but the hard RLIMIT_NOFILE is {max}; \
             raise it (`ulimit -Hn`, LimitNOFILE=, /etc/security/limits.conf) or pass fewer --connections"
        ));
    }
    lim.rlim_cur = want as libc::rlim_t;
    // SAFETY: setrlimit reads the struct we pass and nothing else.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(format!(
            "{who}: setrlimit(RLIMIT_NOFILE, {want}) failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(want)
}

/// Memory of a process, from `/proc/<pid>/status` (all in KiB).
#[derive(Debug, Clone, Copy, Default)]
struct Mem {
    rss: u64,
    hwm: u64,
    anon: u64,
    threads: u64,
}

fn read_mem(pid: u32) -> Result<Mem, String> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {path}: {e}"))?;
    let mut mem = Mem::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let number = || {
            value
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        match key {
            "VmRSS" => mem.rss = number(),
            "VmHWM" => mem.hwm = number(),
            "RssAnon" => mem.anon = number(),
            "Threads" => mem.threads = number(),
            _ => {}
        }
    }
    if mem.rss == 0 {
        return Err(format!("{path} has no VmRSS line"));
    }
    Ok(mem)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

// ---------------------------------------------------------------- the server (child)

/// Bytes the server has allocated and not freed (glibc `mallinfo2`, all
/// arenas): what its allocations hold, as opposed to the pages they touch.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn heap_in_use() -> u64 {
    // SAFETY: mallinfo2 only reads malloc's own bookkeeping.
    let m = unsafe { libc::mallinfo2() };
    (m.uordblks + m.hblkhd) as u64
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn heap_in_use() -> u64 {
    0
}

async fn serve(max_connections: usize) -> Result<ExitCode, String> {
    benchmark_service::logging::init("warn");
    raise_fd_limit(max_connections as u64 + 256, "server")?;
    let mut config = ServerConfig::default().with_addr("127.0.0.1:0");
    config.max_connections = max_connections;
    config.transport.idle_timeout = Duration::from_secs(3600);
    let server = Server::builder()
        .config(config)
        .service(HelloServer::new(Greeter))
        .start()
        .await
        .map_err(|e| format!("server: {e}"))?;
    let mut out = tokio::io::stdout();
    let say = |line: String| line + "\n";
    out.write_all(say(format!("PORT {}", server.local_addr().port())).as_bytes())
        .await
        .map_err(|e| format!("server: writing to stdout: {e}"))?;
    out.flush().await.map_err(|e| e.to_string())?;
    // One command per line until the parent closes our stdin (or dies).
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim() == "stats" {
            let s = server.stats();
            let reply = format!(
                "STATS open={} accepted={} refused={} requests={} heap={}",
                s.open_connections,
                s.accepted_connections,
                s.refused_connections,
                s.requests,
                heap_in_use()
            );
            if out.write_all(say(reply).as_bytes()).await.is_err() || out.flush().await.is_err() {
                break;
            }
        }
    }
    // Closing 10 000 connections gracefully is not what is measured: just go.
    drop(server);
    Ok(ExitCode::SUCCESS)
}

// ---------------------------------------------------------------- the parent

struct ServerProcess {
    child: Child,
    pid: u32,
    stdin: Option<ChildStdin>,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Stats {
    open: usize,
    accepted: u64,
    refused: u64,
    requests: u64,
    /// Bytes allocated in the server (0 where `mallinfo2` is not available).
    heap: u64,
}

impl ServerProcess {
    async fn start(max_connections: usize, arena_max: Option<u32>) -> Result<(Self, u16), String> {
        let exe = std::env::current_exe().map_err(|e| format!("finding our executable: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.arg("serve")
            .arg("--max-connections")
            .arg(max_connections.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if let Some(n) = arena_max {
            cmd.env("MALLOC_ARENA_MAX", n.to_string());
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("starting the server process: {e}"))?;
        let pid = child.id().ok_or("the server process exited at once")?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout pipe to the server")?;
        let mut server = ServerProcess {
            child,
            pid,
            stdin,
            stdout: BufReader::new(stdout).lines(),
        };
        let line = server.read_line(Duration::from_secs(30)).await?;
        let port = line
            .strip_prefix("PORT ")
            .and_then(|p| p.trim().parse::<u16>().ok())
            .ok_or_else(|| format!("the server said {line:?} instead of its port"))?;
        Ok((server, port))
    }

    async fn read_line(&mut self, within: Duration) -> Result<String, String> {
        match tokio::time::timeout(within, self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => Ok(line),
            Ok(Ok(None)) => Err("the server process exited (see its messages above)".into()),
            Ok(Err(e)) => Err(format!("reading from the server process: {e}")),
            Err(_) => Err(format!(
                "the server process did not answer within {within:?}"
            )),
        }
    }

    async fn stats(&mut self) -> Result<Stats, String> {
        let stdin = self.stdin.as_mut().ok_or("server stdin already closed")?;
        stdin
            .write_all(b"stats\n")
            .await
            .map_err(|e| format!("asking the server for stats: {e}"))?;
        stdin.flush().await.map_err(|e| e.to_string())?;
        let line = self.read_line(Duration::from_secs(10)).await?;
        let mut s = Stats::default();
        for field in line.strip_prefix("STATS ").unwrap_or("").split_whitespace() {
            match field.split_once('=') {
                Some(("open", v)) => s.open = v.parse().unwrap_or(0),
                Some(("accepted", v)) => s.accepted = v.parse().unwrap_or(0),
                Some(("refused", v)) => s.refused = v.parse().unwrap_or(0),
                Some(("requests", v)) => s.requests = v.parse().unwrap_or(0),
                Some(("heap", v)) => s.heap = v.parse().unwrap_or(0),
                _ => {}
            }
        }
        Ok(s)
    }

    /// Waits until the server holds `want` connections (at least `want` when
    /// `at_least`), bounded by `within`.
    async fn wait_open(
        &mut self,
        want: usize,
        at_least: bool,
        within: Duration,
    ) -> Result<Stats, String> {
        let deadline = Instant::now() + within;
        loop {
            let s = self.stats().await?;
            if s.open == want || (at_least && s.open > want) {
                return Ok(s);
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the server holds {} connections after {within:?}, expected {want} \
                     (accepted {}, refused {}; out of file descriptors in the server?)",
                    s.open, s.accepted, s.refused
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn stop(mut self) {
        drop(self.stdin.take());
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// What an I/O error while connecting means for this run.
fn explain_connect_error(e: &std::io::Error, opened: usize) -> String {
    let hint = match e.raw_os_error() {
        Some(libc::EMFILE) | Some(libc::ENFILE) => {
            "out of file descriptors in the client process (RLIMIT_NOFILE / fs.file-max)"
        }
        Some(libc::EADDRNOTAVAIL) => {
            "out of local ports (net.ipv4.ip_local_port_range; TIME_WAIT sockets from earlier runs?)"
        }
        _ if e.kind() == ErrorKind::ConnectionRefused => "the server is not listening any more",
        _ => "unexpected connect error",
    };
    format!("connecting failed after {opened} connections: {e} — {hint}")
}

fn explain_rpc_error(e: &RpcError, opened: usize) -> String {
    let text = e.to_string();
    let hint = if text.contains("os error 24") || text.contains("os error 23") {
        " — out of file descriptors in the client process"
    } else if text.contains("os error 99") {
        " — out of local ports"
    } else {
        ""
    };
    format!("a brisk client failed after {opened} connections: {text}{hint}")
}

async fn brisk_client(addr: &str, timeout: Duration) -> Result<HelloClient, RpcError> {
    let mut client = Client::builder()
        .addr(addr)
        .connect(Connect::fixed(1))
        .max_try_count(1)
        .request_timeout(timeout)
        .build()
        .await
        .map(HelloClient::new)?;
    client = client.with_options(brisk::CallOptions::timeout(timeout));
    client.greet("idle".into()).await?;
    Ok(client)
}

/// The connections the parent holds open.
#[derive(Default)]
struct Held {
    raw: Vec<TcpStream>,
    clients: Vec<HelloClient>,
}

impl Held {
    fn len(&self) -> usize {
        self.raw.len() + self.clients.len()
    }
}

async fn open_connections(
    args: &Args,
    addr: &str,
    server: &mut ServerProcess,
) -> Result<Held, String> {
    let mut held = Held::default();
    let batch_timeout = Duration::from_secs(args.batch_timeout_secs);
    let deadline = Instant::now() + Duration::from_secs(args.open_timeout_secs);
    let batch = args.batch.max(1);
    let started = Instant::now();
    let mut next_report = 2_000;
    while held.len() < args.connections {
        if Instant::now() >= deadline {
            return Err(format!(
                "opened only {} of {} connections within {} s",
                held.len(),
                args.connections,
                args.open_timeout_secs
            ));
        }
        let n = batch.min(args.connections - held.len());
        let opened = held.len();
        if args.brisk_clients {
            let attempts = (0..n).map(|_| brisk_client(addr, batch_timeout));
            let results = tokio::time::timeout(batch_timeout, futures::future::join_all(attempts))
                .await
                .map_err(|_| {
                    format!("a batch of {n} brisk clients took over {batch_timeout:?} (after {opened} connections)")
                })?;
            for r in results {
                held.clients
                    .push(r.map_err(|e| explain_rpc_error(&e, opened))?);
            }
        } else {
            let attempts = (0..n).map(|_| TcpStream::connect(addr));
            let results = tokio::time::timeout(batch_timeout, futures::future::join_all(attempts))
                .await
                .map_err(|_| {
                    format!("a batch of {n} TCP connects took over {batch_timeout:?} (after {opened} connections)")
                })?;
            for r in results {
                held.raw
                    .push(r.map_err(|e| explain_connect_error(&e, opened))?);
            }
        }
        // The kernel completes a handshake before the server accepts it; past
        // the listen backlog it drops the final ACK and a silent client never
        // learns its connection is not there. So wait for every batch.
        server
            .wait_open(held.len(), true, batch_timeout)
            .await
            .map_err(|e| format!("after a batch: {e}"))?;
        if held.len() >= next_report || held.len() == args.connections {
            println!(
                "  {:>6} connections open ({:.1} s)",
                held.len(),
                started.elapsed().as_secs_f64()
            );
            next_report += 2_000;
        }
    }
    Ok(held)
}

/// One call on a fresh brisk client (one more connection), bounded.
async fn check_answers(addr: &str) -> Result<(), String> {
    let client = brisk_client(addr, Duration::from_secs(5))
        .await
        .map_err(|e| format!("the server no longer answers a new client: {e}"))?;
    drop(client);
    Ok(())
}

async fn measure(args: &Args) -> Result<ExitCode, String> {
    if args.connections == 0 {
        return Err("--connections must be at least 1".into());
    }
    // Our own sockets, the child's pipes, stdio and the runtime's epoll.
    raise_fd_limit(args.connections as u64 + 256, "client process")?;
    let kind = if args.brisk_clients {
        "brisk clients (fixed, 1 connection, 1 call each)"
    } else {
        "silent TCP connections"
    };
    println!(
        "idle_connections: {} {kind}; server MALLOC_ARENA_MAX={}",
        args.connections,
        args.malloc_arena_max
            .map_or_else(|| "(unset: glibc default)".to_string(), |n| n.to_string())
    );
    // Room for the warm-up and verification clients besides the held connections.
    let (mut server, port) =
        ServerProcess::start(args.connections + 64, args.malloc_arena_max).await?;
    let addr = format!("127.0.0.1:{port}");

    // Warm-up: one call end to end, so the baseline includes what the first
    // call initializes (pool threads, lazy statics), then let it close.
    check_answers(&addr).await?;
    server.wait_open(0, false, Duration::from_secs(5)).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let baseline = read_mem(server.pid)?;
    let baseline_heap = server.stats().await?.heap;
    println!(
        "server pid {} on {addr}: baseline VmRSS {:.1} MiB (RssAnon {:.1} MiB, VmHWM {:.1} MiB, heap in use {:.1} MiB, {} threads)",
        server.pid,
        mib(baseline.rss),
        mib(baseline.anon),
        mib(baseline.hwm),
        baseline_heap as f64 / 1048576.0,
        baseline.threads
    );

    let started = Instant::now();
    let held = match open_connections(args, &addr, &mut server).await {
        Ok(held) => held,
        Err(e) => {
            server.stop().await;
            return Err(e);
        }
    };
    let open_time = started.elapsed();
    let opened = server
        .wait_open(args.connections, true, Duration::from_secs(60))
        .await?;
    println!(
        "{} connections open in {:.1} s (server: open {}, accepted {}, refused {}, requests {}); settling {} s",
        held.len(),
        open_time.as_secs_f64(),
        opened.open,
        opened.accepted,
        opened.refused,
        opened.requests,
        args.settle_secs
    );
    tokio::time::sleep(Duration::from_secs(args.settle_secs)).await;

    let after = read_mem(server.pid)?;
    let still = server.stats().await?;
    let n = args.connections as f64;
    let per_conn_kib = after.rss.saturating_sub(baseline.rss) as f64 / n;
    let per_conn_anon_kib = after.anon.saturating_sub(baseline.anon) as f64 / n;
    let rss_mb = after.rss as f64 * 1024.0 / 1e6;
    let per_conn_heap = still.heap.saturating_sub(baseline_heap) as f64 / 1024.0 / n;
    println!(
        "after:    VmRSS {:.1} MiB ({rss_mb:.1} MB), RssAnon {:.1} MiB, VmHWM {:.1} MiB, heap in use {:.1} MiB, {} threads",
        mib(after.rss),
        mib(after.anon),
        mib(after.hwm),
        still.heap as f64 / 1048576.0,
        after.threads
    );
    println!(
        "per connection: {per_conn_kib:.2} KiB RSS ({per_conn_anon_kib:.2} KiB anonymous; {per_conn_heap:.2} KiB allocated) over {} connections",
        args.connections
    );

    // Still serving? A fresh client, and in brisk mode the first and last idle ones.
    let mut failures = Vec::new();
    if still.open < args.connections {
        failures.push(format!(
            "the server closed idle connections: {} of {} still open",
            still.open, args.connections
        ));
    }
    if let Err(e) = check_answers(&addr).await {
        failures.push(e);
    }
    for (i, client) in [held.clients.first(), held.clients.last()]
        .into_iter()
        .flatten()
        .enumerate()
    {
        match tokio::time::timeout(Duration::from_secs(5), client.greet("again".into())).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => failures.push(format!("idle client #{i} failed its second call: {e}")),
            Err(_) => failures.push(format!("idle client #{i}: second call timed out")),
        }
    }
    drop(held);
    server.stop().await;

    if !failures.is_empty() {
        for f in &failures {
            eprintln!("idle_connections: FAIL: {f}");
        }
        return Ok(ExitCode::from(2));
    }
    println!("verified: the server still answers");
    if rss_mb > args.max_rss_mb {
        eprintln!(
            "idle_connections: FAIL: server RSS {rss_mb:.1} MB with {} idle connections exceeds --max-rss-mb {}",
            args.connections, args.max_rss_mb
        );
        return Ok(ExitCode::FAILURE);
    }
    println!(
        "OK: server RSS {rss_mb:.1} MB ≤ {} MB with {} idle connections",
        args.max_rss_mb, args.connections
    );
    Ok(ExitCode::SUCCESS)
}
