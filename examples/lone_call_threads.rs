//! Which threads a lone caller's round trip wakes, without brisk: the
//! experiment behind BENCHMARKS.md's "A worker that reads its connection
//! itself" (issue 21).
//!
//! ```text
//! cargo run --release --example lone_call_threads -- --calls 100000 --rounds 3
//! ```
//!
//! One client thread sends 1024 bytes and waits for them to come back,
//! call after call, busy-polling its socket (`recv(MSG_DONTWAIT)`, yielding
//! the core between tries), as brisk's client does for a lone call. The
//! server is a child process (this program re-run with `--serve MODE`)
//! that echoes in one of six shapes:
//!
//! - `tokio-poll`: a tokio task reads and answers; after an answer it polls
//!   the socket for 100 µs, yielding to the runtime between tries (brisk's
//!   direct dispatch with its busy poll).
//! - `handoff`: a tokio task reads (parked in `epoll_wait` between requests)
//!   and hands each request to a worker thread that waits awake for 100 µs
//!   (yielding) before it parks; the worker answers on the socket itself
//!   (brisk's pool dispatch for a lone caller: the socket's write side lent).
//! - `poll-handoff`: the same hand-off, the task polling the socket as
//!   `tokio-poll` does instead of parking (the worker still waits awake).
//! - `poll-handoff-parked`: the task polls, the worker parks at once after
//!   each answer (a futex wake-up per call).
//! - `worker-reads`: the socket is registered with the tokio runtime (a task
//!   owns it, as a connection task would), but a worker thread reads and
//!   answers it itself through a duplicate of its descriptor, polling as the
//!   client does — the "worker reads its connection" design.
//! - `worker-reads-unregistered`: the same worker, the socket never
//!   registered with any runtime.
//!
//! Modes are interleaved round by round; each prints the calls per second,
//! the round trip's percentiles and the server's context switches per call
//! (all its threads, from `/proc/<pid>/task/*/status`). Linux only.

use std::error::Error;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;

const MSG: usize = 1024;
/// How long the pollers and the waiting worker stay awake after a message.
const AWAKE: Duration = Duration::from_micros(100);
const MODES: [&str; 6] = [
    "tokio-poll",
    "handoff",
    "poll-handoff",
    "poll-handoff-parked",
    "worker-reads",
    "worker-reads-unregistered",
];

type Res<T = ()> = Result<T, Box<dyn Error + Send + Sync>>;

#[derive(Parser)]
struct Args {
    /// Measured calls per mode and round (a tenth more are made first, unmeasured).
    #[arg(long, default_value_t = 100_000)]
    calls: usize,
    /// Rounds; the modes take turns in each.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Internal: run as the server child in this mode.
    #[arg(long, hide = true)]
    serve: Option<String>,
}

fn main() -> Res {
    let args = Args::parse();
    if let Some(mode) = args.serve {
        return serve(&mode);
    }
    println!(
        "{:<26} {:>9} {:>8} {:>8} {:>8} {:>14}",
        "mode", "calls/s", "p50 µs", "p90 µs", "p99 µs", "srv ctxsw/call"
    );
    for _ in 0..args.rounds {
        for mode in MODES {
            measure(mode, args.calls)?;
        }
    }
    Ok(())
}

/// One mode, one round: a server child, `calls` measured round trips.
fn measure(mode: &str, calls: usize) -> Res {
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--serve", mode])
        .stdout(Stdio::piped())
        .spawn()?;
    let result = drive(&mut child, calls);
    let _ = child.kill();
    let _ = child.wait();
    let (per_sec, lat, switches) = result?;
    let p = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)] as f64 / 1e3;
    println!(
        "{mode:<26} {per_sec:>9.0} {:>8.1} {:>8.1} {:>8.1} {:>14.2}",
        p(0.5),
        p(0.9),
        p(0.99),
        switches as f64 / lat.len() as f64
    );
    Ok(())
}

fn drive(child: &mut Child, calls: usize) -> Res<(f64, Vec<u64>, u64)> {
    let out = child.stdout.take().ok_or("no stdout")?;
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line)?;
    let mut s = TcpStream::connect(line.trim())?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    let msg = vec![7u8; MSG];
    let mut answer = Incoming::new();
    let mut lat = Vec::with_capacity(calls);
    let warm = calls / 10;
    let mut before = 0;
    let mut t0 = Instant::now();
    for i in 0..warm + calls {
        if i == warm {
            before = context_switches(child.id())?;
            t0 = Instant::now();
        }
        let t = Instant::now();
        write_all(&mut s, &msg)?;
        loop {
            match s.read(answer.room()) {
                Ok(0) => return Err("server closed".into()),
                Ok(n) if answer.read(n).is_some() => break,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => return Err(e.into()),
            }
        }
        if i >= warm {
            lat.push(t.elapsed().as_nanos() as u64);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let switches = context_switches(child.id())? - before;
    lat.sort_unstable();
    Ok((calls as f64 / secs, lat, switches))
}

/// Voluntary and involuntary context switches of every thread of `pid`.
fn context_switches(pid: u32) -> Res<u64> {
    let mut sum = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let status = std::fs::read_to_string(task?.path().join("status"))?;
        for line in status.lines() {
            if line.contains("ctxt_switches:") {
                sum += line
                    .split_whitespace()
                    .last()
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    Ok(sum)
}

/// Writes all of `buf` on a non-blocking socket, yielding while it is full.
fn write_all(s: &mut TcpStream, mut buf: &[u8]) -> Res {
    while !buf.is_empty() {
        match s.write(buf) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The server child: prints its address, serves one connection, exits.
fn serve(mode: &str) -> Res {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    println!("{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    let (s, _) = listener.accept()?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match mode {
        "tokio-poll" => rt.block_on(tokio_poll(s)),
        "handoff" => handoff(&rt, s, Handing::WaitsAwake),
        "poll-handoff" => handoff(&rt, s, Handing::BothAwake),
        "poll-handoff-parked" => handoff(&rt, s, Handing::TaskPolls),
        "worker-reads" => {
            let own = s.try_clone()?;
            // Registered with the runtime's epoll (edge-triggered, both
            // directions, as every tokio socket is) and owned by a task that
            // never reads it.
            let _registered = rt.block_on(async { tokio::net::TcpStream::from_std(s) })?;
            worker_reads(own)
        }
        "worker-reads-unregistered" => worker_reads(s),
        other => Err(format!("unknown mode {other}").into()),
    }
}

/// One message being read (a request, or the client's answer): `MSG`
/// bytes, however many reads they take.
struct Incoming {
    buf: Vec<u8>,
    have: usize,
}

impl Incoming {
    fn new() -> Self {
        Incoming {
            buf: vec![0u8; MSG],
            have: 0,
        }
    }

    /// Where the next read goes.
    fn room(&mut self) -> &mut [u8] {
        &mut self.buf[self.have..]
    }

    /// `n` more bytes were read into [`room`](Self::room): the whole
    /// message once it is complete (the next one starts empty).
    fn read(&mut self, n: usize) -> Option<&[u8]> {
        self.have += n;
        (self.have == MSG).then(|| {
            self.have = 0;
            &self.buf[..]
        })
    }
}

/// Reads and echoes on this thread, polling for `AWAKE` after each message
/// and blocking in `poll(2)` (no runtime involved) once that passes.
fn worker_reads(mut s: TcpStream) -> Res {
    let mut incoming = Incoming::new();
    let mut last = Instant::now();
    loop {
        match s.read(incoming.room()) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                if let Some(request) = incoming.read(n) {
                    write_all(&mut s, request)?;
                    last = Instant::now();
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if last.elapsed() < AWAKE {
                    std::thread::yield_now();
                } else {
                    let mut fd = libc::pollfd {
                        fd: s.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd, for the call's duration.
                    unsafe { libc::poll(&mut fd, 1, 1000) };
                    last = Instant::now();
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Reads requests on a tokio task and gives each to `on_request`; after a
/// request, for `AWAKE`, polls the socket by yielding to the runtime when
/// `polls`, else (and once that passes) waits for it in `epoll_wait`.
async fn read_requests(s: TcpStream, polls: bool, mut on_request: impl FnMut(&[u8]) -> Res) -> Res {
    let s = tokio::net::TcpStream::from_std(s)?;
    let mut incoming = Incoming::new();
    let mut last = Instant::now();
    loop {
        match s.try_read(incoming.room()) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                if let Some(request) = incoming.read(n) {
                    on_request(request)?;
                    last = Instant::now();
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if polls && last.elapsed() < AWAKE {
                    tokio::task::yield_now().await;
                } else {
                    s.readable().await?;
                    last = Instant::now();
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Reads on a tokio task and answers there, polling by yielding to the
/// runtime for `AWAKE` after each message.
async fn tokio_poll(s: TcpStream) -> Res {
    let mut answer = s.try_clone()?;
    read_requests(s, true, |request| write_all(&mut answer, request)).await
}

/// Where the reading task leaves a request for the worker.
#[derive(Default)]
struct Handoff {
    request: Mutex<Option<Vec<u8>>>,
    ready: AtomicBool,
    parked: Condvar,
}

/// Who stays awake between a lone caller's requests when a task hands them
/// to a worker.
#[derive(Clone, Copy, PartialEq)]
enum Handing {
    /// The worker, for `AWAKE`; the task parks in `epoll_wait`.
    WaitsAwake,
    /// Both: the task polls the socket as `tokio-poll` does.
    BothAwake,
    /// The task polls; the worker parks at once.
    TaskPolls,
}

/// A tokio task reads and hands each request to a worker thread, which
/// answers on the socket itself; `how` says who waits awake.
fn handoff(rt: &tokio::runtime::Runtime, s: TcpStream, how: Handing) -> Res {
    let slot = Arc::new(Handoff::default());
    let worker = {
        let slot = slot.clone();
        let mut answer = s.try_clone()?;
        std::thread::spawn(move || -> Res {
            let mut last = Instant::now();
            loop {
                if slot.ready.swap(false, Ordering::Acquire) {
                    let request = slot.request.lock().map_err(|_| "poisoned")?.take();
                    let Some(request) = request else {
                        return Ok(());
                    };
                    write_all(&mut answer, &request)?;
                    last = Instant::now();
                } else if how != Handing::TaskPolls && last.elapsed() < AWAKE {
                    std::thread::yield_now();
                } else {
                    let guard = slot.request.lock().map_err(|_| "poisoned")?;
                    let _guard = slot
                        .parked
                        .wait_while(guard, |_| !slot.ready.load(Ordering::Acquire))
                        .map_err(|_| "poisoned")?;
                    last = Instant::now();
                }
            }
        })
    };
    let hand = |request: Option<Vec<u8>>| -> Res {
        *slot.request.lock().map_err(|_| "poisoned")? = request;
        slot.ready.store(true, Ordering::Release);
        slot.parked.notify_one();
        Ok(())
    };
    let polls = how != Handing::WaitsAwake;
    let read = rt.block_on(read_requests(s, polls, |request| {
        hand(Some(request.to_vec()))
    }));
    hand(None)?;
    worker.join().map_err(|_| "worker panicked")??;
    read
}
