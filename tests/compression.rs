//! Compressed bodies end to end: both algorithms on every dispatch mode,
//! what the wire carries, a server that answers plain, bodies that do not
//! shrink, and what goes wrong — a corrupt body or one that opens past the
//! frame limit fails that call alone, on either side, and the connection
//! carries on.
#![cfg(all(feature = "gzip", feature = "zstd"))]

mod common;

use std::time::Duration;

use brisk::codec::compression::{self, BodyCompressor};
use brisk::codec::{BodyCodec, Code, FrameCodec, FrameKind, OutFrame};
use brisk::rpc_core::{Compression, CompressionConfig};
use brisk::{Client, Payload, RpcError, SerializerKind};
use bytes::{Bytes, BytesMut};
use common::*;
use futures::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::Framed;

/// `n` bytes of text that compresses well.
fn text(n: usize) -> Bytes {
    let s = "brisk compresses bodies over a kilobyte; ".repeat(n / 41 + 1);
    Bytes::from(s[..n].to_owned())
}

/// `n` bytes that do not compress (xorshift).
fn noise(n: usize) -> Bytes {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    Bytes::from(
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect::<Vec<u8>>(),
    )
}

async fn client(addr: std::net::SocketAddr, algorithm: Compression) -> CalcClient {
    CalcClient::new(
        Client::builder()
            .addr(addr)
            .compression(CompressionConfig::new(algorithm))
            .build()
            .await
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_algorithms_shrink_the_wire_on_every_dispatch() {
    bounded(60, async {
        for (name, dispatch, queue) in dispatch_variants() {
            for algorithm in [Compression::Gzip, Compression::Zstd] {
                let (server, _) = start(server_config(dispatch, queue)).await;
                let calc = client(server.local_addr(), algorithm).await;
                let body = text(256 * 1024);
                let back = calc.blob(Payload::from(body.clone())).await.unwrap();
                assert_eq!(back.into_bytes(), body, "{name} {algorithm}");
                let io = &server.metrics().io;
                // Counted once written, which may be just after the client read it.
                assert!(wait_until(Duration::from_secs(5), || io.bytes_out() > 0).await);
                // Counted once written, which may be just after the client read it.
                assert!(wait_until(Duration::from_secs(5), || io.bytes_out() > 0).await);
                assert!(
                    io.bytes_in() < body.len() as u64 / 4,
                    "{name} {algorithm}: request went as {} bytes",
                    io.bytes_in()
                );
                assert!(
                    io.bytes_out() < body.len() as u64 / 4,
                    "{name} {algorithm}: answer went as {} bytes",
                    io.bytes_out()
                );
                // Small bodies go plain, and calls beside work as before.
                assert_eq!(calc.add(20, 22).await.unwrap(), 42);
                server.shutdown().await;
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_compressed_answers_off_answers_plain() {
    bounded(30, async {
        let mut config = server_config(brisk::Dispatch::Direct, brisk::QueueKind::Transfer);
        config.compression.answers = false;
        let (server, _) = start(config).await;
        let calc = client(server.local_addr(), Compression::Zstd).await;
        let body = text(128 * 1024);
        assert_eq!(
            calc.blob(Payload::from(body.clone()))
                .await
                .unwrap()
                .into_bytes(),
            body
        );
        let io = &server.metrics().io;
        // Counted once written, which may be just after the client read it.
        assert!(wait_until(Duration::from_secs(5), || io.bytes_out() > 0).await);
        assert!(
            io.bytes_in() < body.len() as u64 / 4,
            "request: {}",
            io.bytes_in()
        );
        assert!(
            io.bytes_out() > body.len() as u64,
            "answer: {}",
            io.bytes_out()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_do_not_shrink_or_are_small_go_plain() {
    bounded(30, async {
        let (server, _) = start(server_config(
            brisk::Dispatch::Direct,
            brisk::QueueKind::Transfer,
        ))
        .await;
        let calc = client(server.local_addr(), Compression::Gzip).await;
        let body = noise(64 * 1024);
        assert_eq!(
            calc.blob(Payload::from(body.clone()))
                .await
                .unwrap()
                .into_bytes(),
            body
        );
        let io = &server.metrics().io;
        // Counted once written, which may be just after the client read it.
        assert!(wait_until(Duration::from_secs(5), || io.bytes_out() > 0).await);
        assert!(io.bytes_in() > body.len() as u64, "{}", io.bytes_in());
        assert!(io.bytes_out() > body.len() as u64, "{}", io.bytes_out());
        // Under `min_size`: sent as it is.
        let small = text(900);
        let before = io.bytes_in();
        assert_eq!(
            calc.blob(Payload::from(small.clone()))
                .await
                .unwrap()
                .into_bytes(),
            small
        );
        assert!(io.bytes_in() - before > small.len() as u64);
    })
    .await;
}

/// A request frame for `Calc.blob(body)` with its body compressed as given.
fn blob_request(id: u64, body: &Bytes, flags: u8, packed: Option<Bytes>) -> BytesMut {
    let args = SerializerKind::MsgPack
        .encode_body(&(Payload::from(body.clone()),))
        .unwrap();
    let mut frame = OutFrame::request(id, 1, "Calc", "blob", packed.unwrap_or(args));
    frame.flags = flags;
    let mut buf = BytesMut::new();
    frame.encode(&mut buf, 16 << 20).unwrap();
    buf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_or_oversized_request_body_fails_that_call_and_the_connection_goes_on() {
    bounded(30, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let mut config = server_config(dispatch, queue);
            config.transport.max_frame_size = 256 * 1024;
            let (server, _) = start(config).await;
            let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
            let mut framed = Framed::new(&mut raw, FrameCodec::new(1 << 20));

            // Not zstd at all.
            let garbage = Bytes::from_static(b"this was never compressed by anyone");
            let frame = blob_request(
                1,
                &garbage,
                compression::flags(Compression::Zstd, Compression::None),
                Some(garbage.clone()),
            );
            framed.get_mut().write_all(&frame).await.unwrap();
            let answer = framed.next().await.unwrap().unwrap();
            assert_eq!(answer.header.request_id, 1);
            assert_eq!(answer.code(), Code::BadRequest, "{name}");
            let message = answer.error_status().unwrap().message().to_owned();
            assert!(
                message.contains("zstd body") && message.contains("corrupt"),
                "{name}: {message}"
            );

            // A megabyte of zeros packs small but opens past the 256 KiB limit.
            let zeros = Bytes::from(vec![0u8; 1 << 20]);
            let args = SerializerKind::MsgPack
                .encode_body(&(Payload::from(zeros.clone()),))
                .unwrap();
            let (packed, used) = BodyCompressor::new(Compression::Gzip, 0, 1).compress(args);
            assert_eq!(used, Compression::Gzip);
            let frame = blob_request(
                2,
                &zeros,
                compression::flags(Compression::Gzip, Compression::None),
                Some(packed),
            );
            framed.get_mut().write_all(&frame).await.unwrap();
            let answer = framed.next().await.unwrap().unwrap();
            assert_eq!(answer.header.request_id, 2);
            assert_eq!(answer.code(), Code::BadRequest, "{name}");
            let message = answer.error_status().unwrap().message().to_owned();
            assert!(message.contains("frame limit"), "{name}: {message}");

            // A flags value no version has.
            let frame = blob_request(3, &text(10), 3, None);
            framed.get_mut().write_all(&frame).await.unwrap();
            let answer = framed.next().await.unwrap().unwrap();
            assert_eq!(
                (answer.header.request_id, answer.code()),
                (3, Code::BadRequest)
            );

            // The same connection: a good compressed call, answered in kind.
            let body = text(64 * 1024);
            let args = SerializerKind::MsgPack
                .encode_body(&(Payload::from(body.clone()),))
                .unwrap();
            let (packed, _) = BodyCompressor::new(Compression::Zstd, 0, 1).compress(args);
            let frame = blob_request(
                4,
                &body,
                compression::flags(Compression::Zstd, Compression::Gzip),
                Some(packed),
            );
            framed.get_mut().write_all(&frame).await.unwrap();
            let answer = framed.next().await.unwrap().unwrap();
            assert_eq!(
                (answer.header.request_id, answer.code()),
                (4, Code::Ok),
                "{name}"
            );
            assert_eq!(
                compression::body_compression(answer.header.flags).unwrap(),
                Compression::Gzip
            );
            let opened = compression::open_body(answer.header.flags, answer.body, 1 << 20).unwrap();
            let back: Payload = SerializerKind::MsgPack.decode_bytes(&opened).unwrap();
            assert_eq!(back.into_bytes(), body);
            server.shutdown().await;
        }
    })
    .await;
}

/// A fake server: answers the first request it gets with a corrupt zstd
/// body, every later one properly (with `Calc.add`'s answer, 42).
async fn fake_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let answered = answered.clone();
            tokio::spawn(async move {
                let mut framed = Framed::new(socket, FrameCodec::new(1 << 20));
                while let Some(Ok(frame)) = framed.next().await {
                    if frame.header.kind != FrameKind::Request {
                        continue;
                    }
                    let id = frame.header.request_id;
                    let first = answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
                    let answer = if first {
                        let mut a = OutFrame::response(
                            id,
                            1,
                            Bytes::from_static(b"\x28\xb5\x2f\xfd garbage"),
                        );
                        a.flags = compression::flags(Compression::Zstd, Compression::None);
                        a
                    } else {
                        OutFrame::response(
                            id,
                            1,
                            SerializerKind::MsgPack.encode_body(&42i64).unwrap(),
                        )
                    };
                    if framed.send(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_answer_fails_that_call_and_the_connection_goes_on() {
    bounded(30, async {
        let addr = fake_server().await;
        let client = Client::builder()
            .addr(addr)
            .max_try_count(1)
            .build()
            .await
            .unwrap();
        let calc = CalcClient::new(client.clone());
        let err = calc.add(1, 2).await.unwrap_err();
        assert!(
            matches!(
                err,
                RpcError::Compression {
                    algorithm: "zstd",
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(err.code(), Code::BadRequest);
        let open = client.open_connections();
        for _ in 0..4 {
            assert_eq!(calc.add(1, 2).await.unwrap(), 42);
        }
        assert_eq!(client.open_connections(), open);
    })
    .await;
}

#[tokio::test]
async fn compression_settings_are_checked_and_named() {
    let config: brisk::ClientConfig = brisk::rpc_core::config::parse_str(
        "[compression]\nalgorithm = \"zstd\"\nmin_size = 4096\nlevel = 3\n",
        brisk::rpc_core::config::ConfigFormat::Toml,
    )
    .unwrap();
    assert_eq!(config.compression.algorithm, Compression::Zstd);
    assert_eq!(config.compression.min_size, 4096);
    let mut bad = config.clone();
    bad.compression = CompressionConfig {
        algorithm: Compression::Gzip,
        level: 11,
        ..CompressionConfig::default()
    };
    let err = bad.validate().unwrap_err().to_string();
    assert!(
        err.contains("compression.level") && err.contains("0..=9"),
        "{err}"
    );
    let err = brisk::rpc_core::config::parse_str::<brisk::ClientConfig>(
        "[compression]\nalgorithm = \"lz4\"\n",
        brisk::rpc_core::config::ConfigFormat::Toml,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("none") && err.contains("zstd"), "{err}");
    let mut server = brisk::ServerConfig::default();
    server.compression.level = 40;
    let err = server.validate().unwrap_err().to_string();
    assert!(err.contains("compression.level"), "{err}");
}
