//! What the criterion benches share: the `Bench` service, a server on its own
//! runtime, client construction and a bounded "batch of calls over `c` tasks"
//! runner.
//!
//! Included by each bench with `#[path = "support/mod.rs"] mod support;`, so
//! every bench uses only part of it.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use brisk::{
    Client, ClientConfig, Connect, ConnectType, Context, Dispatch, DispatchConfig, PoolConfig,
    QueueKind, RpcError, Server, ServerConfig, ServerHandle, Status, WriteMode,
};
use bytes::Bytes;
use criterion::{Criterion, SamplingMode};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

/// The service every network bench calls.
#[brisk::service]
pub trait Bench {
    /// Does nothing: measures the framework alone.
    async fn nothing(&self, cx: &Context) -> Result<(), Status>;
    /// Blocks its thread for ~1 ms, as a JDBC call would.
    async fn block_1ms(&self, cx: &Context) -> Result<(), Status>;
    /// Returns its argument.
    async fn echo(&self, cx: &Context, data: Bytes) -> Result<Bytes, Status>;
}

/// The `Bench` implementation.
pub struct BenchImpl;

impl Bench for BenchImpl {
    async fn nothing(&self, _cx: &Context) -> Result<(), Status> {
        Ok(())
    }

    async fn block_1ms(&self, _cx: &Context) -> Result<(), Status> {
        std::thread::sleep(Duration::from_millis(1));
        Ok(())
    }

    async fn echo(&self, _cx: &Context, data: Bytes) -> Result<Bytes, Status> {
        Ok(data)
    }
}

/// Upper bound on one batch of calls: a bench that exceeds it panics instead of
/// hanging (each call is bounded by the 5 s request timeout anyway).
pub const BATCH_LIMIT: Duration = Duration::from_secs(60);

/// The criterion settings of every bench: 10 samples, short warm-up and
/// measurement, so that all five benches finish in a few minutes. 10 000
/// bootstrap resamples instead of 100 000: with 10 samples more add nothing,
/// and the plots of the bootstrap distributions took ~6 s of CPU per benchmark.
pub fn criterion() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .nresamples(10_000)
        .warm_up_time(Duration::from_millis(1000))
        .measurement_time(Duration::from_secs(2))
}

/// Flat sampling (the same number of iterations in every sample) keeps the
/// number of batches small and the run time predictable for batches of tens of ms.
pub const SAMPLING: SamplingMode = SamplingMode::Flat;

/// The runtime the clients (and the benchmark loop) run on: multi-thread, two
/// workers (the machine has two cores).
pub fn client_runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-client")
        .enable_all()
        .build()
        .expect("client runtime")
}

/// A `Bench` server on loopback, on a runtime of its own (two workers) so its
/// I/O tasks and the clients' do not share worker threads, as with two
/// processes.
pub struct LoopbackServer {
    handle: Option<ServerHandle>,
    addr: String,
    runtime: Runtime,
}

impl LoopbackServer {
    /// Starts a server with `dispatch`; with `Dispatch::Pool` the worker pool is
    /// `PoolConfig::default()` (jkrpc's sizes: core = CPUs, max = 8 × core) with
    /// the `queue` kind.
    pub fn start(dispatch: Dispatch, queue: QueueKind) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("bench-server")
            .enable_all()
            .build()
            .expect("server runtime");
        let mut config = ServerConfig::default()
            .with_addr("127.0.0.1:0")
            .with_dispatch(dispatch);
        config.dispatch = DispatchConfig::new(
            dispatch,
            PoolConfig {
                queue,
                ..PoolConfig::default()
            },
        );
        config.shutdown_grace = Duration::from_secs(1);
        let handle = runtime
            .block_on(
                Server::builder()
                    .config(config)
                    .service(BenchServer::new(BenchImpl))
                    .start(),
            )
            .expect("bench server starts");
        let addr = handle.local_addr().to_string();
        LoopbackServer {
            handle: Some(handle),
            addr,
            runtime,
        }
    }

    /// A direct-dispatch server.
    pub fn direct() -> Self {
        Self::start(Dispatch::Direct, QueueKind::Transfer)
    }

    /// The bound `host:port`.
    pub fn addr(&self) -> &str {
        &self.addr
    }
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            // Graceful, but bounded: grace is 1 s, the pool gets 2 s.
            self.runtime.block_on(async move {
                let _ = tokio::time::timeout(Duration::from_secs(5), handle.shutdown()).await;
            });
        }
    }
}

/// Builds a client of `addr` on `runtime`. `connections` is the number of
/// connections of `fixed` and both bounds of `pooled` (the pool does not grow
/// or shrink during a run); `reused` always has one.
pub fn client(
    runtime: &Runtime,
    addr: &str,
    connect_type: ConnectType,
    connections: usize,
    write_mode: WriteMode,
) -> BenchClient {
    let config = ClientConfig {
        addr: addr.to_owned(),
        connect: match connect_type {
            ConnectType::Pooled => Connect::pooled(connections, connections),
            other => Connect::sized(other, connections),
        },
        write_mode,
        ..ClientConfig::default()
    };
    let client = runtime
        .block_on(Client::builder().config(config).build())
        .expect("bench client connects");
    BenchClient::new(client)
}

/// One call of a batch.
#[derive(Clone)]
pub enum Op {
    Nothing,
    Block1ms,
    Echo(Bytes),
}

impl Op {
    async fn call(&self, client: &BenchClient) -> Result<(), RpcError> {
        match self {
            Op::Nothing => client.nothing().await,
            Op::Block1ms => client.block_1ms().await,
            Op::Echo(data) => {
                let out = client.echo(data.clone()).await?;
                if out.len() != data.len() {
                    return Err(RpcError::Handler(format!(
                        "echo returned {} bytes for {}",
                        out.len(),
                        data.len()
                    )));
                }
                Ok(())
            }
        }
    }
}

/// Makes `calls` calls of `op`, spread over `concurrency` tasks that each call
/// one after the other, and returns the wall time of the whole batch. Panics on
/// the first failed call or when the batch exceeds [`BATCH_LIMIT`].
pub async fn run_batch(client: &BenchClient, op: &Op, calls: u64, concurrency: usize) -> Duration {
    let concurrency = concurrency.max(1) as u64;
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for t in 0..concurrency {
        let n = calls / concurrency + u64::from(t < calls % concurrency);
        let (client, op) = (client.clone(), op.clone());
        tasks.spawn(async move {
            for _ in 0..n {
                op.call(&client).await?;
            }
            Ok::<(), RpcError>(())
        });
    }
    let joined = tokio::time::timeout(BATCH_LIMIT, async {
        while let Some(result) = tasks.join_next().await {
            match result {
                Ok(Ok(())) => {}
                Ok(Err(e)) => panic!("a bench call failed: {e}"),
                Err(e) => panic!("a bench task failed: {e}"),
            }
        }
    })
    .await;
    if joined.is_err() {
        tasks.abort_all();
        panic!("a batch of {calls} calls took more than {BATCH_LIMIT:?}");
    }
    start.elapsed()
}

/// `iters` batches one after the other; the total wall time (for `iter_custom`).
pub async fn run_batches(
    client: &BenchClient,
    op: &Op,
    calls: u64,
    concurrency: usize,
    iters: u64,
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        total += run_batch(client, op, calls, concurrency).await;
    }
    total
}

/// `1024` → `"1KiB"`, `64` → `"64B"`.
pub fn size_label(bytes: usize) -> String {
    if bytes >= 1024 && bytes % 1024 == 0 {
        format!("{}KiB", bytes / 1024)
    } else {
        format!("{bytes}B")
    }
}
