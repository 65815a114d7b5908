//! Connect types on loopback: `reused` (one shared connection) vs `pooled` (4
//! connections, held for the write) vs `fixed` (4 multiplexed connections,
//! round-robin, calls made together sharing a write), calling a do-nothing method on a direct-dispatch server at
//! concurrency 1, 20 and 100.
//!
//! `cargo bench --bench connect_type` — one group per concurrency
//! (`connect_type/c1`, `connect_type/c20`, `connect_type/c100`); throughput in
//! calls/s. One iteration is a batch of calls spread over `c` tasks.

#[path = "support/mod.rs"]
mod support;

use brisk::{ConnectType, WriteMode};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use support::{LoopbackServer, Op};

/// Connections of `fixed` and `pooled`.
const CONNECTIONS: usize = 4;

/// (concurrency, calls per batch): batches of a few tens of ms.
const CASES: [(usize, u64); 3] = [(1, 1000), (20, 3000), (100, 4000)];

fn connect_type(c: &mut Criterion) {
    let rt = support::client_runtime();
    for (concurrency, calls) in CASES {
        let server = LoopbackServer::direct();
        let mut group = c.benchmark_group(format!("connect_type/c{concurrency}"));
        group.sampling_mode(support::SAMPLING);
        group.throughput(Throughput::Elements(calls));
        for connect_type in ConnectType::ALL {
            let client = support::client(
                &rt,
                server.addr(),
                *connect_type,
                CONNECTIONS,
                WriteMode::Async,
            );
            group.bench_function(connect_type.name(), |b| {
                b.to_async(&rt).iter_custom(|iters| {
                    let client = client.clone();
                    async move {
                        support::run_batches(&client, &Op::Nothing, calls, concurrency, iters).await
                    }
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
    targets = connect_type
}
criterion_main!(benches);
