//! Nothing lost, nothing run twice (issue 15, cases 1 and 2): an over-size
//! request fails alone and its neighbours on the connection are answered once;
//! a call that may have run is not retried unless its method is idempotent;
//! requests that never left the client are retried, and run once.
//!
//! Every check counts handler runs on the server against answers at the
//! client. Every wait is bounded; nothing asserts on speed.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use brisk::client::Balancer;
use brisk::{Client, ClientConfig, Connect, Dispatch, QueueKind, RpcError, ServerConfig};
use common::*;

const MIB: usize = 1 << 20;

fn one_connection(addr: SocketAddr, max_frame_size: usize) -> ClientConfig {
    let mut config = ClientConfig {
        addr: addr.to_string(),
        connect: Connect::fixed(1),
        request_timeout: Duration::from_secs(10),
        ..ClientConfig::default()
    };
    config.transport.max_frame_size = max_frame_size;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_size_request_fails_alone_and_its_neighbours_are_answered_once() {
    bounded(60, async {
        for (name, dispatch, queue) in dispatch_variants() {
            // The server keeps the default 16 MiB limit; the client allows 64 MiB,
            // so the over-size frame leaves the client and reaches the server.
            let (server, imp) = start(server_config(dispatch, queue)).await;
            let client = Client::builder()
                .config(one_connection(server.local_addr(), 64 * MIB))
                .build()
                .await
                .expect("client connects");
            let calc = CalcClient::new(client.clone());
            let slow: Vec<_> = (0..10)
                .map(|_| {
                    let calc = calc.clone();
                    tokio::spawn(async move { calc.sleep_ms(300).await })
                })
                .collect();
            assert!(
                wait_until(Duration::from_secs(10), || imp.slept.load(Ordering::SeqCst)
                    == 10)
                .await,
                "{name}: the ten slow calls are running"
            );
            let big = calc.blob(vec![7u8; 16 * MIB + 1].into()).await;
            match &big {
                Err(RpcError::FrameTooLarge { size, max }) => {
                    assert_eq!(*max, 16 * MIB as u64, "{name}: names the server's limit");
                    assert!(*size > 16 * MIB as u64, "{name}: {size}");
                }
                other => panic!("{name}: expected FrameTooLarge, got {other:?}"),
            }
            let message = big.unwrap_err().to_string();
            assert!(message.contains("max_frame_size"), "{name}: {message}");
            for call in slow {
                assert_eq!(
                    call.await.expect("task"),
                    Ok(300),
                    "{name}: neighbour answered"
                );
            }
            // Nothing ran twice, and the connection lived through it.
            assert_eq!(
                imp.slept.load(Ordering::SeqCst),
                10,
                "{name}: each slow call ran once"
            );
            assert_eq!(
                imp.echoed.load(Ordering::SeqCst),
                0,
                "{name}: the big one never ran"
            );
            assert_eq!(
                server.stats().accepted_connections,
                1,
                "{name}: no reconnect"
            );
            assert_eq!(
                calc.add(2, 3).await,
                Ok(5),
                "{name}: the connection still serves"
            );
            assert_eq!(client.open_connections(), 1);
            drop(server);
        }
    })
    .await;
}

/// A fake server: answers the first request with a body of `big` bytes, every
/// later one with the msgpack encoding of `5i64`.
async fn fake_server(big: usize) -> SocketAddr {
    use brisk::codec::{BodyCodec, FrameCodec, OutFrame};
    use futures::{SinkExt, StreamExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.expect("the client connects");
        let mut framed = tokio_util::codec::Framed::new(socket, FrameCodec::new(64 * MIB));
        let mut first = true;
        while let Some(Ok(frame)) = framed.next().await {
            let id = frame.header.request_id;
            let body = if std::mem::take(&mut first) {
                bytes::Bytes::from(vec![0u8; big])
            } else {
                brisk::SerializerKind::MsgPack.encode_body(&5i64).unwrap()
            };
            if framed.send(OutFrame::response(id, 1, body)).await.is_err() {
                break;
            }
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_too_large_for_the_client_fails_that_call_only() {
    bounded(30, async {
        // The client accepts 1 MiB frames; the first answer is 2 MiB.
        let addr = fake_server(2 * MIB).await;
        let client = Client::builder()
            .config(one_connection(addr, MIB))
            .build()
            .await
            .expect("client connects");
        let calc = CalcClient::new(client.clone());
        match calc.add(2, 3).await {
            Err(RpcError::FrameTooLarge { size, max }) => {
                assert_eq!(max, MIB as u64);
                assert!(size > 2 * MIB as u64);
            }
            other => panic!("expected FrameTooLarge, got {other:?}"),
        }
        // The 2 MiB were skipped; the next answer on the same connection arrives.
        assert_eq!(calc.add(2, 3).await, Ok(5));
        assert_eq!(client.open_connections(), 1);
    })
    .await;
}

/// Two servers; a call runs on one of them, which then dies with the call in
/// flight. Returns the call's outcome, its runs on the dead server and its
/// runs on the other one.
async fn closed_with_a_call_in_flight(idempotent: bool) -> (Result<u64, RpcError>, u64, u64) {
    let (a, imp_a) = start(server_config(Dispatch::Direct, QueueKind::Transfer)).await;
    let (b, imp_b) = start(server_config(Dispatch::Direct, QueueKind::Transfer)).await;
    let mut config = ClientConfig {
        addrs: vec![
            a.local_addr().to_string().into(),
            b.local_addr().to_string().into(),
        ],
        connect: Connect::fixed(1),
        max_try_count: 2,
        request_timeout: Duration::from_secs(10),
        ..ClientConfig::default()
    };
    if idempotent {
        config.idempotent_methods = vec!["Calc.sleep_ms".into()];
    }
    let client = Client::builder()
        .config(config)
        .build()
        .await
        .expect("connects");
    let calc = CalcClient::new(client);
    let call = tokio::spawn(async move { calc.sleep_ms(500).await });
    let started = || imp_a.slept.load(Ordering::SeqCst) + imp_b.slept.load(Ordering::SeqCst);
    assert!(wait_until(Duration::from_secs(5), || started() == 1).await);
    // The server running the call dies (its handler has started).
    let (victim, other) = if imp_a.slept.load(Ordering::SeqCst) == 1 {
        ((a, imp_a), (b, imp_b))
    } else {
        ((b, imp_b), (a, imp_a))
    };
    drop(victim.0);
    let outcome = call.await.expect("task");
    let ran = (
        victim.1.slept.load(Ordering::SeqCst),
        other.1.slept.load(Ordering::SeqCst),
    );
    drop(other.0);
    (outcome, ran.0, ran.1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_may_have_run_is_retried_only_when_idempotent() {
    bounded(60, async {
        let (outcome, on_a, on_b) = closed_with_a_call_in_flight(false).await;
        assert!(
            matches!(outcome, Err(RpcError::ConnectionClosed { .. })),
            "not idempotent: the caller learns the connection closed: {outcome:?}"
        );
        assert_eq!((on_a, on_b), (1, 0), "ran once, not again elsewhere");

        let (outcome, on_a, on_b) = closed_with_a_call_in_flight(true).await;
        assert_eq!(outcome, Ok(500), "idempotent: retried on the other server");
        assert_eq!((on_a, on_b), (1, 1));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_never_left_are_retried_and_run_once() {
    bounded(60, async {
        // A peer that accepts and never reads: the client's socket buffers and
        // then its write buffer fill with the calls sent to it; then it closes.
        let bad = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let bad_addr = bad.local_addr().unwrap();
        let (close_bad, closed) = tokio::sync::oneshot::channel::<()>();
        let bad_task = tokio::spawn(async move {
            let (socket, _) = bad.accept().await.expect("the client connects");
            let _ = closed.await;
            drop(socket);
            drop(bad);
        });
        let (good, imp) = start(ServerConfig {
            max_in_flight_per_connection: 4096,
            ..server_config(Dispatch::Direct, QueueKind::Transfer)
        })
        .await;
        let config = ClientConfig {
            addrs: vec![
                bad_addr.to_string().into(),
                good.local_addr().to_string().into(),
            ],
            balancer: Balancer::RoundRobin,
            connect: Connect::fixed(1),
            max_try_count: 2,
            request_timeout: Duration::from_secs(20),
            ..ClientConfig::default()
        };
        let client = Client::builder()
            .config(config)
            .build()
            .await
            .expect("connects");
        let calc = CalcClient::new(client);
        let calls: Vec<_> = (0..24)
            .map(|_| {
                let calc = calc.clone();
                tokio::spawn(async move { calc.blob(vec![3u8; 2 * MIB].into()).await })
            })
            .collect();
        // Let the calls to the bad peer pile up, then close it.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let _ = close_bad.send(());
        let mut ok = 0u64;
        let mut maybe_ran = 0u64;
        for call in calls {
            match call.await.expect("task") {
                Ok(v) => {
                    assert_eq!(v.len(), 2 * MIB);
                    ok += 1;
                }
                Err(RpcError::ConnectionClosed { .. } | RpcError::Write { .. }) => maybe_ran += 1,
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        bad_task.await.unwrap();
        assert_eq!(ok + maybe_ran, 24, "every call resolved once");
        assert_eq!(
            imp.echoed.load(Ordering::SeqCst),
            ok,
            "each answer from one run"
        );
        println!(
            "never left and retried: {} of 12; may have run (not retried): {maybe_ran}",
            ok - 12
        );
        assert!(
            ok > 12,
            "the calls queued behind the stalled peer were retried on the good server ({ok} ok)"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_no_answers_does_not_hold_the_frame_budget() {
    use brisk::codec::{BodyCodec, OutFrame};
    use tokio::io::AsyncWriteExt;
    bounded(60, async {
        // A budget for one large request; half the idle timeout (2 s of 4)
        // bounds how long unread answers may hold their requests' share.
        let mut config = server_config(Dispatch::Direct, QueueKind::Transfer);
        config.memory.frame_budget = 20 * MIB;
        config.transport.idle_timeout = Duration::from_secs(4);
        let (server, imp) = start(config).await;
        // The hog: two 15 MiB requests, and it never reads its answers (more
        // than the socket buffers take, so they stay in the server's outbox).
        let mut hog = tokio::net::TcpStream::connect(server.local_addr())
            .await
            .unwrap();
        let body = brisk::SerializerKind::MsgPack
            .encode_body(&(brisk::Payload::from(vec![5u8; 15 * MIB]),))
            .unwrap();
        let mut bytes = bytes::BytesMut::new();
        for id in 1..=2 {
            OutFrame::request(id, 1, "Calc", "blob", body.clone())
                .encode(&mut bytes, usize::MAX)
                .unwrap();
        }
        let writing = tokio::spawn(async move {
            let _ = hog.write_all(&bytes).await;
            // Keep the socket open, unread, until the test ends.
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(hog);
        });
        assert!(
            wait_until(Duration::from_secs(20), || imp
                .echoed
                .load(Ordering::SeqCst)
                >= 1)
            .await,
            "the hog's first request ran"
        );
        // A well-behaved client's large call needs budget the hog's unread
        // answers held: it goes through once that share is given back.
        let calc = CalcClient::new(
            Client::builder()
                .config(one_connection(server.local_addr(), 64 * MIB))
                .build()
                .await
                .expect("client connects"),
        );
        let started = Instant::now();
        let back = calc.blob(vec![6u8; 15 * MIB].into()).await.expect("served");
        assert_eq!(back.len(), 15 * MIB);
        let waited = started.elapsed();
        println!(
            "large call behind a hog's unread answers: {waited:?}; open connections then: {}",
            server.stats().open_connections
        );
        assert!(
            waited >= Duration::from_millis(1500),
            "the call waited for the hog's share ({waited:?})"
        );
        writing.abort();
    })
    .await;
}
