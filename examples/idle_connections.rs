//! Memory of idle connections: what N idle client connections (default
//! 10 000) cost one brisk server, measured as the server process's resident set
//! size — issue 5's target (10 000 connections in ≤ 100 MB) and issue 21's
//! (≤ 5 KB = 5 000 bytes of server memory per idle connection, shown with
//! 100 000).
//!
//! ```text
//! cargo build --release --example idle_connections
//! target/release/examples/idle_connections                    # 10 000 silent TCP connections
//! target/release/examples/idle_connections --brisk-clients    # 10 000 brisk clients, one call each
//! target/release/examples/idle_connections --malloc-arena-max 2
//! target/release/examples/idle_connections --connections 100000 --max-per-conn-bytes 5000
//! ```
//!
//! Why it is shaped so:
//!
//! - **The server runs in a child process** (the example re-executes itself as
//!   `<exe> serve`), so its RSS holds the server alone, not the client ends.
//!   The parent reads the child's `VmRSS` / `VmHWM` / `RssAnon` from
//!   `/proc/<pid>/status` once after a warm-up call (baseline) and again after
//!   the connections are open and a settle period has passed; per connection
//!   is (RSS after − baseline) / N, printed in KiB, KB and bytes. Kernel socket
//!   buffers are not part of RSS; this measures what brisk itself holds (the
//!   machine-wide change of the kernel's `Slab` is printed beside it, as a
//!   rough figure for what the sockets cost the kernel).
//! - **File descriptors.** The server needs one per connection and the parent
//!   one per client socket, both beyond the usual soft `RLIMIT_NOFILE` of 1024.
//!   The parent raises its own limit (soft, and the hard one when it is below
//!   the need — allowed only with `CAP_SYS_RESOURCE` and up to `fs.nr_open`)
//!   to what the server will need, before anything starts, and the child
//!   inherits it. When that is refused the run ends at once with a message
//!   naming the limit and the largest `--connections` the current one allows.
//!   A container without `CAP_SYS_RESOURCE` keeps the hard limit it was given:
//!   raise it from outside (`docker run --ulimit nofile=…`, `prlimit`,
//!   `LimitNOFILE=`), or run the example in a small VM of its own with
//!   `examples/idle_connections_vm.sh` (a kernel whose limits it sets).
//! - **Other kernel limits are checked before the run** (Linux, from
//!   `/proc/sys`): `fs.nr_open` and `fs.file-max` (two sockets per
//!   connection on this machine), the ports of `net.ipv4.ip_local_port_range`
//!   per source address, the listen backlog (`net.core.somaxconn`, capped at
//!   tokio's 1024) against `--batch`, the conntrack table
//!   (`net.netfilter.nf_conntrack_max`, when loaded: a full table drops SYNs)
//!   and `MemAvailable` against a rough estimate of both processes and the
//!   kernel sockets. Each failure is a message, not a hang.
//! - **Several source addresses.** One source address reaches one server
//!   address:port from at most the ~28 000 ports of
//!   `ip_local_port_range` (32768–60999). So above `--per-source` connections
//!   (default 25 000) the silent connections are spread over 127.0.0.1,
//!   127.0.0.2, … (Linux routes all of 127.0.0.0/8 to loopback): each socket
//!   is bound to its source address (with `IP_BIND_ADDRESS_NO_PORT`, so the
//!   port is chosen at connect, by the 4-tuple) and then connects. Up to
//!   `--per-source` connections they are plain connects from 127.0.0.1, as
//!   before.
//! - **The child is a real brisk server** (the Hello service, default
//!   `ServerConfig`) with two changes the measurement needs: `max_connections`
//!   above the connection count (N + 64: the default, 10 000, would refuse the
//!   verification call) and an idle timeout of an hour, so silent connections
//!   are not closed during the run (brisk clients' heartbeats would keep theirs
//!   open anyway).
//! - **Two kinds of connection.** Raw TCP connections that never send a byte
//!   show the floor: the server's per-connection tasks, channels and buffers for
//!   a connection it has accepted; they are the 100 000-connection
//!   measurement. `--brisk-clients` opens real clients (`ConnectType::Fixed`,
//!   one connection each) that each make one call, so every server connection
//!   has read a frame and written an answer, then sit idle. brisk's client has
//!   no source-address setting, so brisk clients all connect from 127.0.0.1
//!   and are limited to `--per-source` (and each client costs the parent
//!   process far more than a socket): keep them at 10 000.
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
//! The exit status is nonzero when the server's RSS exceeds `--max-rss-mb`
//! (default 100 MB per 10 000 connections, issue 5's budget), when the memory
//! per connection exceeds `--max-per-conn-bytes` (if given), when the server
//! stopped answering, when a limit stops the run, or when the connections
//! could not be opened.

#[path = "support/hello.rs"]
mod hello;

use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use brisk::{Client, Connect, Context, RpcError, Server, ServerConfig, Status};
use clap::{Parser, Subcommand};
use hello::{Hello, HelloClient, HelloServer};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};
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
    /// Silent connections per loopback source address: above it they are
    /// spread over 127.0.0.1, 127.0.0.2, … (at most the ports of
    /// net.ipv4.ip_local_port_range).
    #[arg(long, default_value_t = 25_000)]
    per_source: usize,
    /// Open brisk clients (fixed, 1 connection each, one call each) instead of silent TCP connections.
    #[arg(long)]
    brisk_clients: bool,
    /// Fail when the server's RSS after opening the connections exceeds this
    /// (MB = 10^6 bytes; default 100 per 10 000 connections, at least 100).
    #[arg(long)]
    max_rss_mb: Option<f64>,
    /// Fail when the server's RSS growth per connection exceeds this many bytes
    /// (issue 21's target: 5000).
    #[arg(long)]
    max_per_conn_bytes: Option<f64>,
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
    /// Time allowed for opening all connections (default 300 per 10 000
    /// connections, at least 300).
    #[arg(long)]
    open_timeout_secs: Option<u64>,
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

/// File descriptors the server process needs besides its connections
/// (stdio, epoll, the listener, the runtime's wakers), with room to spare.
const SERVER_FDS_BESIDES_CONNECTIONS: usize = 32;
/// Connections the server may take besides the held ones (warm-up and
/// verification clients): its `max_connections` is N + this.
const SPARE_CONNECTIONS: usize = 64;

/// Raises `RLIMIT_NOFILE` to at least `need`: the soft limit when the hard
/// one allows it, else both (needs `CAP_SYS_RESOURCE`, and `need` ≤
/// `fs.nr_open`). `spare` is what the caller needs besides its connections,
/// for the message naming the most connections the current limit allows.
fn raise_fd_limit(need: u64, spare: u64, who: &str) -> Result<u64, String> {
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
    if cur >= need {
        return Ok(cur);
    }
    let at_most = |limit: u64| limit.saturating_sub(spare);
    if max < need {
        if let Some(nr_open) = read_sysctl_u64("fs/nr_open") {
            if need > nr_open {
                return Err(format!(
                    "{who}: needs {need} file descriptors, more than fs.nr_open = {nr_open} allows \
                     any process; raise it (`sysctl -w fs.nr_open={need}`) or pass --connections {} or fewer",
                    at_most(nr_open.min(max))
                ));
            }
        }
    }
    lim.rlim_cur = need as libc::rlim_t;
    lim.rlim_max = lim.rlim_max.max(need as libc::rlim_t);
    // SAFETY: setrlimit reads the struct we pass and nothing else.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(if max < need && e.raw_os_error() == Some(libc::EPERM) {
            format!(
                "{who}: needs {need} file descriptors but the hard RLIMIT_NOFILE is {max} and this \
                 process may not raise it (no CAP_SYS_RESOURCE — in a container, the limit it was \
                 started with); raise it before starting (`ulimit -Hn {need}` as a privileged user, \
                 `prlimit --nofile={need}:{need} --pid …`, systemd LimitNOFILE=, \
                 `docker run --ulimit nofile={need}:{need}`), run it in a VM of its own \
                 (`examples/idle_connections_vm.sh N`) or pass --connections {} or fewer",
                at_most(max)
            )
        } else {
            format!("{who}: setrlimit(RLIMIT_NOFILE, {need}) failed: {e} (hard limit {max})")
        });
    }
    Ok(need)
}

/// A number from `/proc/sys/<path>`, if it is there (Linux).
fn read_sysctl_u64(path: &str) -> Option<u64> {
    read_sysctl_numbers(path)?.first().copied()
}

/// The whitespace-separated numbers of `/proc/sys/<path>`, if it is there.
fn read_sysctl_numbers(path: &str) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(format!("/proc/sys/{path}")).ok()?;
    text.split_whitespace().map(|v| v.parse().ok()).collect()
}

/// A `/proc/meminfo` field in KiB (`MemAvailable`, `Slab`, …).
fn read_meminfo_kib(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        if k != key {
            return None;
        }
        v.split_whitespace().next()?.parse().ok()
    })
}

/// Rough memory one idle connection takes on this machine in all, rounded up
/// generously: the server's share (measured 4–6.3 KiB), the parent's socket
/// and the kernel's two socket ends (measured ~8 KiB of `Slab`; unread
/// heartbeat pings add to it as the run goes on).
const ESTIMATED_BYTES_PER_CONNECTION: u64 = 32 * 1024;

/// Checks the kernel limits that would stop `args.connections` connections,
/// before anything starts (Linux; a value that cannot be read is not checked).
fn check_kernel_limits(args: &Args, sources: usize) -> Result<(), String> {
    let n = args.connections as u64;
    if let Some([low, high]) = read_sysctl_numbers("net/ipv4/ip_local_port_range").as_deref() {
        let ports = high.saturating_sub(*low) + 1;
        let per_source = args.per_source.min(args.connections) as u64;
        if per_source > ports {
            return Err(format!(
                "--per-source {} exceeds the {ports} local ports of net.ipv4.ip_local_port_range \
                 ({low}–{high}); pass --per-source {} or fewer",
                args.per_source,
                ports.saturating_sub(1_000)
            ));
        }
    }
    if let Some([allocated, _, max]) = read_sysctl_numbers("fs/file-nr").as_deref() {
        // Both ends of every connection live on this machine.
        let need = 2 * n + 1_000;
        if allocated + need > *max {
            return Err(format!(
                "{n} connections need ~{need} more open files machine-wide but fs.file-max is \
                 {max} with {allocated} in use; raise it (`sysctl -w fs.file-max=…`)"
            ));
        }
    }
    let somaxconn = read_sysctl_u64("net/core/somaxconn").unwrap_or(4096);
    // tokio's TcpListener::bind listens with a backlog of 1024; the kernel caps it at somaxconn.
    let backlog = somaxconn.min(1024);
    if args.batch as u64 > backlog {
        return Err(format!(
            "--batch {} exceeds the server's listen backlog {backlog} (tokio's 1024, capped by \
             net.core.somaxconn = {somaxconn}): connections past it would be dropped unaccepted; \
             pass --batch {backlog} or fewer",
            args.batch
        ));
    }
    if let Some(max) = read_sysctl_u64("net/netfilter/nf_conntrack_max") {
        let count = read_sysctl_u64("net/netfilter/nf_conntrack_count").unwrap_or(0);
        if count + n + 1_000 > max {
            return Err(format!(
                "{n} connections would overflow the conntrack table (net.netfilter.nf_conntrack_max \
                 = {max}, {count} in use): past it the kernel drops new connections' SYNs; raise it \
                 (`sysctl -w net.netfilter.nf_conntrack_max=…`)"
            ));
        }
    }
    if let Some(available_kib) = read_meminfo_kib("MemAvailable") {
        let need_kib = n * ESTIMATED_BYTES_PER_CONNECTION / 1024;
        if need_kib > available_kib {
            return Err(format!(
                "{n} connections need roughly {:.0} MiB (server, client sockets and the kernel's \
                 ends) but MemAvailable is {:.0} MiB",
                mib(need_kib),
                mib(available_kib)
            ));
        }
    }
    if sources > 254 {
        return Err(format!(
            "{n} connections at --per-source {} need {sources} source addresses; at most 254 \
             (127.0.0.1–127.0.0.254): pass a larger --per-source",
            args.per_source
        ));
    }
    Ok(())
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
    // The parent has raised the limit for us already (we inherit it); this
    // only matters when the server is started some other way.
    raise_fd_limit(
        (max_connections + SERVER_FDS_BESIDES_CONNECTIONS) as u64,
        (SERVER_FDS_BESIDES_CONNECTIONS + SPARE_CONNECTIONS) as u64,
        "server",
    )?;
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
    // Closing the connections gracefully is not what is measured: just go.
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
fn explain_connect_error(e: &std::io::Error, opened: usize, source: Ipv4Addr) -> String {
    let hint = match e.raw_os_error() {
        Some(libc::EMFILE) | Some(libc::ENFILE) => {
            "out of file descriptors in the client process (RLIMIT_NOFILE / fs.file-max)"
        }
        Some(libc::EADDRNOTAVAIL) => {
            "out of local ports for this source address, or the address is not local \
             (net.ipv4.ip_local_port_range; TIME_WAIT sockets from earlier runs? a smaller --per-source?)"
        }
        Some(libc::ENOBUFS) | Some(libc::ENOMEM) => "the kernel is out of memory for sockets",
        _ if e.kind() == ErrorKind::ConnectionRefused => "the server is not listening any more",
        _ => "unexpected connect error",
    };
    format!("connecting from {source} failed after {opened} connections: {e} — {hint}")
}

/// A TCP connection from `source` (any port) to `server`.
async fn connect_from(source: Ipv4Addr, server: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    // Bind the address only: the port is then picked at connect, where the
    // kernel needs only the 4-tuple to be unique, not the port.
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let on: libc::c_int = 1;
        // SAFETY: setsockopt reads `on` (an int, as the option expects) and
        // nothing else; the descriptor belongs to `socket`, alive here.
        let rc = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    socket.bind(SocketAddr::new(source.into(), 0))?;
    socket.connect(server).await
}

/// The loopback source address of the `i`th silent connection: 127.0.0.1
/// for the first `per_source`, then 127.0.0.2, …
fn source_of(i: usize, per_source: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, 1 + (i / per_source.max(1)) as u8)
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
    sources: usize,
    server: &mut ServerProcess,
) -> Result<Held, String> {
    let mut held = Held::default();
    let batch_timeout = Duration::from_secs(args.batch_timeout_secs);
    let open_timeout = open_timeout_secs(args);
    let deadline = Instant::now() + Duration::from_secs(open_timeout);
    let batch = args.batch.max(1);
    let server_addr: SocketAddr = addr
        .parse()
        .map_err(|e| format!("the server address {addr}: {e}"))?;
    let started = Instant::now();
    let report_every = (args.connections / 20).max(2_000);
    let mut next_report = report_every;
    while held.len() < args.connections {
        if Instant::now() >= deadline {
            return Err(format!(
                "opened only {} of {} connections within {open_timeout} s",
                held.len(),
                args.connections,
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
            let attempts = (opened..opened + n).map(|i| {
                let source = source_of(i, args.per_source);
                async move {
                    // One source address: plain connects, as the example always made.
                    let r = if sources == 1 {
                        TcpStream::connect(server_addr).await
                    } else {
                        connect_from(source, server_addr).await
                    };
                    (source, r)
                }
            });
            let results = tokio::time::timeout(batch_timeout, futures::future::join_all(attempts))
                .await
                .map_err(|_| {
                    format!("a batch of {n} TCP connects took over {batch_timeout:?} (after {opened} connections)")
                })?;
            for (source, r) in results {
                held.raw
                    .push(r.map_err(|e| explain_connect_error(&e, opened, source))?);
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
            next_report += report_every;
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

/// `--open-timeout-secs`, or 300 s per 10 000 connections (at least 300 s).
fn open_timeout_secs(args: &Args) -> u64 {
    args.open_timeout_secs
        .unwrap_or_else(|| 300 * (args.connections as u64).div_ceil(10_000).max(1))
}

/// `--max-rss-mb`, or issue 5's budget: 100 MB per 10 000 connections (at least 100 MB).
fn max_rss_mb(args: &Args) -> f64 {
    args.max_rss_mb
        .unwrap_or_else(|| 100.0 * (args.connections as f64 / 10_000.0).max(1.0))
}

async fn measure(args: &Args) -> Result<ExitCode, String> {
    if args.connections == 0 || args.per_source == 0 {
        return Err("--connections and --per-source must be at least 1".into());
    }
    let sources = args.connections.div_ceil(args.per_source);
    if args.brisk_clients && sources > 1 {
        return Err(format!(
            "--brisk-clients connects from 127.0.0.1 only (brisk's client has no source-address \
             setting), so at most --per-source {} connections; pass fewer --connections",
            args.per_source
        ));
    }
    check_kernel_limits(args, sources)?;
    // The server's limit, raised here so that it fails before anything
    // starts; the child inherits it. It also covers this process: our own
    // sockets, the child's pipes, stdio and the runtime's epoll.
    let max_connections = args.connections + SPARE_CONNECTIONS;
    raise_fd_limit(
        (max_connections + SERVER_FDS_BESIDES_CONNECTIONS) as u64,
        (SPARE_CONNECTIONS + SERVER_FDS_BESIDES_CONNECTIONS) as u64,
        "the client and server processes",
    )?;
    let kind = if args.brisk_clients {
        "brisk clients (fixed, 1 connection, 1 call each)"
    } else {
        "silent TCP connections"
    };
    let from = if sources == 1 {
        "from 127.0.0.1".to_string()
    } else {
        format!(
            "from {sources} source addresses 127.0.0.1–{} ({} each)",
            source_of(args.connections - 1, args.per_source),
            args.per_source
        )
    };
    println!(
        "idle_connections: {} {kind} {from}; server MALLOC_ARENA_MAX={}",
        args.connections,
        args.malloc_arena_max
            .map_or_else(|| "(unset: glibc default)".to_string(), |n| n.to_string())
    );
    // Room for the warm-up and verification clients besides the held connections.
    let (mut server, port) = ServerProcess::start(max_connections, args.malloc_arena_max).await?;
    let addr = format!("127.0.0.1:{port}");

    // Warm-up: one call end to end, so the baseline includes what the first
    // call initializes (pool threads, lazy statics), then let it close.
    check_answers(&addr).await?;
    server.wait_open(0, false, Duration::from_secs(5)).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let baseline = read_mem(server.pid)?;
    let baseline_heap = server.stats().await?.heap;
    let baseline_slab = read_meminfo_kib("Slab");
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
    let held = match open_connections(args, &addr, sources, &mut server).await {
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
    let after_slab = read_meminfo_kib("Slab");
    let still = server.stats().await?;
    let n = args.connections as f64;
    let per_conn_kib = after.rss.saturating_sub(baseline.rss) as f64 / n;
    let per_conn_bytes = per_conn_kib * 1024.0;
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
        "per connection: {per_conn_kib:.2} KiB = {:.2} KB ({per_conn_bytes:.0} bytes) RSS \
         ({per_conn_anon_kib:.2} KiB anonymous; {per_conn_heap:.2} KiB allocated) over {} connections",
        per_conn_bytes / 1000.0,
        args.connections
    );
    if let (Some(before), Some(after)) = (baseline_slab, after_slab) {
        let delta = after as f64 - before as f64;
        println!(
            "kernel Slab (machine-wide, others' activity included): {:+.1} MiB, {:.2} KiB per connection (both socket ends)",
            delta / 1024.0,
            delta / n
        );
    }

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
    let max_rss = max_rss_mb(args);
    let mut over = false;
    if rss_mb > max_rss {
        eprintln!(
            "idle_connections: FAIL: server RSS {rss_mb:.1} MB with {} idle connections exceeds --max-rss-mb {max_rss}",
            args.connections
        );
        over = true;
    } else {
        println!(
            "OK: server RSS {rss_mb:.1} MB ≤ {max_rss} MB with {} idle connections",
            args.connections
        );
    }
    if let Some(max) = args.max_per_conn_bytes {
        if per_conn_bytes > max {
            eprintln!(
                "idle_connections: FAIL: {per_conn_bytes:.0} bytes per idle connection exceeds --max-per-conn-bytes {max}"
            );
            over = true;
        } else {
            println!(
                "OK: {per_conn_bytes:.0} bytes = {:.2} KB per idle connection ≤ {max} bytes with {} connections",
                per_conn_bytes / 1000.0,
                args.connections
            );
        }
    }
    Ok(if over {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
