//! A test service and helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use brisk::{
    Context, Dispatch, DispatchConfig, PoolConfig, QueueKind, RpcError, Server, ServerConfig,
    ServerHandle, Status,
};
use parking_lot::{Condvar, Mutex};

/// Everything the tests need a server to do.
#[brisk::service]
pub trait Calc {
    async fn add(&self, cx: &Context, a: i64, b: i64) -> Result<i64, Status>;
    async fn echo(&self, cx: &Context, data: Vec<u8>) -> Result<Vec<u8>, Status>;
    /// `echo` for large payloads: bytes that decode without a copy.
    async fn blob(&self, cx: &Context, data: brisk::Payload) -> Result<brisk::Payload, Status>;
    async fn sleep_ms(&self, cx: &Context, ms: u64) -> Result<u64, Status>;
    /// Sleeps `ms`, then names the thread it goes on on.
    async fn thread_after_sleep(&self, cx: &Context, ms: u64) -> Result<String, Status>;
    /// Sleeps `ms`, then panics.
    async fn panic_after_sleep(&self, cx: &Context, ms: u64) -> Result<(), Status>;
    async fn fail(&self, cx: &Context, message: String) -> Result<(), Status>;
    async fn panic_now(&self, cx: &Context) -> Result<(), Status>;
    async fn wait_gate(&self, cx: &Context, tag: u64) -> Result<u64, Status>;
    async fn calls(&self, cx: &Context) -> Result<u64, Status>;
}

/// A gate the test opens to release handlers blocked in `wait_gate`, and a
/// signal of how many have entered it (so tests wait on events, not sleeps).
#[derive(Default)]
pub struct Gate {
    state: Mutex<(bool, usize)>,
    cv: Condvar,
}

impl Gate {
    pub fn open(&self) {
        self.state.lock().0 = true;
        self.cv.notify_all();
    }

    /// Blocks the calling thread until the gate opens (bounded: 10 s).
    fn pass(&self) {
        let mut s = self.state.lock();
        s.1 += 1;
        self.cv.notify_all();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !s.0 {
            if self.cv.wait_until(&mut s, deadline).timed_out() {
                return;
            }
        }
    }

    /// Waits (bounded) until `n` handlers are inside the gate.
    pub fn wait_entered(&self, n: usize, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        let mut s = self.state.lock();
        while s.1 < n {
            if self.cv.wait_until(&mut s, deadline).timed_out() {
                return s.1 >= n;
            }
        }
        true
    }
}

#[derive(Default)]
pub struct CalcImpl {
    pub gate: Arc<Gate>,
    /// `add` and `fail` calls run.
    pub calls: AtomicU64,
    /// `sleep_ms` calls started.
    pub slept: AtomicU64,
    /// `echo` calls run.
    pub echoed: AtomicU64,
}

impl Calc for Arc<CalcImpl> {
    async fn add(&self, _cx: &Context, a: i64, b: i64) -> Result<i64, Status> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(a + b)
    }
    async fn echo(&self, _cx: &Context, data: Vec<u8>) -> Result<Vec<u8>, Status> {
        self.echoed.fetch_add(1, Ordering::Relaxed);
        Ok(data)
    }
    async fn blob(&self, _cx: &Context, data: brisk::Payload) -> Result<brisk::Payload, Status> {
        self.echoed.fetch_add(1, Ordering::Relaxed);
        Ok(data)
    }
    async fn sleep_ms(&self, _cx: &Context, ms: u64) -> Result<u64, Status> {
        self.slept.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(ms)
    }
    async fn thread_after_sleep(&self, _cx: &Context, ms: u64) -> Result<String, Status> {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(std::thread::current().name().unwrap_or("").to_owned())
    }
    async fn panic_after_sleep(&self, _cx: &Context, ms: u64) -> Result<(), Status> {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        panic!("deliberate test panic after an await")
    }
    async fn fail(&self, _cx: &Context, message: String) -> Result<(), Status> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Err(RpcError::Handler(message).into())
    }
    async fn panic_now(&self, _cx: &Context) -> Result<(), Status> {
        panic!("deliberate test panic")
    }
    async fn wait_gate(&self, _cx: &Context, tag: u64) -> Result<u64, Status> {
        // Blocks the thread on purpose, as a JDBC call would.
        self.gate.pass();
        Ok(tag)
    }
    async fn calls(&self, _cx: &Context) -> Result<u64, Status> {
        Ok(self.calls.load(Ordering::Relaxed))
    }
}

/// The three server dispatch setups every mode test runs against.
pub fn dispatch_variants() -> Vec<(&'static str, Dispatch, QueueKind)> {
    vec![
        ("direct", Dispatch::Direct, QueueKind::Transfer),
        ("pool+blocking", Dispatch::Pool, QueueKind::Blocking),
        ("pool+transfer", Dispatch::Pool, QueueKind::Transfer),
    ]
}

pub fn server_config(dispatch: Dispatch, queue: QueueKind) -> ServerConfig {
    let pool = PoolConfig {
        core_threads: 2,
        max_threads: 8,
        queue_size: 1000,
        queue,
        ..PoolConfig::default()
    };
    ServerConfig {
        dispatch: DispatchConfig::new(dispatch, pool),
        ..ServerConfig::default().with_addr("127.0.0.1:0")
    }
}

pub async fn start(config: ServerConfig) -> (ServerHandle, Arc<CalcImpl>) {
    let imp = Arc::new(CalcImpl::default());
    let server = Server::builder()
        .config(config)
        .service(CalcServer::new(imp.clone()))
        .start()
        .await
        .expect("server starts");
    (server, imp)
}

/// Runs a test body with a hard upper bound so nothing can hang CI.
pub async fn bounded<F: std::future::Future<Output = ()>>(secs: u64, f: F) {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .expect("test exceeded its time bound");
}

/// Reads frames from a raw peer's socket until one answers `request_id`
/// (bounded by `within`); its status, or `None` when the socket closed or
/// nothing came in time.
pub async fn raw_answer_status(
    raw: &mut tokio::net::TcpStream,
    request_id: u64,
    within: Duration,
) -> Option<brisk::codec::Code> {
    use tokio::io::AsyncReadExt;
    use tokio_util::codec::Decoder;
    let mut codec = brisk::codec::FrameCodec::new(1 << 20);
    let mut buf = bytes::BytesMut::new();
    tokio::time::timeout(within, async {
        loop {
            while let Ok(Some(frame)) = codec.decode(&mut buf) {
                if frame.header.request_id == request_id {
                    return Some(frame.code());
                }
            }
            match raw.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    })
    .await
    .ok()
    .flatten()
}

/// Polls `cond` every 2 ms until it holds or `within` passes; true when it held
/// (waits on counters other tasks advance: an event, bounded).
pub async fn wait_until(within: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    cond()
}

/// Runs `work` on a current-thread runtime of its own, on a blocking
/// thread, as a caller in another process would: the test's runtime sees
/// only its sockets.
pub async fn on_a_runtime_of_its_own<F>(work: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::task::spawn_blocking(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(work)
    })
    .await
    .expect("the work on its own runtime")
}

/// Whether the current runtime has more than one worker thread.
pub fn several_workers() -> bool {
    tokio::runtime::Handle::current().metrics().num_workers() > 1
}

/// Runs `run` (one server and its caller, returning the server's
/// `busy_poll_reads`) and, on a runtime with several workers, again on a
/// fresh server until the poll has read the socket itself, up to 5 tries:
/// there the worker blocked in `epoll_wait` and the poll race for every
/// frame, and the driver may win a whole run. Asserts that one try saw the
/// poll read when `wants_reads` and the runtime has several workers.
pub async fn until_the_poll_reads<F, Fut>(name: &str, wants_reads: bool, mut run: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = u64>,
{
    let wants_reads = wants_reads && several_workers();
    let tries = if wants_reads { 5 } else { 1 };
    let mut read_by_poll = 0;
    for _ in 0..tries {
        read_by_poll = run().await;
        if read_by_poll > 0 {
            break;
        }
    }
    if wants_reads {
        assert!(
            read_by_poll > 0,
            "{name}: the poll reads the socket itself (in none of {tries} tries)"
        );
    }
}

/// Records the client address (the connection) of every call it sees.
pub struct PeerLog(pub Arc<Mutex<Vec<std::net::SocketAddr>>>);

#[brisk::async_trait]
impl brisk::Interceptor for PeerLog {
    async fn call(
        &self,
        req: brisk::RpcRequest,
        next: brisk::Next<'_>,
    ) -> Result<brisk::RpcResponse, RpcError> {
        if let Some(peer) = req.cx.peer() {
            self.0.lock().push(peer);
        }
        next.run(req).await
    }
}

/// How many calls each connection carried, largest first.
pub fn calls_per_connection(peers: &[std::net::SocketAddr]) -> Vec<usize> {
    let mut counts = std::collections::HashMap::new();
    for p in peers {
        *counts.entry(*p).or_insert(0usize) += 1;
    }
    let mut v: Vec<usize> = counts.into_values().collect();
    v.sort_unstable_by(|a, b| b.cmp(a));
    v
}
