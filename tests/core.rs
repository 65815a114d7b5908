//! End-to-end tests of the core: every connect type × write mode × dispatch,
//! timeouts, busy answers, broken connections, restarts, bad input, shutdown.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use brisk::codec::{Code, Frame, FrameCodec, OutFrame};
use brisk::{
    async_trait, CallOptions, Client, Connect, ConnectType, Dispatch, DispatchConfig, Interceptor,
    Next, PoolConfig, PoolHold, QueueKind, RpcError, RpcRequest, RpcResponse, SerializerKind,
    Server, WriteMode,
};
use bytes::{Bytes, BytesMut};
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::Decoder;

async fn client(
    addr: std::net::SocketAddr,
    connect_type: ConnectType,
    write_mode: WriteMode,
) -> CalcClient {
    let c = Client::builder()
        .addr(addr.to_string())
        .connect(Connect::sized(connect_type, 3))
        .write_mode(write_mode)
        .request_timeout(Duration::from_secs(5))
        .build()
        .await
        .expect("client connects");
    CalcClient::new(c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connect_type_write_mode_and_dispatch_answers_each_call_correctly() {
    bounded(120, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let (server, _) = start(server_config(dispatch, queue)).await;
            for connect_type in ConnectType::ALL {
                for write_mode in WriteMode::ALL {
                    let calc = client(server.local_addr(), *connect_type, *write_mode).await;
                    let mut tasks = Vec::new();
                    for t in 0..16i64 {
                        let calc = calc.clone();
                        tasks.push(tokio::spawn(async move {
                            for i in 0..40i64 {
                                let got = calc.add(t * 1000, i).await.expect("call succeeds");
                                assert_eq!(got, t * 1000 + i, "response matches its request");
                            }
                        }));
                    }
                    for t in tasks {
                        t.await.expect("caller task");
                    }
                    let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
                    assert_eq!(calc.echo(data.clone()).await.unwrap(), data);
                    eprintln!("ok: {name} {connect_type} {write_mode}");
                }
            }
            server.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_serializer_works_end_to_end() {
    bounded(30, async {
        let (server, _) = start(server_config(Dispatch::Direct, QueueKind::Transfer)).await;
        for &ser in SerializerKind::ALL {
            let c = Client::builder()
                .addr(server.local_addr().to_string())
                .serializer(ser)
                .build()
                .await
                .unwrap();
            let calc = CalcClient::new(c);
            assert_eq!(calc.add(-5, 7).await.unwrap(), 2, "{ser}");
            assert_eq!(
                calc.echo(vec![1, 2, 3]).await.unwrap(),
                vec![1, 2, 3],
                "{ser}"
            );
            calc.calls().await.unwrap();
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_follow_call_over_method_over_config() {
    bounded(30, async {
        let (server, _) = start(server_config(Dispatch::Direct, QueueKind::Transfer)).await;
        let c = Client::builder()
            .addr(server.local_addr()) // a SocketAddr, as it is
            .request_timeout(Duration::from_millis(3000))
            .method_timeout("Calc", "sleep_ms", Duration::from_millis(150))
            .build()
            .await
            .unwrap();
        assert_eq!(
            c.timeout_for("Calc", "sleep_ms"),
            Duration::from_millis(150)
        );
        assert_eq!(c.timeout_for("Calc", "add"), Duration::from_millis(3000));
        let calc = CalcClient::new(c);

        // Per-method timeout applies.
        let start = Instant::now();
        match calc.sleep_ms(2000).await {
            Err(RpcError::Timeout {
                timeout, method, ..
            }) => {
                assert_eq!(timeout, Duration::from_millis(150));
                assert_eq!(method, "sleep_ms");
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert!(start.elapsed() < Duration::from_millis(1500));

        // Per-call beats per-method.
        let fast = calc.with_options(CallOptions::timeout(Duration::from_millis(40)));
        match fast.sleep_ms(2000).await {
            Err(RpcError::Timeout { timeout, .. }) => {
                assert_eq!(timeout, Duration::from_millis(40))
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        let patient = calc.with_options(CallOptions::timeout(Duration::from_millis(2000)));
        assert_eq!(patient.sleep_ms(200).await.unwrap(), 200);

        // The timed-out calls left nothing pending and the connection still works.
        assert_eq!(calc.add(1, 1).await.unwrap(), 2);
    })
    .await;
}

/// A pool dispatch server with one core thread, at most `max_threads`
/// named `name-N`, and `queue_size`.
fn small_pool(
    queue: QueueKind,
    max_threads: usize,
    queue_size: usize,
    name: &str,
) -> brisk::ServerConfig {
    let mut config = server_config(Dispatch::Pool, queue);
    config.dispatch = DispatchConfig::Pool(PoolConfig {
        core_threads: 1,
        max_threads,
        queue_size,
        queue,
        name: name.to_owned(),
        ..PoolConfig::default()
    });
    config
}

/// A pooled handler that awaits holds no worker while it waits: on a pool
/// of at most two threads, twenty calls sleep at once (with a worker held
/// per await, two would, and the rest queue behind them), each goes on on a
/// worker thread after its await, and every one is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pooled_handlers_that_await_hold_no_worker_while_they_wait() {
    bounded(60, async {
        for queue in [QueueKind::Blocking, QueueKind::Transfer] {
            let (server, imp) = start(small_pool(queue, 2, 100, "waits")).await;
            let calc = client(server.local_addr(), ConnectType::Fixed, WriteMode::Async).await;
            let sleepers: Vec<_> = (0..20)
                .map(|_| {
                    let c = calc.with_options(CallOptions::timeout(Duration::from_secs(30)));
                    tokio::spawn(async move { c.sleep_ms(3_000).await })
                })
                .collect();
            assert!(
                wait_until(Duration::from_secs(2), || imp
                    .slept
                    .load(std::sync::atomic::Ordering::SeqCst)
                    == 20)
                .await,
                "{queue}: all 20 sleep at once on 2 threads, {} did",
                imp.slept.load(std::sync::atomic::Ordering::SeqCst)
            );
            // No worker is held while they wait...
            let pool = || server.pool_stats().unwrap_or_default();
            assert!(
                wait_until(Duration::from_secs(2), || {
                    let p = pool();
                    p.waiting == 20 && p.active == 0
                })
                .await,
                "{queue}: {:?}",
                pool()
            );
            assert!(pool().largest_pool_size <= 2, "{queue}: {:?}", pool());
            // ...and the pool runs other calls meanwhile.
            assert_eq!(calc.add(2, 3).await.unwrap(), 5, "{queue}");
            let thread = calc.thread_after_sleep(10).await.unwrap();
            assert!(
                thread.starts_with("waits-"),
                "{queue}: after its await a handler goes on on a worker, not on {thread:?}"
            );
            for s in sleepers {
                assert_eq!(s.await.unwrap().unwrap(), 3_000, "{queue}");
            }
            assert_eq!(server.stats().busy_rejections, 0, "{queue}");
            server.shutdown().await;
        }
    })
    .await;
}

/// Waiting pooled calls still count against the pool's bound: with room
/// for three calls, three that wait fill it and a fourth is refused
/// `ServerBusy` at once; a waiting call given up by its deadline is dropped
/// (its place is freed long before its sleep would end); one that panics
/// after its await is answered with the panic; all are answered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_pooled_calls_count_against_the_bound_and_end_once() {
    bounded(60, async {
        for queue in [QueueKind::Blocking, QueueKind::Transfer] {
            // One thread and room for two queued: three calls in all.
            let (server, imp) = start(small_pool(queue, 1, 2, "bound")).await;
            let waiting = || server.pool_stats().map_or(0, |p| p.waiting);
            let calc = client(server.local_addr(), ConnectType::Fixed, WriteMode::Async).await;
            // One at a time: a burst could fill the blocking queue before
            // the worker takes its first call.
            let mut sleepers = Vec::new();
            for i in 1..=3 {
                let c = calc.with_options(CallOptions::timeout(Duration::from_secs(30)));
                sleepers.push(tokio::spawn(async move { c.sleep_ms(1_500).await }));
                assert!(
                    wait_until(Duration::from_secs(5), || waiting() == i).await,
                    "{queue}: {i} call(s) wait, {} do",
                    waiting()
                );
            }
            match calc.add(1, 2).await {
                Err(RpcError::ServerBusy(msg)) => assert!(msg.contains("pool"), "{msg}"),
                other => panic!("{queue}: a fourth call is refused, got {other:?}"),
            }
            for s in sleepers {
                assert_eq!(s.await.unwrap().unwrap(), 1_500, "{queue}");
            }
            assert!(wait_until(Duration::from_secs(5), || waiting() == 0).await);

            // Given up by its deadline while it waits: answered at the
            // deadline, and its future dropped (no longer waiting) well
            // before its 20 s sleep.
            let slept = imp.slept.load(std::sync::atomic::Ordering::SeqCst);
            let short = calc.with_options(CallOptions::timeout(Duration::from_millis(200)));
            let e = short.sleep_ms(20_000).await.unwrap_err();
            assert_eq!(e.code(), Code::DeadlineExceeded, "{queue}: {e}");
            assert_eq!(
                imp.slept.load(std::sync::atomic::Ordering::SeqCst),
                slept + 1
            );
            assert!(
                wait_until(Duration::from_secs(5), || waiting() == 0).await,
                "{queue}: the given-up call's handler is dropped"
            );

            // A panic after the await is that call's error, nothing more.
            let e = calc.panic_after_sleep(20).await.unwrap_err();
            assert!(
                e.to_string()
                    .contains("deliberate test panic after an await"),
                "{queue}: {e}"
            );
            assert_eq!(calc.add(2, 2).await.unwrap(), 4, "{queue}");
            server.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_pool_answers_server_busy_promptly() {
    bounded(30, async {
        for queue in [QueueKind::Blocking, QueueKind::Transfer] {
            let (server, imp) = start(small_pool(queue, 1, 1, "brisk-worker")).await;
            let calc = client(server.local_addr(), ConnectType::Fixed, WriteMode::Async).await;
            // Occupy the pool: one running, and the queue bound used up.
            let c1 = calc.clone();
            let running = tokio::spawn(async move { c1.wait_gate(1).await });
            let gate = imp.gate.clone();
            assert!(tokio::task::spawn_blocking(
                move || gate.wait_entered(1, Duration::from_secs(5))
            )
            .await
            .unwrap());
            let mut queued = Vec::new();
            let mut busy = 0;
            let start = Instant::now();
            // Transfer bounds submitted = queue_size + max_threads, blocking bounds the
            // queue: either way a handful of calls must hit the bound.
            for i in 0..4u64 {
                let c = calc.with_options(CallOptions::timeout(Duration::from_secs(5)));
                let h = tokio::spawn(async move { c.wait_gate(10 + i).await });
                queued.push(h);
            }
            // Wait (bounded) until the server has read all five requests, so each
            // was either queued or rejected before the gate opens.
            let deadline = Instant::now() + Duration::from_secs(5);
            while server.stats().requests < 5 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let mut results = Vec::new();
            imp.gate.open();
            for h in queued {
                results.push(h.await.unwrap());
            }
            for r in &results {
                match r {
                    Ok(_) => {}
                    Err(RpcError::ServerBusy(msg)) => {
                        busy += 1;
                        assert!(msg.contains("pool"), "{msg}");
                    }
                    Err(e) => panic!("unexpected error {e}"),
                }
            }
            assert!(
                busy >= 1,
                "{queue}: at least one call must be rejected, got {results:?}"
            );
            assert!(
                start.elapsed() < Duration::from_secs(4),
                "busy answers come before the 5 s timeout"
            );
            assert_eq!(running.await.unwrap().unwrap(), 1);
            assert!(server.stats().busy_rejections >= 1);
            // The server recovers.
            assert_eq!(calc.add(2, 3).await.unwrap(), 5);
            server.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_fails_pending_calls_and_a_restarted_server_is_reached_again() {
    bounded(30, async {
        let (server, _) = start(server_config(Dispatch::Direct, QueueKind::Transfer)).await;
        let addr = server.local_addr();
        // One try, so the error seen is the broken connection itself (a retry would
        // report the refused reconnect instead).
        let calc = CalcClient::new(
            Client::builder()
                .addr(addr.to_string())
                .write_mode(WriteMode::Sync)
                .max_try_count(1)
                .build()
                .await
                .unwrap(),
        );
        let mut pending = Vec::new();
        for _ in 0..6 {
            let c = calc.clone();
            pending.push(tokio::spawn(async move { c.sleep_ms(10_000).await }));
        }
        // Let the calls reach the server, then kill it (dropping the handle closes all).
        tokio::time::sleep(Duration::from_millis(100)).await;
        let killed = Instant::now();
        drop(server);
        for p in pending {
            match p.await.unwrap() {
                Err(RpcError::ConnectionClosed { .. }) => {}
                other => panic!("expected connection closed, got {other:?}"),
            }
        }
        assert!(
            killed.elapsed() < Duration::from_secs(3),
            "pending calls fail at once, not at their timeout"
        );

        // Nothing listens: a call fails with a transport error after its tries.
        assert!(calc.add(1, 2).await.unwrap_err().is_transport());

        // Restart on the same port: the next call reconnects.
        let (server2, _) =
            start(server_config(Dispatch::Direct, QueueKind::Transfer).with_addr(addr.to_string()))
                .await;
        assert_eq!(calc.add(1, 2).await.unwrap(), 3);
        server2.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_errors_and_panics_are_answered_and_never_retried() {
    bounded(30, async {
        let (server, imp) = start(server_config(Dispatch::Pool, QueueKind::Transfer)).await;
        let c = Client::builder()
            .addr(server.local_addr().to_string())
            .max_try_count(3)
            .build()
            .await
            .unwrap();
        let calc = CalcClient::new(c);
        assert_eq!(
            calc.fail("no such user".into()).await.unwrap_err(),
            RpcError::Handler("no such user".into())
        );
        assert_eq!(
            imp.calls.load(std::sync::atomic::Ordering::Relaxed),
            1,
            "not retried"
        );
        match calc.panic_now().await.unwrap_err() {
            RpcError::Handler(m) => {
                assert!(m.contains("panicked") && m.contains("deliberate"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(calc.add(1, 1).await.unwrap(), 2, "server still serves");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_service_method_and_serializer_get_clear_errors() {
    bounded(30, async {
        let (server, _) = start(server_config(Dispatch::Direct, QueueKind::Transfer)).await;
        let c = Client::builder()
            .addr(server.local_addr().to_string())
            .build()
            .await
            .unwrap();
        let err = c
            .call::<_, ()>("Nope", "add", &(), &CallOptions::default())
            .await
            .unwrap_err();
        assert_eq!(err, RpcError::UnknownService("Nope".into()));
        let err = c
            .call::<_, ()>("Calc", "subtract", &(1, 2), &CallOptions::default())
            .await
            .unwrap_err();
        assert_eq!(
            err,
            RpcError::UnknownMethod {
                service: "Calc".into(),
                method: "subtract".into()
            }
        );
        // Wrong argument types: a clear deserialize error, the connection stays up.
        let err = c
            .call::<_, i64>("Calc", "add", &("x",), &CallOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(err, RpcError::Deserialize { .. }), "{err:?}");

        // An unknown serializer id, sent raw.
        let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
        let mut buf = BytesMut::new();
        OutFrame::request(7, 9, "Calc", "add", Bytes::new())
            .encode(&mut buf, 1 << 20)
            .unwrap();
        raw.write_all(&buf).await.unwrap();
        let frame = read_frame(&mut raw).await;
        assert_eq!(frame.header.request_id, 7);
        assert_eq!(frame.code(), Code::UnknownSerializer);
        assert_eq!(
            frame
                .error_status()
                .expect("an error status")
                .into_error("Calc", "add"),
            RpcError::UnknownSerializer(9)
        );
        // Same raw connection still answers a ping.
        let mut buf = BytesMut::new();
        OutFrame::control(brisk::codec::FrameKind::Ping, 8)
            .encode(&mut buf, 1 << 20)
            .unwrap();
        raw.write_all(&buf).await.unwrap();
        assert_eq!(
            read_frame(&mut raw).await.header.kind,
            brisk::codec::FrameKind::Pong
        );
        assert_eq!(
            c.call::<_, i64>("Calc", "add", &(1, 1), &CallOptions::default())
                .await
                .unwrap(),
            2
        );
    })
    .await;
}

async fn read_frame(raw: &mut TcpStream) -> Frame {
    let mut codec = FrameCodec::default();
    let mut buf = BytesMut::new();
    loop {
        if let Some(f) = codec.decode(&mut buf).unwrap() {
            return f;
        }
        let n = raw.read_buf(&mut buf).await.unwrap();
        assert!(n > 0, "server closed the connection");
    }
}

/// Reads until the server closes the socket; true when it did within `within`.
async fn closed_by_server(raw: &mut TcpStream, within: Duration) -> bool {
    let mut sink = vec![0u8; 4096];
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_oversize_frames_close_only_that_connection() {
    bounded(30, async {
        let mut config = server_config(Dispatch::Direct, QueueKind::Transfer);
        config.transport.max_frame_size = 64 * 1024;
        let (server, _) = start(config).await;
        let calc = client(server.local_addr(), ConnectType::Fixed, WriteMode::Async).await;

        let mut garbage = TcpStream::connect(server.local_addr()).await.unwrap();
        let noise: Vec<u8> = (0..512).map(|_| rand::random::<u8>()).collect();
        garbage.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        garbage.write_all(&noise).await.unwrap();
        assert!(closed_by_server(&mut garbage, Duration::from_secs(5)).await);

        // A valid header announcing a 3 GiB body: answered `FrameTooLarge` from
        // the header alone (its bytes would be skipped); the connection stays.
        let mut huge = TcpStream::connect(server.local_addr()).await.unwrap();
        let mut buf = BytesMut::new();
        OutFrame::request(1, 1, "Calc", "add", Bytes::new())
            .encode(&mut buf, 1 << 20)
            .unwrap();
        buf[24..28].copy_from_slice(&(3u32 << 30).to_be_bytes());
        huge.write_all(&buf).await.unwrap();
        assert_eq!(
            raw_answer_status(&mut huge, 1, Duration::from_secs(5)).await,
            Some(Code::FrameTooLarge)
        );

        // Others keep working.
        assert_eq!(calc.add(20, 22).await.unwrap(), 42);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_peers_are_closed_by_the_idle_timeout() {
    bounded(30, async {
        let mut config = server_config(Dispatch::Direct, QueueKind::Transfer);
        config.transport.idle_timeout = Duration::from_millis(300);
        config.transport.heartbeat_interval = Duration::from_millis(100);
        let (server, _) = start(config).await;
        let mut silent = TcpStream::connect(server.local_addr()).await.unwrap();
        assert!(closed_by_server(&mut silent, Duration::from_secs(5)).await);

        // A brisk client pings while idle, so it stays connected.
        let c = Client::builder()
            .config(brisk::ClientConfig {
                addr: server.local_addr().to_string(),
                transport: brisk::transport::TransportConfig {
                    heartbeat_interval: Duration::from_millis(50),
                    ..Default::default()
                },
                ..Default::default()
            })
            .build()
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(
            c.open_connections(),
            2,
            "heartbeats kept the connections alive"
        );
        assert_eq!(CalcClient::new(c).add(1, 2).await.unwrap(), 3);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_completes_in_flight_calls() {
    bounded(30, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let (server, _) = start(server_config(dispatch, queue)).await;
            let calc = client(server.local_addr(), ConnectType::Fixed, WriteMode::Async).await;
            let mut calls = Vec::new();
            for _ in 0..5 {
                let c = calc.clone();
                calls.push(tokio::spawn(async move { c.sleep_ms(300).await }));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            let report = server.shutdown().await;
            assert!(report.drained, "{name}");
            for c in calls {
                assert_eq!(
                    c.await.unwrap().unwrap(),
                    300,
                    "{name}: in-flight call completed"
                );
            }
            assert!(calc.add(1, 1).await.is_err(), "{name}: no server any more");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reused_connections_are_shared_per_address_and_pools_are_bounded() {
    bounded(30, async {
        let (server, _) = start(server_config(Dispatch::Direct, QueueKind::Transfer)).await;
        let a = client(server.local_addr(), ConnectType::Reused, WriteMode::Async).await;
        let b = client(server.local_addr(), ConnectType::Reused, WriteMode::Sync).await;
        assert_eq!(a.add(1, 2).await.unwrap(), 3);
        assert_eq!(b.add(3, 4).await.unwrap(), 7);
        assert_eq!(
            server.stats().open_connections,
            1,
            "one connection for the whole process"
        );

        let mut config = brisk::ClientConfig {
            addr: server.local_addr().to_string(),
            connect: Connect::Pooled {
                min_connections: 1,
                max_connections: 2,
                hold: PoolHold::Response,
                idle_timeout: Connect::DEFAULT_IDLE_TIMEOUT,
            },
            ..Default::default()
        };
        let pooled = CalcClient::new(
            Client::builder()
                .config(config.clone())
                .build()
                .await
                .unwrap(),
        );
        let mut calls = Vec::new();
        for _ in 0..6 {
            let c = pooled.clone();
            calls.push(tokio::spawn(async move { c.sleep_ms(50).await }));
        }
        for c in calls {
            c.await.unwrap().unwrap();
        }
        assert!(
            pooled.client().open_connections() <= 2,
            "pool never exceeds max_connections"
        );

        // Idle connections above min are evicted.
        config.connect = Connect::Pooled {
            min_connections: 1,
            max_connections: 2,
            hold: PoolHold::Response,
            idle_timeout: Duration::from_millis(100),
        };
        let pooled = CalcClient::new(Client::builder().config(config).build().await.unwrap());
        let mut calls = Vec::new();
        for _ in 0..4 {
            let c = pooled.clone();
            calls.push(tokio::spawn(async move { c.sleep_ms(30).await }));
        }
        for c in calls {
            c.await.unwrap().unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while pooled.client().open_connections() > 1 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            pooled.client().open_connections(),
            1,
            "evicted down to min_connections"
        );
    })
    .await;
}

struct AddToken;

#[async_trait]
impl Interceptor for AddToken {
    async fn call(&self, mut req: RpcRequest, next: Next<'_>) -> Result<RpcResponse, RpcError> {
        req.metadata_mut().insert("token", "open sesame");
        next.run(req).await
    }
}

struct RequireToken(Arc<std::sync::atomic::AtomicU64>);

#[async_trait]
impl Interceptor for RequireToken {
    async fn call(&self, req: RpcRequest, next: Next<'_>) -> Result<RpcResponse, RpcError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if req.metadata().get("token") != Some("open sesame") {
            return Err(RpcError::Unauthenticated("missing or wrong token".into()));
        }
        next.run(req).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_and_server_interceptors_wrap_every_call() {
    bounded(30, async {
        let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let imp = Arc::new(CalcImpl::default());
        let server = Server::builder()
            .config(server_config(Dispatch::Pool, QueueKind::Transfer))
            .service(CalcServer::new(imp))
            .interceptor(RequireToken(seen.clone()))
            .start()
            .await
            .unwrap();
        let plain = CalcClient::new(
            Client::builder()
                .addr(server.local_addr().to_string())
                .build()
                .await
                .unwrap(),
        );
        assert!(matches!(
            plain.add(1, 2).await,
            Err(RpcError::Unauthenticated(_))
        ));
        let with_token = CalcClient::new(
            Client::builder()
                .addr(server.local_addr().to_string())
                .interceptor(AddToken)
                .build()
                .await
                .unwrap(),
        );
        assert_eq!(with_token.add(1, 2).await.unwrap(), 3);
        let explicit =
            plain.with_options(CallOptions::default().with_metadata("token", "open sesame"));
        assert_eq!(explicit.add(2, 2).await.unwrap(), 4);
        assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 3);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_a_clear_error_at_build() {
    bounded(10, async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let err = Client::builder()
            .addr(addr.to_string())
            .build()
            .await
            .err()
            .unwrap();
        assert!(matches!(err, RpcError::Connect { .. }), "{err:?}");
        assert!(err.to_string().contains(&addr.to_string()));
        // lazy_connect defers the error to the first call.
        let lazy = Client::builder()
            .addr(addr.to_string())
            .lazy_connect(true)
            .build()
            .await
            .unwrap();
        assert!(CalcClient::new(lazy)
            .add(1, 1)
            .await
            .unwrap_err()
            .is_transport());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_requests_and_answers_are_errors_not_hangs() {
    bounded(30, async {
        let mut config = server_config(Dispatch::Direct, QueueKind::Transfer);
        config.transport.max_frame_size = 64 * 1024;
        let (server, _) = start(config).await;
        let calc = client(server.local_addr(), ConnectType::Fixed, WriteMode::Async).await;
        // The client's own limit is 16 MiB, the server's 64 KiB: the server answers the
        // request `FrameTooLarge` from its header and skips its bytes; the call fails
        // fast and the connection goes on.
        let started = Instant::now();
        let err = calc.echo(vec![7u8; 100 * 1024]).await.unwrap_err();
        assert!(
            matches!(err, RpcError::FrameTooLarge { max: 65536, .. }),
            "{err:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(4));
        assert_eq!(calc.add(1, 2).await.unwrap(), 3, "same connection");
        assert_eq!(
            server.stats().accepted_connections,
            3,
            "no reconnect: the 3 connections made at build"
        );

        // A client with a small limit refuses to send an oversize request.
        let small = CalcClient::new(
            Client::builder()
                .config(brisk::ClientConfig {
                    addr: server.local_addr().to_string(),
                    transport: brisk::transport::TransportConfig {
                        max_frame_size: 1024,
                        ..Default::default()
                    },
                    ..Default::default()
                })
                .build()
                .await
                .unwrap(),
        );
        assert!(matches!(
            small.echo(vec![0u8; 4096]).await.unwrap_err(),
            RpcError::FrameTooLarge { max: 1024, .. }
        ));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_and_in_flight_limits_hold() {
    bounded(30, async {
        // max_connections: a second connection is closed on accept.
        let mut config = server_config(Dispatch::Direct, QueueKind::Transfer);
        config.max_connections = 1;
        let (server, _) = start(config).await;
        let first = Client::builder()
            .addr(server.local_addr().to_string())
            .connect(Connect::fixed(1))
            .build()
            .await
            .unwrap();
        let mut second = TcpStream::connect(server.local_addr()).await.unwrap();
        assert!(closed_by_server(&mut second, Duration::from_secs(5)).await);
        assert_eq!(server.stats().refused_connections, 1);
        assert_eq!(CalcClient::new(first).add(1, 1).await.unwrap(), 2);
        server.shutdown().await;

        // max_in_flight_per_connection: the server stops reading at the limit (no
        // errors), so only two calls of the connection run at once.
        let mut config = server_config(Dispatch::Pool, QueueKind::Transfer);
        config.max_in_flight_per_connection = 2;
        let (server, imp) = start(config).await;
        let calc = CalcClient::new(
            Client::builder()
                .addr(server.local_addr().to_string())
                .connect(Connect::fixed(1))
                .build()
                .await
                .unwrap(),
        );
        let mut calls = Vec::new();
        for i in 0..5u64 {
            let c = calc.clone();
            calls.push(tokio::spawn(async move { c.wait_gate(i).await }));
        }
        let gate = imp.gate.clone();
        let (two, three) = tokio::task::spawn_blocking(move || {
            (
                gate.wait_entered(2, Duration::from_secs(5)),
                gate.wait_entered(3, Duration::from_millis(300)),
            )
        })
        .await
        .unwrap();
        assert!(two, "two calls run");
        assert!(!three, "a third does not start while two are in flight");
        imp.gate.open();
        for (i, c) in calls.into_iter().enumerate() {
            assert_eq!(c.await.unwrap().unwrap(), i as u64);
        }
    })
    .await;
}

/// A direct-dispatch server that logs each call's peer address (its
/// connection, seen from the server).
async fn peer_logged_server() -> (
    brisk::ServerHandle,
    Arc<parking_lot::Mutex<Vec<std::net::SocketAddr>>>,
) {
    let peers = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let server = Server::builder()
        .config(server_config(Dispatch::Direct, QueueKind::Transfer))
        .service(CalcServer::new(Arc::new(CalcImpl::default())))
        .interceptor(PeerLog(peers.clone()))
        .start()
        .await
        .unwrap();
    (server, peers)
}

/// A client of 4 fixed connections to `addr`, `coalesce` calls per write.
async fn fixed_calc(addr: std::net::SocketAddr, coalesce: usize) -> CalcClient {
    CalcClient::new(
        Client::builder()
            .addr(addr.to_string())
            .connect(Connect::Fixed {
                connections: 4,
                coalesce_calls: coalesce,
            })
            .build()
            .await
            .expect("client connects"),
    )
}

// Single-threaded on purpose: the writer tasks cannot run until the test task
// yields, so calls started in one poll are deterministically "made together".
#[tokio::test]
async fn fixed_connections_share_a_write_among_calls_made_together() {
    bounded(30, async {
        let (server, peers) = peer_logged_server().await;
        let calc = |coalesce: usize| fixed_calc(server.local_addr(), coalesce);
        let burst = |calc: CalcClient, n: i64| async move {
            let calls = (0..n).map(|i| {
                let calc = calc.clone();
                async move { calc.add(i, 1).await }
            });
            let answers = futures::future::join_all(calls).await;
            for (i, a) in answers.into_iter().enumerate() {
                assert_eq!(a.unwrap(), i as i64 + 1, "every call answered correctly");
            }
        };
        let take = || std::mem::take(&mut *peers.lock());

        // The default: a burst of 8 calls goes out on one connection.
        burst(calc(16).await, 8).await;
        assert_eq!(calls_per_connection(&take()), vec![8]);

        // The cap moves a burst on: 8 calls at 3 per batch use 3 connections.
        burst(calc(3).await, 8).await;
        assert_eq!(calls_per_connection(&take()), vec![3, 3, 2]);

        // 1 is strict round-robin per call.
        burst(calc(1).await, 8).await;
        assert_eq!(calls_per_connection(&take()), vec![2, 2, 2, 2]);

        // Calls that do not overlap stay on one connection with the default
        // (a lone caller: both sides' busy poll sees every call)...
        let calc16 = calc(16).await;
        for i in 0..8 {
            assert_eq!(calc16.add(i, 1).await.unwrap(), i + 1);
        }
        assert_eq!(calls_per_connection(&take()), vec![8]);
        // ...and go round-robin with strict round-robin.
        let calc1 = calc(1).await;
        for i in 0..8 {
            assert_eq!(calc1.add(i, 1).await.unwrap(), i + 1);
        }
        assert_eq!(calls_per_connection(&take()), vec![2, 2, 2, 2]);
    })
    .await;
}

/// A light load — a few callers whose calls overlap but are not made
/// together — stays on one of the fixed connections, where both sides' busy
/// polls see its calls; a heavier one spreads over them.
#[tokio::test]
async fn fixed_connections_keep_a_light_load_on_one_and_spread_a_heavier_one() {
    bounded(30, async {
        let (server, peers) = peer_logged_server().await;
        let calc = fixed_calc(server.local_addr(), Connect::DEFAULT_COALESCE_CALLS).await;
        // `callers` callers, each starting 2 ms after the one before (so
        // their first calls are not made together) and making `calls` calls
        // of 50 ms one after another: the calls overlap.
        let run = |callers: u64, calls: u64| {
            let calc = calc.clone();
            async move {
                let each = (0..callers).map(|k| {
                    let calc = calc.clone();
                    async move {
                        tokio::time::sleep(Duration::from_millis(2 * k)).await;
                        for _ in 0..calls {
                            assert_eq!(calc.sleep_ms(50).await.unwrap(), 50);
                        }
                    }
                });
                futures::future::join_all(each).await;
            }
        };
        let take = || std::mem::take(&mut *peers.lock());

        // Three callers: never 4 calls in flight, every call on one connection.
        run(3, 4).await;
        assert_eq!(calls_per_connection(&take()), vec![12]);

        // Six: from the fifth caller's first call on, 4 are in flight, and
        // calls move on round-robin.
        run(6, 2).await;
        let spread = calls_per_connection(&take());
        assert_eq!(spread.iter().sum::<usize>(), 12, "every call made");
        assert!(spread.len() > 1, "a heavier load spreads: {spread:?}");
    })
    .await;
}

/// A lone caller that comes back at once is busy-polled for with direct
/// dispatch, and only there: not with pool dispatch, not when turned off.
/// With pool dispatch its answers are written by the workers instead, on the
/// socket the waiting connection lends them.
/// Every call is answered either way, also after pauses longer than the
/// poll (the connection parks again and is woken as usual). On a runtime
/// with one worker (this test's) and, below, with two.
#[tokio::test]
async fn a_lone_caller_is_busy_polled_for_with_direct_dispatch_only_and_always_answered() {
    lone_caller_busy_polled().await;
}

/// With two runtime workers the poll reads the socket itself (`read_now`):
/// the worker blocked in `epoll_wait` is not the one that must see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_caller_is_busy_polled_for_on_a_runtime_with_two_workers() {
    lone_caller_busy_polled().await;
}

async fn lone_caller_busy_polled() {
    bounded(120, async {
        // The longest poll allowed: a loaded test machine still comes back
        // within it.
        for busy_poll in [Duration::from_millis(1), Duration::ZERO] {
            for (name, dispatch, queue) in dispatch_variants() {
                let polled = !busy_poll.is_zero() && dispatch != Dispatch::Pool;
                until_the_poll_reads(name, polled, || async move {
                    let mut config = server_config(dispatch, queue);
                    config.busy_poll = busy_poll;
                    let (server, _) = start(config).await;
                    let addr = server.local_addr();
                    // The caller on a runtime of its own, as in another process:
                    // the server's workers see only its socket.
                    on_a_runtime_of_its_own(async move {
                        let calc = client(addr, ConnectType::Fixed, WriteMode::Async).await;
                        for round in 0..3i64 {
                            for i in 0..300i64 {
                                assert_eq!(calc.add(round, i).await.unwrap(), round + i, "{name}");
                            }
                            // Longer than the poll: the connection parks.
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                    })
                    .await;
                    let stats = server.stats();
                    // A pooled connection waiting for its one call lends its
                    // socket: the worker writes the answer itself.
                    if dispatch == Dispatch::Pool {
                        assert!(stats.worker_writes > 0, "{name}: workers wrote answers");
                    } else {
                        assert_eq!(stats.worker_writes, 0, "{name}");
                    }
                    if polled {
                        assert!(
                            stats.busy_polled_frames > 0,
                            "{name}: a lone caller in rhythm is polled for"
                        );
                    } else {
                        assert_eq!(stats.busy_polled_frames, 0, "{name} {busy_poll:?}");
                    }
                    server.shutdown().await;
                    stats.busy_poll_reads
                })
                .await;
            }
        }
    })
    .await;
}

/// A graceful stop whose grace runs out is forced: a connection waiting on a
/// call that will not finish in time is closed then, and its caller learns
/// at once instead of when the handler returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_past_its_grace_closes_connections_still_waiting_on_calls() {
    bounded(60, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let mut config = server_config(dispatch, queue);
            config.shutdown_grace = Duration::from_millis(100);
            let (server, imp) = start(config).await;
            let calc = client(server.local_addr(), ConnectType::Fixed, WriteMode::Async).await;
            assert_eq!(calc.add(1, 1).await.unwrap(), 2, "{name}");
            let c = calc.clone();
            let slow = tokio::spawn(async move {
                let outcome = c.sleep_ms(30_000).await;
                (outcome, Instant::now())
            });
            assert!(
                wait_until(Duration::from_secs(10), || imp
                    .slept
                    .load(std::sync::atomic::Ordering::SeqCst)
                    == 1)
                .await,
                "{name}: the slow call is running"
            );
            let stopped = Instant::now();
            let report = server.shutdown().await;
            assert!(!report.drained, "{name}: the slow call outlived the grace");
            let (outcome, cut_off) = tokio::time::timeout(Duration::from_secs(5), slow)
                .await
                .unwrap_or_else(|_| panic!("{name}: the caller still waits after the forced stop"))
                .unwrap();
            // Forced at 0.1 s (measured: the caller knew 0.10 s after the stop
            // began); a connection that missed the news waited for its next
            // timer (0.9 s) or for the server to give up on it (2 s).
            let took = cut_off.duration_since(stopped);
            assert!(
                took < Duration::from_millis(600),
                "{name}: the caller learned {took:?} after the stop began"
            );
            let err = outcome.expect_err("the call was cut off");
            assert!(
                matches!(err, RpcError::ConnectionClosed { .. }),
                "{name}: {err:?}"
            );
        }
    })
    .await;
}

/// Pooled answers written by the workers on a lent socket arrive whole and
/// to the right caller, among many callers on one connection, with answers
/// large enough that the socket takes them in parts (the rest goes out first
/// when the connection takes its socket back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pooled_answers_written_by_workers_arrive_whole_with_large_answers_among_small() {
    bounded(120, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let (server, _) = start(server_config(dispatch, queue)).await;
            let client = Client::builder()
                .addr(server.local_addr().to_string())
                .connect(Connect::sized(ConnectType::Fixed, 1))
                .request_timeout(Duration::from_secs(30))
                .build()
                .await
                .expect("client connects");
            let calc = CalcClient::new(client);
            let callers: Vec<_> = (0..16u8)
                .map(|caller| {
                    let calc = calc.clone();
                    tokio::spawn(async move {
                        for round in 0..12usize {
                            let size =
                                [3, 1_000, 200_000, 3_000_000][(caller as usize + round) % 4];
                            let body = vec![caller ^ round as u8; size];
                            let back = calc
                                .blob(brisk::Payload::from(body.clone()))
                                .await
                                .unwrap_or_else(|e| panic!("caller {caller} round {round}: {e}"))
                                .into_bytes();
                            assert!(
                                back == body,
                                "caller {caller} round {round}: another answer"
                            );
                            assert_eq!(
                                calc.add(caller as i64, round as i64).await.unwrap(),
                                (caller as usize + round) as i64
                            );
                        }
                    })
                })
                .collect();
            for caller in callers {
                caller
                    .await
                    .expect("every answer arrived whole, to its caller");
            }
            let stats = server.stats();
            assert_eq!(stats.errors, 0, "{name}");
            if dispatch == Dispatch::Pool {
                assert!(stats.worker_writes > 0, "{name}: workers wrote answers");
            }
            server.shutdown().await;
        }
    })
    .await;
}
