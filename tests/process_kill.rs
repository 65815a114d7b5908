//! A brisk server in a separate OS process, SIGKILLed under load and restarted on
//! the same port (issue 8). `tests/reliability.rs` crashes an in-process server by
//! tearing down its runtime; here the kernel itself closes the dead process's
//! sockets, as in production when the OOM killer or `kill -9` strikes.
//!
//! How the child process is made: this test binary re-executes itself
//! (`std::env::current_exe()`) with `--exact child_server_process --ignored
//! --nocapture` and the port in `BRISK_KILL_CHILD_PORT`. That `#[ignore]`d test is
//! the server: it binds the port, prints `LISTENING <port>` on stdout for the
//! parent to read, and lives until its stdin closes (the parent holds the pipe, so
//! a dead parent ends it too) or 60 s pass, whichever is first. The parent also
//! kills it from a `Drop` guard, so no run leaves a process behind.
//!
//! What is checked, on one `Fixed` and one `Pooled` client that are never rebuilt:
//! every call resolves exactly once (`issued == ok + err`), every error during the
//! outage is a transport error or a timeout, each client sees the outage, and
//! each client's calls succeed again after the restart. Every wait is bounded and
//! waits on counters; nothing asserts on speed.
//!
//! The port is chosen below the kernel's ephemeral range. While the server is
//! down the callers keep connecting to it, and a connect to a free port inside
//! the ephemeral range can be given that same port as its local port and connect
//! to itself (TCP simultaneous open), which would then occupy the port and fail
//! the restart.
#![cfg(unix)]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brisk::{Client, ClientConfig, Connect, ConnectType, Dispatch, QueueKind, RpcError};
use common::*;

/// The environment variable that turns [`child_server_process`] into a server.
const CHILD_ENV: &str = "BRISK_KILL_CHILD_PORT";
/// The name of the test function the child runs.
const CHILD_TEST: &str = "child_server_process";
/// The longest a child lives, whatever the parent does.
const CHILD_LIFETIME: Duration = Duration::from_secs(60);

// --- the child: a server process ----------------------------------------------------------

/// The server process. Started by the parent test with `BRISK_KILL_CHILD_PORT`
/// set; run on its own (`cargo test -- --ignored`) it does nothing.
#[test]
#[ignore = "the server process of killed_server_process_..., started by that test"]
fn child_server_process() {
    let Ok(port) = std::env::var(CHILD_ENV) else {
        eprintln!("{CHILD_ENV} is not set: nothing to do (this test is a child process)");
        return;
    };
    let port: u16 = port
        .parse()
        .expect("BRISK_KILL_CHILD_PORT is a port number");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("child runtime");
    let server = rt.block_on(async {
        // A restart binds the port the killed server held; the kernel may take a
        // moment to release it, so the bind is retried (bounded).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let config = server_config(Dispatch::Direct, QueueKind::Transfer)
                .with_addr(format!("127.0.0.1:{port}"));
            match brisk::Server::builder()
                .config(config)
                .service(CalcServer::new(Arc::new(CalcImpl::default())))
                .start()
                .await
            {
                Ok(server) => break server,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("child: bind 127.0.0.1:{port}: {e}; retrying");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("child: no server on 127.0.0.1:{port}: {e}"),
            }
        }
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "LISTENING {}", server.local_addr().port()).expect("stdout");
    out.flush().expect("stdout");
    drop(out);

    // Serve (on the runtime's threads) until stdin closes or the lifetime ends.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read(&mut [0u8; 1]);
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(CHILD_LIFETIME);
    std::process::exit(0);
}

// --- the parent: starting and killing the child --------------------------------------------

/// A running server process. Dropping it kills it (SIGKILL) and reaps it.
struct ServerProcess {
    child: Child,
    /// Held open so the child lives; closing it (on drop) ends the child too.
    _stdin: ChildStdin,
    port: u16,
}

impl ServerProcess {
    /// Starts a child serving on `port` and waits (bounded) for its `LISTENING`
    /// line. An error when it exits first or says nothing within 30 s.
    fn start(port: u16) -> Result<ServerProcess, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut child = Command::new(exe)
            .args(["--exact", CHILD_TEST, "--ignored", "--nocapture"])
            .env(CHILD_ENV, port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawning the server process: {e}"))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        // Reads the LISTENING line, then drains stdout so the child never blocks
        // on a full pipe. libtest may print "test … ... " on the same line, so
        // the marker is searched for anywhere in it.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(at) = line.find("LISTENING ") {
                    let port = line[at + "LISTENING ".len()..]
                        .split_whitespace()
                        .next()
                        .and_then(|p| p.parse::<u16>().ok());
                    let _ = tx.send(port);
                }
            }
        });
        let server = ServerProcess {
            child,
            _stdin: stdin,
            port,
        };
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Some(p)) if p == port => Ok(server),
            Ok(other) => Err(format!("child announced {other:?}, expected port {port}")),
            Err(e) => Err(format!(
                "the server process did not announce LISTENING within 30 s ({e})"
            )),
        }
    }

    /// SIGKILL, then reap: when this returns the process is gone and the kernel
    /// has closed its sockets. Asserts that it died of the signal (it was not
    /// already dead for another reason).
    fn kill(mut self) {
        self.child.kill().expect("SIGKILL the server process");
        let status = self.child.wait().expect("reap the server process");
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "the server process died of SIGKILL, not {status}"
        );
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port that is free now and below the ephemeral range (see the module docs).
fn free_port_below_ephemeral_range() -> u16 {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (from, to) = (low.saturating_sub(12_000).max(10_000), low);
    assert!(from < to, "no port range below the ephemeral range {low}");
    // Spread concurrent runs (other checkouts on the machine) over the range.
    let span = u32::from(to - from);
    let seed = std::process::id().wrapping_mul(2_654_435_761) % span;
    for i in 0..span {
        let port = from + ((seed + i) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {from}..{to}");
}

/// Starts the first server process; a port taken between the check and the
/// child's bind is retried with another.
fn start_first_server() -> ServerProcess {
    let mut last = String::new();
    for _ in 0..3 {
        match ServerProcess::start(free_port_below_ephemeral_range()) {
            Ok(server) => return server,
            Err(e) => last = e,
        }
    }
    panic!("could not start the server process: {last}");
}

// --- the load --------------------------------------------------------------------------------

/// The test's phases; each result is counted under the phase it resolved in.
const BEFORE_KILL: u8 = 0;
const OUTAGE: u8 = 1;
const RESTARTED: u8 = 2;

/// One client's tallies. `issued` is bumped before a call starts and one of `ok` /
/// `err` after it resolves, so `issued == ok + err` once the callers have stopped
/// proves that every call resolved exactly once.
#[derive(Default)]
struct Tally {
    issued: AtomicU64,
    ok: [AtomicU64; 3],
    err: [AtomicU64; 3],
    max_latency_ms: AtomicU64,
    kinds: parking_lot::Mutex<BTreeMap<String, u64>>,
    unexpected: parking_lot::Mutex<Vec<String>>,
}

impl Tally {
    fn ok(&self, phase: u8) -> u64 {
        self.ok[usize::from(phase)].load(Ordering::SeqCst)
    }
    fn err(&self, phase: u8) -> u64 {
        self.err[usize::from(phase)].load(Ordering::SeqCst)
    }
    fn ok_total(&self) -> u64 {
        (0..3).map(|p| self.ok(p)).sum()
    }
    fn err_total(&self) -> u64 {
        (0..3).map(|p| self.err(p)).sum()
    }

    fn failed(&self, phase: u8, e: &RpcError) {
        self.err[usize::from(phase)].fetch_add(1, Ordering::SeqCst);
        let kind = match e {
            RpcError::Connect { .. } => "connect",
            RpcError::ConnectTimeout { .. } => "connect timeout",
            RpcError::ConnectionClosed { .. } => "connection closed",
            RpcError::Write { .. } => "write",
            RpcError::WriteTimeout { .. } => "write timeout",
            RpcError::Timeout { .. } => "timeout",
            _ => "other",
        };
        *self.kinds.lock().entry(kind.to_owned()).or_default() += 1;
        // A dead server may only show as a transport failure (refused, closed,
        // reset, write failed) or a timeout. Before the kill nothing has failed,
        // so only a timeout (a very loaded machine) is tolerated there.
        let timeout = matches!(e, RpcError::Timeout { .. } | RpcError::WriteTimeout { .. });
        let allowed = timeout || (phase != BEFORE_KILL && e.is_transport());
        if !allowed {
            self.unexpected.lock().push(format!("phase {phase}: {e}"));
        }
    }
}

const CALLERS_PER_CLIENT: i64 = 4;
/// How many failed calls per caller (on average) the outage lasts.
const OUTAGE_ERRORS_PER_CALLER: u64 = 10;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

async fn client(port: u16, connect_type: ConnectType) -> CalcClient {
    let config = ClientConfig {
        addr: format!("127.0.0.1:{port}"),
        connect: match connect_type {
            ConnectType::Fixed => Connect::fixed(2),
            ConnectType::Pooled => Connect::pooled(1, 4),
            other => Connect::defaults_for(other),
        },
        request_timeout: REQUEST_TIMEOUT,
        max_try_count: 1, // no retries: every failure is seen and counted
        ..ClientConfig::default()
    };
    let client = Client::builder()
        .config(config)
        .build()
        .await
        .expect("client connects");
    CalcClient::new(client)
}

/// Callers that run `add` in a loop on `calc` until `stop`.
fn spawn_callers(
    calc: &CalcClient,
    tally: &Arc<Tally>,
    phase: &Arc<AtomicU8>,
    stop: &Arc<AtomicBool>,
    base: i64,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..CALLERS_PER_CLIENT)
        .map(|t| {
            let (calc, tally) = (calc.clone(), tally.clone());
            let (phase, stop) = (phase.clone(), stop.clone());
            tokio::spawn(async move {
                let a = (base + t) * 1_000_000_000;
                let mut i = 0i64;
                while !stop.load(Ordering::SeqCst) {
                    tally.issued.fetch_add(1, Ordering::SeqCst);
                    let began = Instant::now();
                    let result = calc.add(a, i).await;
                    tally
                        .max_latency_ms
                        .fetch_max(began.elapsed().as_millis() as u64, Ordering::SeqCst);
                    let now = phase.load(Ordering::SeqCst);
                    match result {
                        Ok(v) => {
                            assert_eq!(v, a + i, "an answer belongs to its own request");
                            tally.ok[usize::from(now)].fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) => {
                            tally.failed(now, &e);
                            // Paces the loop while the server is down (refused
                            // connects return at once); not a wait for an event.
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                    }
                    i += 1;
                }
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_server_process_fails_calls_cleanly_and_traffic_resumes_after_restart() {
    bounded(120, async {
        // Starting a process blocks (bounded) on its LISTENING line: off the runtime.
        let server = tokio::task::spawn_blocking(start_first_server)
            .await
            .expect("start the server process");
        let port = server.port;
        let clients = [
            ("fixed", client(port, ConnectType::Fixed).await),
            ("pooled", client(port, ConnectType::Pooled).await),
        ];
        let tallies = [Arc::new(Tally::default()), Arc::new(Tally::default())];
        let phase = Arc::new(AtomicU8::new(BEFORE_KILL));
        let stop = Arc::new(AtomicBool::new(false));
        let mut callers = Vec::new();
        for (n, ((_, calc), tally)) in clients.iter().zip(&tallies).enumerate() {
            let base = n as i64 * CALLERS_PER_CLIENT;
            callers.extend(spawn_callers(calc, tally, &phase, &stop, base));
        }
        let every = |f: &dyn Fn(&Tally) -> bool| tallies.iter().all(|t| f(t));

        // 1. Load on both clients.
        assert!(
            wait_until(Duration::from_secs(30), || every(
                &|t| t.ok(BEFORE_KILL) >= 300
            ))
            .await,
            "load established on both clients before the kill"
        );

        // 2. SIGKILL mid-load. Results from here on count as the outage, which
        //    lasts until every caller has failed several times on average: the
        //    calls in flight at the kill, then reconnects refused again and again.
        phase.store(OUTAGE, Ordering::SeqCst);
        server.kill();
        let killed_at = Instant::now();
        assert!(
            wait_until(Duration::from_secs(30), || every(
                &|t| t.err(OUTAGE) >= OUTAGE_ERRORS_PER_CALLER * CALLERS_PER_CLIENT as u64
            ))
            .await,
            "both clients see the dead server as errors"
        );

        // 3. A new process on the same port; the same clients, not rebuilt.
        let server = tokio::task::spawn_blocking(move || ServerProcess::start(port))
            .await
            .expect("start the server process")
            .expect("the server process restarts on the same port");
        phase.store(RESTARTED, Ordering::SeqCst);
        let restarted_at = Instant::now();
        let resumed = wait_until(Duration::from_secs(30), || {
            every(&|t| t.ok(RESTARTED) >= 300)
        })
        .await;
        let resumed_in = restarted_at.elapsed();
        stop.store(true, Ordering::SeqCst);
        for c in callers {
            c.await.expect("caller task");
        }
        server.kill();

        for ((name, _), t) in clients.iter().zip(&tallies) {
            eprintln!(
                "{name}: issued {}, ok {} (before kill {}, outage {}, after restart {}), \
                 err {} (before kill {}, outage {}, after restart {}), \
                 max call latency {} ms, errors {:?}",
                t.issued.load(Ordering::SeqCst),
                t.ok_total(),
                t.ok(BEFORE_KILL),
                t.ok(OUTAGE),
                t.ok(RESTARTED),
                t.err_total(),
                t.err(BEFORE_KILL),
                t.err(OUTAGE),
                t.err(RESTARTED),
                t.max_latency_ms.load(Ordering::SeqCst),
                t.kinds.lock(),
            );
        }
        eprintln!(
            "kill to restart {:?}; restart to 300 ok on both clients {resumed_in:?}",
            restarted_at - killed_at
        );

        assert!(resumed, "traffic resumes on both clients after the restart");
        for ((name, _), t) in clients.iter().zip(&tallies) {
            assert_eq!(
                t.ok_total() + t.err_total(),
                t.issued.load(Ordering::SeqCst),
                "{name}: every call resolved exactly once"
            );
            let unexpected = t.unexpected.lock();
            assert!(
                unexpected.is_empty(),
                "{name}: errors other than transport failures or timeouts: {unexpected:?}"
            );
            // Bounded by the call's own timeout, with slack for a loaded machine:
            // a hang, not slowness, would break this.
            assert!(
                t.max_latency_ms.load(Ordering::SeqCst)
                    < (REQUEST_TIMEOUT.as_millis() + 10_000) as u64,
                "{name}: no call outlived its timeout by much"
            );
        }
    })
    .await;
}
