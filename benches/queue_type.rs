//! Server dispatch: `direct` (handler on the connection's I/O task) vs `pool`
//! with a `blocking` queue vs `pool` with a `transfer` queue, at concurrency 20,
//! for a do-nothing method and for a handler that blocks its thread ~1 ms.
//!
//! `cargo bench --bench queue_type` — groups `queue_type/nothing` and
//! `queue_type/block_1ms`; throughput in calls/s. The pool is
//! `PoolConfig::default()` (core = CPUs, max = 8 × core); the client is `fixed`
//! with 4 connections, async writes.

#[path = "support/mod.rs"]
mod support;

use brisk::{ConnectType, Dispatch, QueueKind, WriteMode};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use support::{LoopbackServer, Op};

const CONCURRENCY: usize = 20;
const CONNECTIONS: usize = 4;

const DISPATCHES: [(&str, Dispatch, QueueKind); 3] = [
    ("direct", Dispatch::Direct, QueueKind::Transfer),
    ("pool+blocking", Dispatch::Pool, QueueKind::Blocking),
    ("pool+transfer", Dispatch::Pool, QueueKind::Transfer),
];

/// (method, op, calls per batch). A blocking direct server serves ~2 calls at a
/// time, so the 1 ms batch is small.
fn cases() -> [(&'static str, Op, u64); 2] {
    [
        ("nothing", Op::Nothing, 2000),
        ("block_1ms", Op::Block1ms, 200),
    ]
}

fn queue_type(c: &mut Criterion) {
    let rt = support::client_runtime();
    for (method, op, calls) in cases() {
        let mut group = c.benchmark_group(format!("queue_type/{method}"));
        group.sampling_mode(support::SAMPLING);
        group.throughput(Throughput::Elements(calls));
        for (name, dispatch, queue) in DISPATCHES {
            let server = LoopbackServer::start(dispatch, queue);
            let client = support::client(
                &rt,
                server.addr(),
                ConnectType::Fixed,
                CONNECTIONS,
                WriteMode::Async,
            );
            group.bench_function(name, |b| {
                b.to_async(&rt).iter_custom(|iters| {
                    let (client, op) = (client.clone(), op.clone());
                    async move { support::run_batches(&client, &op, calls, CONCURRENCY, iters).await }
                });
            });
            client.client().close();
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = support::criterion();
    targets = queue_type
}
criterion_main!(benches);
