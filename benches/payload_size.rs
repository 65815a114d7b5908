//! Payload sweep (the Netty/Mina comparison): `echo` of 1, 2, 5, 10, 50 and
//! 100 KiB at concurrency 8 over 2 fixed connections (async writes, msgpack,
//! direct-dispatch server).
//!
//! `cargo bench --bench payload_size` — group `payload_size/echo`, one member per
//! size; throughput in bytes/s counting both directions (2 × size per call).

#[path = "support/mod.rs"]
mod support;

use brisk::{ConnectType, WriteMode};
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use support::{LoopbackServer, Op};

const CONCURRENCY: usize = 8;
const CONNECTIONS: usize = 2;
const SIZES_KIB: [usize; 6] = [1, 2, 5, 10, 50, 100];

/// Calls per batch: about 24 MiB each way, between 64 and 3000 calls (a few
/// tens of ms per batch on loopback).
fn calls_for(size: usize) -> u64 {
    ((24 << 20) / size).clamp(64, 3000) as u64
}

fn payload_size(c: &mut Criterion) {
    let rt = support::client_runtime();
    let server = LoopbackServer::direct();
    let client = support::client(
        &rt,
        server.addr(),
        ConnectType::Fixed,
        CONNECTIONS,
        WriteMode::Async,
    );
    let mut group = c.benchmark_group("payload_size/echo");
    group.sampling_mode(support::SAMPLING);
    for kib in SIZES_KIB {
        let size = kib * 1024;
        let calls = calls_for(size);
        let op = Op::Echo(Bytes::from(vec![0xA5u8; size]));
        group.throughput(Throughput::Bytes(2 * size as u64 * calls));
        group.bench_with_input(
            BenchmarkId::from_parameter(support::size_label(size)),
            &op,
            |b, op| {
                b.to_async(&rt).iter_custom(|iters| {
                let (client, op) = (client.clone(), op.clone());
                async move { support::run_batches(&client, &op, calls, CONCURRENCY, iters).await }
            });
            },
        );
    }
    group.finish();
    client.client().close();
}

criterion_group! {
    name = benches;
    config = support::criterion();
    targets = payload_size
}
criterion_main!(benches);
