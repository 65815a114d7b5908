//! Reliability under faults and bad input (issue 8): a server crash and restart
//! under load, hostile peers, overload of a small worker pool, and a graceful
//! shutdown under load. Every test is bounded in time and waits on events (counters,
//! gates, closed sockets) with bounded timeouts rather than sleeping for a race.
//! What each test observed on a run is written up in RELIABILITY.md.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brisk::codec::OutFrame;
use brisk::{Client, Connect, Dispatch, PoolConfig, QueueKind, RpcError, WriteMode};
use bytes::{Bytes, BytesMut};
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The tests run one at a time: the memory test reads the whole process's RSS, and
/// calls made by a concurrent test would be counted as its growth; serial runs
/// also keep the latency bounds honest on a 2-core machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn calc_client(addr: SocketAddr, timeout: Duration, tries: u32) -> CalcClient {
    let c = Client::builder()
        .addr(addr.to_string())
        .connect(Connect::fixed(2))
        .write_mode(WriteMode::Async)
        .request_timeout(timeout)
        .max_try_count(tries)
        .build()
        .await
        .expect("client connects");
    CalcClient::new(c)
}

/// Per-run tallies of the callers; `issued` is bumped before the call starts, one
/// of `ok` / `err` after it resolves, so `ok + err == issued` proves that every
/// call resolved exactly once (none hung, none was answered twice).
#[derive(Default)]
struct Tally {
    issued: AtomicU64,
    ok: AtomicU64,
    err: AtomicU64,
    unexpected: parking_lot::Mutex<Vec<String>>,
    max_latency_ms: AtomicU64,
    /// Errors by kind, for the report in RELIABILITY.md.
    kinds: parking_lot::Mutex<std::collections::BTreeMap<&'static str, u64>>,
}

impl Tally {
    fn get(&self, c: &AtomicU64) -> u64 {
        c.load(Ordering::SeqCst)
    }
    fn failed(&self, e: &RpcError) {
        self.err.fetch_add(1, Ordering::SeqCst);
        let kind = match e {
            RpcError::Connect { .. } => "connect",
            RpcError::ConnectionClosed { reason, .. } if is_write_race(reason) => {
                "connection closed (client write failed)"
            }
            RpcError::ConnectionClosed { .. } => "connection closed",
            RpcError::Write { .. } => "write",
            RpcError::ShuttingDown => "shutting down",
            RpcError::NotSent { .. } => "not sent",
            RpcError::Closed(_) => "client closed",
            RpcError::Timeout { .. } => "timeout",
            _ => "other",
        };
        *self.kinds.lock().entry(kind).or_default() += 1;
    }
    fn took(&self, since: Instant) {
        self.max_latency_ms
            .fetch_max(since.elapsed().as_millis() as u64, Ordering::SeqCst);
    }
}

/// The graceful-shutdown race of RELIABILITY.md section 4 (a client write failure
/// failing calls the server had answered): fixed in the client (the reader drains
/// what arrived before failing the rest) and in the server (a lingering close, so
/// no reset destroys unread answers). The shutdown test now requires every
/// answered call to arrive, and still counts this error kind if it ever shows.
fn is_write_race(reason: &str) -> bool {
    reason.starts_with("write failed")
}

// --- 1. a server crash and restart under load ------------------------------------------

/// An in-process server on its own runtime in its own thread. `kill` drops that
/// runtime without any graceful step: every task (accept loop, connections) is
/// cancelled and its sockets closed, as when a process dies.
struct Crashable {
    addr: SocketAddr,
    kill: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Crashable {
    fn start(addr: &str) -> Crashable {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (kill, kill_rx) = std::sync::mpsc::channel::<()>();
        let want = addr.to_string();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let handle = rt.block_on(async {
                // The port was just freed by the crashed server; bind is retried
                // (bounded) in case the kernel has not released it yet.
                let deadline = Instant::now() + Duration::from_secs(5);
                loop {
                    let config = server_config(Dispatch::Direct, QueueKind::Transfer)
                        .with_addr(want.as_str());
                    match brisk::Server::builder()
                        .config(config)
                        .service(CalcServer::new(Arc::new(CalcImpl::default())))
                        .start()
                        .await
                    {
                        Ok(h) => break h,
                        Err(e) if Instant::now() < deadline => {
                            eprintln!("rebind {want}: {e}; retrying");
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        Err(e) => panic!("server did not start on {want}: {e}"),
                    }
                }
            });
            addr_tx.send(handle.local_addr()).unwrap();
            let _ = kill_rx.recv_timeout(Duration::from_secs(60));
            // No graceful shutdown: the handle is leaked and the runtime torn down.
            std::mem::forget(handle);
            rt.shutdown_background();
        });
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("in-process server started");
        Crashable { addr, kill, thread }
    }

    fn crash(self) {
        let _ = self.kill.send(());
        self.thread.join().expect("server thread");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_server_fails_calls_cleanly_and_traffic_resumes_after_restart_on_same_port() {
    bounded(45, async {
        let _serial = SERIAL.lock().await;
        let server = Crashable::start("127.0.0.1:0");
        let addr = server.addr;
        let timeout = Duration::from_secs(2);
        let calc = calc_client(addr, timeout, 1).await;
        let tally = Arc::new(Tally::default());
        let stop = Arc::new(AtomicBool::new(false));
        // Successes counted after the restart, to see traffic resume.
        let restarted = Arc::new(AtomicBool::new(false));
        let ok_after_restart = Arc::new(AtomicU64::new(0));

        let mut callers = Vec::new();
        for t in 0..16i64 {
            let (calc, tally, stop) = (calc.clone(), tally.clone(), stop.clone());
            let (restarted, ok_after) = (restarted.clone(), ok_after_restart.clone());
            callers.push(tokio::spawn(async move {
                let mut i = 0i64;
                while !stop.load(Ordering::SeqCst) {
                    tally.issued.fetch_add(1, Ordering::SeqCst);
                    let began = Instant::now();
                    let r = calc.add(t, i).await;
                    tally.took(began);
                    match r {
                        Ok(v) => {
                            assert_eq!(v, t + i, "answer matches its request");
                            tally.ok.fetch_add(1, Ordering::SeqCst);
                            if restarted.load(Ordering::SeqCst) {
                                ok_after.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        Err(e) => {
                            tally.failed(&e);
                            // The crash must surface as a transport failure (closed,
                            // refused, write failed) or a closed client — nothing else.
                            if !(e.is_transport() || matches!(e, RpcError::Closed(_))) {
                                tally.unexpected.lock().push(e.to_string());
                            }
                            // Pace the loop while the server is down (not a race:
                            // only keeps refused connects from spinning a core).
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                    i += 1;
                }
            }));
        }

        assert!(
            wait_until(Duration::from_secs(10), || tally.get(&tally.ok) >= 2000).await,
            "load established before the crash"
        );
        let ok_before = tally.get(&tally.ok);
        server.crash();
        let crashed_at = Instant::now();
        assert!(
            wait_until(Duration::from_secs(10), || tally.get(&tally.err) >= 50).await,
            "the crash is seen by callers as errors"
        );
        let err_outage = tally.get(&tally.err);

        let server = Crashable::start(&addr.to_string());
        assert_eq!(server.addr, addr, "restarted on the same port");
        restarted.store(true, Ordering::SeqCst);
        assert!(
            wait_until(Duration::from_secs(15), || ok_after_restart
                .load(Ordering::SeqCst)
                >= 2000)
            .await,
            "traffic resumes after the restart (ok after restart: {})",
            ok_after_restart.load(Ordering::SeqCst)
        );
        let resumed_in = crashed_at.elapsed();
        stop.store(true, Ordering::SeqCst);
        for c in callers {
            c.await.expect("caller task");
        }
        server.crash();

        let (issued, ok, err) = (
            tally.get(&tally.issued),
            tally.get(&tally.ok),
            tally.get(&tally.err),
        );
        eprintln!(
            "crash/restart: issued {issued}, ok {ok} ({ok_before} before the crash, {} after the restart), \
             err {err} ({err_outage} seen before the restart), max call latency {} ms, crash-to-2000-ok-after-restart {resumed_in:?}, errors {:?}",
            ok_after_restart.load(Ordering::SeqCst),
            tally.get(&tally.max_latency_ms),
            tally.kinds.lock()
        );
        assert_eq!(ok + err, issued, "every call resolved exactly once");
        assert!(
            tally.get(&tally.max_latency_ms) < timeout.as_millis() as u64 + 1000,
            "no call hung past its timeout"
        );
        let unexpected = tally.unexpected.lock();
        assert!(unexpected.is_empty(), "non-transport errors: {unexpected:?}");
    })
    .await;
}

// --- 2. bad peers ---------------------------------------------------------------------------

/// The test process's resident set size in KiB, from /proc/self/status.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line")
}

/// Reads until the server closes the socket; true when it did within `within`.
async fn closed_by_server(raw: &mut TcpStream, within: Duration) -> bool {
    let mut sink = vec![0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match raw.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await
    .is_ok()
}

/// A valid request frame for `Calc.add`, encoded.
fn request_frame() -> BytesMut {
    let mut buf = BytesMut::new();
    OutFrame::request(1, 1, "Calc", "add", Bytes::from_static(&[0x92, 0x01, 0x02]))
        .encode(&mut buf, 1 << 20)
        .unwrap();
    buf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_peers_are_closed_and_cost_bounded_memory_while_a_good_client_is_served() {
    bounded(40, async {
        let _serial = SERIAL.lock().await;
        let mut config = server_config(Dispatch::Direct, QueueKind::Transfer);
        config.transport.idle_timeout = Duration::from_millis(1500);
        // Large enough that a 200 MiB announcement passes the size check: the
        // point is that the decoder does not allocate the body up front.
        config.transport.max_frame_size = 256 << 20;
        let (server, _) = start(config).await;
        let addr = server.local_addr();
        let good = Client::builder()
            .config(brisk::ClientConfig {
                addr: addr.to_string(),
                request_timeout: Duration::from_secs(5),
                transport: brisk::transport::TransportConfig {
                    heartbeat_interval: Duration::from_millis(200),
                    ..Default::default()
                },
                ..Default::default()
            })
            .build()
            .await
            .unwrap();
        let good = CalcClient::new(good);
        assert_eq!(good.add(1, 2).await.unwrap(), 3);
        let rss_before = rss_kib();

        // Garbage: closed at once (protocol error), not left to the idle timeout.
        let mut garbage = TcpStream::connect(addr).await.unwrap();
        let noise: Vec<u8> = (0..4096).map(|_| rand::random::<u8>()).collect();
        garbage.write_all(&noise).await.unwrap();
        assert!(closed_by_server(&mut garbage, Duration::from_secs(1)).await);

        // A header announcing 3 GiB (over max_frame_size): answered FrameTooLarge
        // from the header (nothing allocated; its bytes would be skipped), then
        // left to the idle timeout like the other stalled peers.
        let mut huge = TcpStream::connect(addr).await.unwrap();
        let mut frame = request_frame();
        frame[24..28].copy_from_slice(&(3u32 << 30).to_be_bytes());
        huge.write_all(&frame).await.unwrap();
        let huge_id = u64::from_be_bytes(frame[8..16].try_into().unwrap());
        assert_eq!(
            raw_answer_status(&mut huge, huge_id, Duration::from_secs(1)).await,
            Some(brisk::codec::Code::FrameTooLarge)
        );

        // A header announcing 200 MiB (under the limit), then nothing more.
        let mut big_stall = TcpStream::connect(addr).await.unwrap();
        let mut frame = request_frame();
        frame[24..28].copy_from_slice(&(200u32 << 20).to_be_bytes());
        big_stall.write_all(&frame[..frame.len() - 1]).await.unwrap();

        // 500 connections that send nothing and 50 that send half a frame and stall.
        let mut idle = Vec::new();
        for _ in 0..500 {
            idle.push(TcpStream::connect(addr).await.unwrap());
        }
        let half = request_frame();
        let mut stallers = Vec::new();
        for _ in 0..50 {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(&half[..half.len() / 2]).await.unwrap();
            stallers.push(s);
        }
        // The good client is served while all of them are open.
        for i in 0..200 {
            assert_eq!(good.add(i, 1).await.unwrap(), i + 1);
        }
        let rss_loaded = rss_kib();

        // Every idle, half-frame and big-announcement peer is closed by the idle
        // timeout (each wait is bounded; they run concurrently).
        let began = Instant::now();
        let mut waits = tokio::task::JoinSet::new();
        for mut s in idle.into_iter().chain(stallers).chain([big_stall]) {
            waits.spawn(async move { closed_by_server(&mut s, Duration::from_secs(10)).await });
        }
        let mut closed = 0;
        while let Some(r) = waits.join_next().await {
            closed += r.unwrap() as usize;
        }
        let closed_in = began.elapsed();
        assert_eq!(closed, 551, "every silent or stalled peer was closed");
        // The good client pings, so the idle timeout spared it.
        assert_eq!(good.add(40, 2).await.unwrap(), 42);
        let rss_after = rss_kib();
        eprintln!(
            "bad peers: VmRSS {rss_before} KiB before, {rss_loaded} KiB with 551 idle/stalled \
             connections (+{} KiB), {rss_after} KiB after they were closed; all closed {closed_in:?} \
             after the last was opened",
            rss_loaded.saturating_sub(rss_before)
        );
        let growth = rss_loaded.saturating_sub(rss_before);
        assert!(growth < 64 * 1024, "RSS grew {growth} KiB (bound 64 MiB)");
        // Neither the 3 GiB nor the 200 MiB announcement was allocated.
        assert!(growth < 200 * 1024, "the announced body was not allocated");
        server.shutdown().await;
    })
    .await;
}

// --- 3. overload ----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_of_a_small_pool_answers_busy_fast_and_throughput_recovers() {
    bounded(30, async {
        let _serial = SERIAL.lock().await;
        let pool = PoolConfig {
            core_threads: 2,
            max_threads: 2,
            queue_size: 8,
            queue: QueueKind::Blocking,
            ..PoolConfig::default()
        };
        let config = server_config(Dispatch::Pool, QueueKind::Blocking).with_pool(pool);
        let (server, imp) = start(config).await;
        let timeout = Duration::from_secs(5);
        let calc = calc_client(server.local_addr(), timeout, 1).await;

        // 10 x the pool's capacity (2 running + 8 queued) of blocking calls at once.
        let busy = Arc::new(AtomicU64::new(0));
        let mut calls = Vec::new();
        for tag in 0..100u64 {
            let (calc, busy) = (calc.clone(), busy.clone());
            calls.push(tokio::spawn(async move {
                let began = Instant::now();
                let r = calc.wait_gate(tag).await;
                if matches!(r, Err(RpcError::ServerBusy(_))) {
                    busy.fetch_add(1, Ordering::SeqCst);
                }
                (r, began.elapsed())
            }));
        }
        // The gate stays shut until the excess callers have their answers, so the
        // busy answers cannot come from capacity freed by finished calls.
        assert!(
            wait_until(Duration::from_secs(3), || busy.load(Ordering::SeqCst) >= 90).await,
            "excess callers answered busy while the pool was full ({} so far)",
            busy.load(Ordering::SeqCst)
        );
        assert!(imp.gate.wait_entered(2, Duration::from_secs(5)));
        imp.gate.open();

        let (mut ok, mut busy_n, mut busy_max, mut ok_max) = (0, 0, Duration::ZERO, Duration::ZERO);
        for c in calls {
            let (r, took) = c.await.unwrap();
            match r {
                Ok(_) => {
                    ok += 1;
                    ok_max = ok_max.max(took);
                }
                Err(RpcError::ServerBusy(_)) => {
                    busy_n += 1;
                    busy_max = busy_max.max(took);
                }
                Err(e) => panic!("unexpected error under overload: {e}"),
            }
        }
        eprintln!(
            "overload: {ok} ok (slowest {ok_max:?}, held by the gate), {busy_n} busy (slowest busy answer {busy_max:?})"
        );
        // Capacity is 10 (2 running + 8 queued). One or two fewer may be accepted:
        // a task handed to an idle core thread sits in the queue until that thread
        // wakes, so the queue can look full a moment early — the same hand-off race
        // as Java's ThreadPoolExecutor. Never more than the capacity.
        assert_eq!(ok + busy_n, 100, "every burst call answered");
        assert!((8..=10).contains(&ok), "at most capacity accepted, got {ok}");
        assert!(busy_max < Duration::from_millis(1000), "busy answers are immediate");

        // After the burst the server is up and serves a batch of normal calls.
        let began = Instant::now();
        let mut batch = Vec::new();
        for i in 0..200i64 {
            let calc = calc.clone();
            batch.push(tokio::spawn(async move { calc.add(i, i).await }));
            if batch.len() == 8 {
                for b in batch.drain(..) {
                    b.await.unwrap().expect("normal call after the burst");
                }
            }
        }
        for b in batch {
            b.await.unwrap().expect("normal call after the burst");
        }
        eprintln!("overload: 200 calls after the burst in {:?}", began.elapsed());
        server.shutdown().await;
    })
    .await;
}

// --- 4. graceful shutdown under load --------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_under_load_answers_every_accepted_call_and_fails_the_rest_clearly() {
    bounded(40, async {
        let _serial = SERIAL.lock().await;
        let (server, imp) = start(server_config(Dispatch::Pool, QueueKind::Blocking)).await;
        let addr = server.local_addr();
        let calc = calc_client(addr, Duration::from_secs(5), 1).await;

        // Four calls held inside their handlers: accepted, in flight at shutdown.
        let mut held = Vec::new();
        for tag in 0..4u64 {
            let calc = calc.clone();
            held.push(tokio::spawn(async move { calc.wait_gate(tag).await }));
        }
        assert!(imp.gate.wait_entered(4, Duration::from_secs(5)));

        let tally = Arc::new(Tally::default());
        let stop = Arc::new(AtomicBool::new(false));
        let mut callers = Vec::new();
        for t in 0..12i64 {
            let (calc, tally, stop) = (calc.clone(), tally.clone(), stop.clone());
            callers.push(tokio::spawn(async move {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    tally.issued.fetch_add(1, Ordering::SeqCst);
                    match calc.add(t, i).await {
                        Ok(v) => {
                            assert_eq!(v, t + i);
                            tally.ok.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) => {
                            tally.failed(&e);
                            let clear = matches!(
                                e,
                                RpcError::ShuttingDown
                                    | RpcError::ConnectionClosed { .. }
                                    | RpcError::Connect { .. }
                                    | RpcError::Write { .. }
                                    | RpcError::NotSent { .. }
                                    | RpcError::Closed(_)
                            );
                            if !clear {
                                tally.unexpected.lock().push(e.to_string());
                            }
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                    i += 1;
                }
            }));
        }
        assert!(
            wait_until(Duration::from_secs(10), || tally.get(&tally.ok) >= 1000).await,
            "load established"
        );
        let shutdown = tokio::spawn(server.shutdown());
        // Once callers see the shutdown (their first error), release the held calls:
        // they were accepted before it and must still be answered.
        assert!(
            wait_until(Duration::from_secs(10), || tally.get(&tally.err) >= 1).await,
            "callers see the shutdown"
        );
        imp.gate.open();
        let report = shutdown.await.unwrap();
        for h in held {
            match h.await.unwrap() {
                Ok(_) => {}
                Err(e) => panic!("a call in flight at shutdown is answered, got {e}"),
            }
        }
        // Keep calling a little past the stop, then stop and tally.
        assert!(
            wait_until(Duration::from_secs(5), || tally.get(&tally.err) >= 100).await,
            "calls after the stop fail"
        );
        stop.store(true, Ordering::SeqCst);
        for c in callers {
            c.await.unwrap();
        }
        let (issued, ok, err) = (
            tally.get(&tally.issued),
            tally.get(&tally.ok),
            tally.get(&tally.err),
        );
        let ran = imp.calls.load(Ordering::SeqCst);
        eprintln!(
            "graceful shutdown: issued {issued}, ok {ok}, err {err}, handlers run {ran}, \
             drained {}, shutdown took {:?}, errors {:?}",
            report.drained,
            report.elapsed,
            tally.kinds.lock()
        );
        assert!(report.drained, "in-flight calls drained within the grace");
        assert_eq!(ok + err, issued, "every call resolved exactly once");
        // Every call whose handler ran got its answer: none was lost to the close.
        assert_eq!(
            ok,
            ran,
            "every call whose handler ran got its answer (errors by kind: {:?})",
            tally.kinds.lock()
        );
        let unexpected = tally.unexpected.lock();
        assert!(unexpected.is_empty(), "unclear errors: {unexpected:?}");
    })
    .await;
}
