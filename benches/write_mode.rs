//! Write completion: `sync` (the call waits until its frame is on the socket)
//! vs `async` (the call is queued; a later write failure completes it), at
//! concurrency 1, 20 and 100, calling a do-nothing method on a direct-dispatch
//! server over 4 fixed connections.
//!
//! `cargo bench --bench write_mode` — groups `write_mode/c1`, `c20`, `c100`;
//! throughput in calls/s.

#[path = "support/mod.rs"]
mod support;

use brisk::{ConnectType, WriteMode};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use support::{LoopbackServer, Op};

const CONNECTIONS: usize = 4;

/// (concurrency, calls per batch).
const CASES: [(usize, u64); 3] = [(1, 1000), (20, 3000), (100, 4000)];

fn write_mode(c: &mut Criterion) {
    let rt = support::client_runtime();
    for (concurrency, calls) in CASES {
        let server = LoopbackServer::direct();
        let mut group = c.benchmark_group(format!("write_mode/c{concurrency}"));
        group.sampling_mode(support::SAMPLING);
        group.throughput(Throughput::Elements(calls));
        for mode in WriteMode::ALL {
            let client =
                support::client(&rt, server.addr(), ConnectType::Fixed, CONNECTIONS, *mode);
            group.bench_function(mode.name(), |b| {
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
    targets = write_mode
}
criterion_main!(benches);
