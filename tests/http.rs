//! The HTTP/JSON protocol through a real HTTP client (hyper): every status code,
//! a large body, keep-alive reuse, concurrent calls, and `/metrics` checked
//! against the calls made.

#![cfg(feature = "http")]

mod common;

use std::time::Duration;

use brisk::{Dispatch, DispatchConfig, PoolConfig, QueueKind};
use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// One keep-alive HTTP/1.1 connection.
async fn connect(addr: std::net::SocketAddr) -> SendRequest<Full<Bytes>> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

async fn send(
    sender: &mut SendRequest<Full<Bytes>>,
    method: &str,
    path: &str,
    body: impl Into<Bytes>,
    headers: &[(&str, &str)],
) -> (StatusCode, String) {
    let (status, _, body) = send_bytes(sender, method, path, body.into(), headers).await;
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn with_http(dispatch: Dispatch, queue: QueueKind) -> brisk::ServerConfig {
    server_config(dispatch, queue).with_http_addr("127.0.0.1:0")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_calls_and_every_status_code() {
    bounded(30, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let mut config = with_http(dispatch, queue);
            config.transport.max_frame_size = 256 * 1024;
            let (server, _) = start(config).await;
            let mut http = connect(server.http_addr().unwrap()).await;

            assert_eq!(
                send(&mut http, "POST", "/Calc/add", "[2, 40]", &[]).await,
                (StatusCode::OK, "42".into()),
                "{name}"
            );
            assert_eq!(
                send(&mut http, "POST", "/Calc/calls", "", &[]).await.0,
                StatusCode::OK
            );
            assert_eq!(
                send(&mut http, "POST", "/Calc/calls", "[]", &[]).await.0,
                StatusCode::OK
            );

            let (s, b) = send(&mut http, "POST", "/Calc/add", "[1,", &[]).await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{name}: {b}");
            assert!(b.contains("bad_request"), "{b}");
            let (s, _) = send(&mut http, "POST", "/Calc/add", r#"["a", "b"]"#, &[]).await;
            assert_eq!(s, StatusCode::BAD_REQUEST);
            let (s, b) = send(&mut http, "POST", "/Nope/add", "[]", &[]).await;
            assert_eq!(s, StatusCode::NOT_FOUND);
            assert!(b.contains("unknown_service"), "{b}");
            let (s, b) = send(&mut http, "POST", "/Calc/nope", "[]", &[]).await;
            assert_eq!(s, StatusCode::NOT_FOUND);
            assert!(b.contains("unknown_method"), "{b}");
            let (s, b) = send(&mut http, "POST", "/Calc/fail", r#"["kaput"]"#, &[]).await;
            assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR);
            assert!(b.contains("kaput"), "{b}");
            let (s, _) = send(
                &mut http,
                "POST",
                "/Calc/sleep_ms",
                "[2000]",
                &[("x-brisk-timeout-ms", "50")],
            )
            .await;
            assert_eq!(s, StatusCode::GATEWAY_TIMEOUT, "{name}");
            let (s, _) = send(&mut http, "GET", "/Calc/add", "", &[]).await;
            assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);

            // Large bodies: under the limit they echo, over it they are 413.
            let data: Vec<u8> = (0..40_000u32).map(|i| (i % 256) as u8).collect();
            let body = serde_json::to_string(&(data.clone(),)).unwrap();
            let (s, b) = send(&mut http, "POST", "/Calc/echo", body, &[]).await;
            assert_eq!(s, StatusCode::OK, "{name}");
            assert_eq!(serde_json::from_str::<Vec<u8>>(&b).unwrap(), data);
            let huge = format!("[[{}]]", vec!["1"; 200_000].join(","));
            let (s, _) = send(&mut http, "POST", "/Calc/echo", huge, &[]).await;
            assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{name}");
            // The server cannot drain an oversize body, so it closes that connection.
            let mut http = connect(server.http_addr().unwrap()).await;

            let (s, b) = send(&mut http, "GET", "/health", "", &[]).await;
            assert_eq!((s, b.as_str()), (StatusCode::OK, r#"{"status":"ok"}"#));
            server.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pool_is_503() {
    bounded(30, async {
        let mut config = with_http(Dispatch::Pool, QueueKind::Blocking);
        config.dispatch = DispatchConfig::Pool(PoolConfig {
            core_threads: 1,
            max_threads: 1,
            queue_size: 1,
            queue: QueueKind::Blocking,
            ..PoolConfig::default()
        });
        let (server, imp) = start(config).await;
        let addr = server.http_addr().unwrap();
        let spawn_call = |i: u64| {
            tokio::spawn(async move {
                let mut c = connect(addr).await;
                send(&mut c, "POST", "/Calc/wait_gate", format!("[{i}]"), &[]).await
            })
        };
        // The first call must be running before the second is sent, or the second
        // could find the first still in the one-slot queue and be refused itself.
        let mut blocked = vec![spawn_call(0)];
        let gate = imp.gate.clone();
        assert!(
            tokio::task::spawn_blocking(move || gate.wait_entered(1, Duration::from_secs(5)))
                .await
                .unwrap()
        );
        blocked.push(spawn_call(1));
        // One running, one queued (wait until the pool holds it), the next is refused.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while server.pool_stats().unwrap().queued < 1 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut c = connect(addr).await;
        let (s, b) = send(&mut c, "POST", "/Calc/wait_gate", "[9]", &[]).await;
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{b}");
        assert!(b.contains("server_busy"), "{b}");
        imp.gate.open();
        for b in blocked {
            assert_eq!(b.await.unwrap().0, StatusCode::OK);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_reuses_one_connection_and_concurrent_calls_work() {
    bounded(30, async {
        let (server, _) = start(with_http(Dispatch::Pool, QueueKind::Transfer)).await;
        let addr = server.http_addr().unwrap();
        // 50 calls over one keep-alive connection.
        let mut http = connect(addr).await;
        for i in 0..50 {
            let (s, b) = send(&mut http, "POST", "/Calc/add", format!("[{i}, 1]"), &[]).await;
            assert_eq!((s, b), (StatusCode::OK, (i + 1).to_string()));
        }
        // 8 connections × 25 calls concurrently.
        let mut tasks = Vec::new();
        for t in 0..8i64 {
            tasks.push(tokio::spawn(async move {
                let mut c = connect(addr).await;
                for i in 0..25i64 {
                    let (s, b) =
                        send(&mut c, "POST", "/Calc/add", format!("[{t}, {i}]"), &[]).await;
                    assert_eq!(s, StatusCode::OK);
                    assert_eq!(b, (t + i).to_string());
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        // Metrics: 250 successful adds, 1 failing call, bytes counted.
        let mut http = connect(addr).await;
        let (s, _) = send(&mut http, "POST", "/Calc/fail", r#"["x"]"#, &[]).await;
        assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR);
        let (s, text) = send(&mut http, "GET", "/metrics", "", &[]).await;
        assert_eq!(s, StatusCode::OK);
        let metric = |name: &str| -> f64 {
            text.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("metric {name} missing in:\n{text}"))
        };
        assert_eq!(
            metric(r#"brisk_calls_total{service="Calc",method="add"}"#),
            250.0
        );
        assert_eq!(
            metric(r#"brisk_call_errors_total{service="Calc",method="add"}"#),
            0.0
        );
        assert_eq!(
            metric(r#"brisk_calls_total{service="Calc",method="fail"}"#),
            1.0
        );
        assert_eq!(
            metric(r#"brisk_call_errors_total{service="Calc",method="fail"}"#),
            1.0
        );
        assert_eq!(
            metric(r#"brisk_call_duration_seconds_count{service="Calc",method="add"}"#),
            250.0
        );
        assert!(metric("brisk_bytes_in_total") > 0.0);
        assert!(metric("brisk_pool_threads") >= 1.0);
        assert!(text.contains("brisk_pool_queue_depth"));
        assert!(text.contains("brisk_pool_waiting_calls"));
        assert!(text.contains("brisk_open_connections"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_calls_show_up_in_metrics_too() {
    bounded(30, async {
        let (server, _) = start(with_http(Dispatch::Direct, QueueKind::Transfer)).await;
        let calc = CalcClient::new(
            brisk::Client::builder()
                .addr(server.local_addr().to_string())
                .build()
                .await
                .unwrap(),
        );
        for i in 0..10 {
            calc.add(i, i).await.unwrap();
        }
        let m = server.metrics().method("Calc", "add").unwrap();
        assert_eq!(m.calls(), 10);
        assert!(server.metrics().io.bytes_in() > 0 && server.metrics().io.bytes_out() > 0);
        assert!(server
            .metrics_text()
            .contains(r#"brisk_calls_total{service="Calc",method="add"} 10"#));
    })
    .await;
}

/// A request; the answer's status, headers and body.
async fn send_bytes(
    sender: &mut SendRequest<Full<Bytes>>,
    method: &str,
    path: &str,
    body: Bytes,
    headers: &[(&str, &str)],
) -> (StatusCode, hyper::HeaderMap, Bytes) {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    sender.ready().await.unwrap();
    let resp = sender
        .send_request(req.body(Full::new(body)).unwrap())
        .await
        .unwrap();
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, body)
}

#[cfg(all(feature = "gzip", feature = "zstd"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_encoding_and_accept_encoding() {
    use brisk::codec::compression::{decompress, BodyCompressor};
    use brisk::rpc_core::Compression;
    bounded(30, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let (server, _) = start(with_http(dispatch, queue)).await;
            let mut http = connect(server.http_addr().unwrap()).await;
            // `echo` of 3000 small numbers: 6 KB of JSON each way, very compressible.
            let numbers = vec![7u8; 3000];
            let json = serde_json::to_vec(&(numbers.clone(),)).unwrap();
            let (gzipped, used) =
                BodyCompressor::new(Compression::Gzip, 0, 6).compress(Bytes::from(json.clone()));
            assert_eq!(used, Compression::Gzip);

            for (accept, expect) in [
                ("gzip", Compression::Gzip),
                ("gzip, deflate, br, zstd", Compression::Zstd),
            ] {
                let (status, headers, body) = send_bytes(
                    &mut http,
                    "POST",
                    "/Calc/echo",
                    gzipped.clone(),
                    &[("content-encoding", "gzip"), ("accept-encoding", accept)],
                )
                .await;
                assert_eq!(status, StatusCode::OK, "{name}");
                assert_eq!(
                    headers.get("content-encoding").unwrap(),
                    expect.name(),
                    "{name}"
                );
                assert_eq!(headers.get("vary").unwrap(), "accept-encoding");
                assert!(body.len() < 1000, "{name}: {} bytes", body.len());
                let opened = decompress(expect, &body, 1 << 20).unwrap();
                let back: Vec<u8> = serde_json::from_slice(&opened).unwrap();
                assert_eq!(back, numbers, "{name}");
            }

            // No Accept-Encoding: plain. A small answer: plain, whatever is accepted.
            let (status, headers, body) = send_bytes(
                &mut http,
                "POST",
                "/Calc/echo",
                Bytes::from(json.clone()),
                &[],
            )
            .await;
            assert_eq!(status, StatusCode::OK);
            assert!(headers.get("content-encoding").is_none());
            assert_eq!(serde_json::from_slice::<Vec<u8>>(&body).unwrap(), numbers);
            let (status, headers, body) = send_bytes(
                &mut http,
                "POST",
                "/Calc/add",
                Bytes::from_static(b"[1, 2]"),
                &[("accept-encoding", "gzip")],
            )
            .await;
            assert_eq!((status, &body[..]), (StatusCode::OK, &b"3"[..]));
            assert!(headers.get("content-encoding").is_none());

            // An encoding not served, and a body that is not what it says: 400
            // naming the problem; the connection goes on.
            let (status, _, body) = send_bytes(
                &mut http,
                "POST",
                "/Calc/echo",
                Bytes::from(json.clone()),
                &[("content-encoding", "br")],
            )
            .await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{name}");
            let text = String::from_utf8_lossy(&body);
            assert!(text.contains("identity, gzip, zstd"), "{name}: {text}");
            let (status, _, body) = send_bytes(
                &mut http,
                "POST",
                "/Calc/echo",
                Bytes::from(json.clone()),
                &[("content-encoding", "zstd")],
            )
            .await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{name}");
            assert!(
                String::from_utf8_lossy(&body).contains("zstd body"),
                "{name}"
            );
            assert_eq!(
                send(&mut http, "POST", "/Calc/add", "[2, 40]", &[]).await,
                (StatusCode::OK, "42".into())
            );
            server.shutdown().await;
        }
    })
    .await;
}
