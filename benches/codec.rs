//! Codec costs without the network: body encode / decode per serializer
//! (`SerializerKind::ALL` through `brisk::codec::BodyCodec`) and whole-frame
//! encode (`OutFrame::encode`) / decode (`FrameCodec`), at 64 B, 1 KiB, 10 KiB and
//! 100 KiB.
//!
//! `cargo bench --bench codec` — groups `codec/encode`, `codec/decode` (members
//! `<serializer>/<size>`), `codec/frame_encode`, `codec/frame_decode` (members
//! `<size>`). Body throughput counts the message's logical size (8-byte id +
//! 16-byte name + payload = the nominal size), so serializers compare on the same
//! data; each serializer's encoded size is printed once. Frame throughput counts
//! the encoded frame. A serializer that cannot encode the message (e.g. a
//! not-yet-implemented one) is reported on stderr and skipped. Groups
//! `codec/compress/<algorithm>` and `codec/decompress/<algorithm>` time body
//! compression on JSON-like text (throughput: the plain size).

#[path = "support/mod.rs"]
mod support;

use std::hint::black_box;

use brisk::codec::{BodyCodec, FrameCodec, OutFrame, DEFAULT_MAX_FRAME_SIZE};
use brisk::SerializerKind;
use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use serde::{Deserialize, Serialize};
use tokio_util::codec::Decoder;

const SIZES: [usize; 4] = [64, 1024, 10 * 1024, 100 * 1024];
const NAME: &str = "brisk-bench-msg!";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Message {
    id: u64,
    name: String,
    payload: Bytes,
}

/// A message whose id, name and payload add up to `size` bytes.
fn message(size: usize) -> Message {
    let payload: Vec<u8> = (0..size - 8 - NAME.len())
        .map(|i| (i * 31 % 251) as u8)
        .collect();
    Message {
        id: 0x0123_4567_89AB_CDEF,
        name: NAME.to_owned(),
        payload: Bytes::from(payload),
    }
}

/// The serializers that round-trip the message, with its encoded form per size.
fn working_serializers() -> Vec<(SerializerKind, Vec<Bytes>)> {
    let mut out = Vec::new();
    for &kind in SerializerKind::ALL {
        let mut encoded = Vec::new();
        for size in SIZES {
            let msg = message(size);
            let mut buf = BytesMut::new();
            let result = kind
                .encode(&msg, &mut buf)
                .and_then(|()| kind.decode::<Message>(&buf))
                .and_then(|back| {
                    if back == msg {
                        Ok(())
                    } else {
                        Err(brisk::RpcError::Handler(
                            "round trip changed the message".into(),
                        ))
                    }
                });
            if let Err(e) = result {
                eprintln!("codec: skipping {kind}: {e}");
                break;
            }
            encoded.push(buf.freeze());
        }
        if encoded.len() == SIZES.len() {
            let sizes: Vec<String> = SIZES
                .iter()
                .zip(&encoded)
                .map(|(s, e)| format!("{} -> {} B", support::size_label(*s), e.len()))
                .collect();
            eprintln!("codec: {kind} encoded sizes: {}", sizes.join(", "));
            out.push((kind, encoded));
        }
    }
    out
}

fn bodies(c: &mut Criterion) {
    let serializers = working_serializers();

    let mut group = c.benchmark_group("codec/encode");
    for (kind, _) in &serializers {
        for size in SIZES {
            let msg = message(size);
            let mut buf = BytesMut::with_capacity(size * 4);
            group.throughput(Throughput::Bytes(size as u64));
            group.bench_function(
                BenchmarkId::new(kind.name(), support::size_label(size)),
                |b| {
                    b.iter(|| {
                        buf.clear();
                        kind.encode(black_box(&msg), &mut buf).expect("encode");
                        black_box(buf.len())
                    });
                },
            );
        }
    }
    group.finish();

    let mut group = c.benchmark_group("codec/decode");
    for (kind, encoded) in &serializers {
        for (size, bytes) in SIZES.iter().zip(encoded) {
            group.throughput(Throughput::Bytes(*size as u64));
            group.bench_function(
                BenchmarkId::new(kind.name(), support::size_label(*size)),
                |b| {
                    b.iter(|| kind.decode::<Message>(black_box(bytes)).expect("decode"));
                },
            );
        }
    }
    group.finish();
}

fn frames(c: &mut Criterion) {
    let frames: Vec<(usize, OutFrame, Bytes)> = SIZES
        .iter()
        .map(|&size| {
            let body = Bytes::from(vec![0x5Au8; size]);
            let frame = OutFrame::request(7, SerializerKind::MsgPack.id(), "Bench", "echo", body);
            let mut buf = BytesMut::new();
            frame
                .encode(&mut buf, DEFAULT_MAX_FRAME_SIZE)
                .expect("frame encodes");
            (size, frame, buf.freeze())
        })
        .collect();

    let mut group = c.benchmark_group("codec/frame_encode");
    for (size, frame, encoded) in &frames {
        let mut buf = BytesMut::with_capacity(encoded.len());
        group.throughput(Throughput::Bytes(encoded.len() as u64));
        group.bench_function(
            BenchmarkId::from_parameter(support::size_label(*size)),
            |b| {
                b.iter(|| {
                    buf.clear();
                    black_box(frame)
                        .encode(&mut buf, DEFAULT_MAX_FRAME_SIZE)
                        .expect("frame encodes");
                    black_box(buf.len())
                });
            },
        );
    }
    group.finish();

    let mut group = c.benchmark_group("codec/frame_decode");
    for (size, _, encoded) in &frames {
        let mut codec = FrameCodec::default();
        group.throughput(Throughput::Bytes(encoded.len() as u64));
        let batch = if *size >= 10 * 1024 {
            BatchSize::LargeInput
        } else {
            BatchSize::SmallInput
        };
        group.bench_function(
            BenchmarkId::from_parameter(support::size_label(*size)),
            |b| {
                b.iter_batched(
                    || BytesMut::from(&encoded[..]),
                    |mut buf| {
                        codec
                            .decode(&mut buf)
                            .expect("frame decodes")
                            .expect("a whole frame")
                    },
                    batch,
                );
            },
        );
    }
    group.finish();
}

/// Compressing and opening a body of JSON-like text per algorithm (the
/// sender's and the receiver's cost of `compression`), at 1, 10 and 100 KiB.
fn compression(c: &mut Criterion) {
    use brisk::codec::compression::{decompress, BodyCompressor};
    use brisk::Compression;
    let record = r#"{"id":1234,"from_uid":"u-5678","to_uid":"u-9012","content":"hello brisk"},"#;
    for algorithm in [Compression::Zstd, Compression::Gzip] {
        let mut packs = c.benchmark_group(format!("codec/compress/{algorithm}"));
        let compressor = BodyCompressor::new(algorithm, 0, 1);
        let mut packed = Vec::new();
        for size in [1024, 10 * 1024, 100 * 1024] {
            let text = Bytes::from(record.repeat(size / record.len() + 1)[..size].to_owned());
            packs.throughput(Throughput::Bytes(size as u64));
            packs.bench_function(
                BenchmarkId::from_parameter(support::size_label(size)),
                |b| b.iter(|| compressor.compress(black_box(text.clone()))),
            );
            packed.push((size, compressor.compress(text).0));
        }
        packs.finish();
        let mut opens = c.benchmark_group(format!("codec/decompress/{algorithm}"));
        for (size, body) in packed {
            opens.throughput(Throughput::Bytes(size as u64));
            opens.bench_function(
                BenchmarkId::from_parameter(support::size_label(size)),
                |b| b.iter(|| decompress(algorithm, black_box(&body), 1 << 20).expect("opens")),
            );
        }
        opens.finish();
    }
}

criterion_group! {
    name = benches;
    config = support::criterion();
    targets = bodies, frames, compression
}
criterion_main!(benches);
