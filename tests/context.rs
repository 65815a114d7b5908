//! Handlers see their call: deadlines enforced on every dispatch path,
//! cancellation reaching the server, a nested call inheriting its parent's
//! deadline, trace metadata and cancellation, metadata both ways — on the
//! binary protocol and on HTTP/JSON.
//!
//! Timings are bounds with a margin for a loaded 2-core machine, never
//! speed targets: "answered within the deadline plus a margin", "noticed
//! within 50 ms".

use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brisk::codec::{Code, FrameCodec, OutFrame};
use brisk::{
    CallOptions, Client, Context, Dispatch, Metadata, RpcError, RpcRequest, Server, ServerHandle,
    Status,
};
use bytes::BytesMut;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::codec::Decoder;

/// A slow service whose handlers report what they saw of their call.
#[brisk::service]
pub trait Slow {
    /// Sleeps `ms` on the runtime; returns `ms`.
    async fn sleep(&self, cx: &Context, ms: u64) -> Result<u64, Status>;
    /// Blocks its thread for up to `ms`, checking for cancellation each millisecond.
    async fn block(&self, cx: &Context, ms: u64) -> Result<u64, Status>;
    /// Returns metadata `k` and sends it back as answer metadata `echo-k`.
    async fn meta(&self, cx: &Context) -> Result<String, Status>;
    /// Named like `Drop`'s method (the generated server calls the trait's).
    async fn drop(&self, cx: &Context) -> Result<u32, Status>;
    /// Cancels its own context (to stop work it started) and answers anyway.
    async fn self_cancel(&self, cx: &Context) -> Result<u32, Status>;
    /// Arguments named like the generated code's own locals.
    async fn shadow(
        &self,
        context: &Context,
        cx: u32,
        body: String,
        serializer: u8,
        out: bool,
    ) -> Result<String, Status>;
}

/// What the handlers saw.
#[derive(Default)]
struct Probe {
    /// Handlers started.
    started: AtomicUsize,
    /// Handlers running now (their futures not yet dropped).
    running: AtomicUsize,
    /// When each cancellation was noticed.
    cancelled: Mutex<Vec<Instant>>,
    /// `cx.remaining()` and the metadata at each handler's start.
    seen: Mutex<Vec<(Option<Duration>, Metadata)>>,
}

impl Probe {
    fn cancellations(&self) -> usize {
        self.cancelled.lock().len()
    }
}

/// Counts a handler running until it is dropped (answered, or its future dropped).
struct Running(Arc<Probe>);

impl Running {
    fn enter(probe: &Arc<Probe>, cx: &Context) -> Running {
        probe.started.fetch_add(1, Ordering::SeqCst);
        probe.running.fetch_add(1, Ordering::SeqCst);
        probe
            .seen
            .lock()
            .push((cx.remaining(), cx.metadata().clone()));
        Running(probe.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

struct SlowImpl(Arc<Probe>);

impl Slow for SlowImpl {
    async fn sleep(&self, cx: &Context, ms: u64) -> Result<u64, Status> {
        let _running = Running::enter(&self.0, cx);
        // Work the handler hands off sees the cancellation through a copy of
        // its context (bounded: it gives up after the sleep would have ended).
        let watch = cx.clone();
        let probe = self.0.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = watch.cancelled() => probe.cancelled.lock().push(Instant::now()),
                _ = tokio::time::sleep(Duration::from_millis(ms + 1000)) => {}
            }
        });
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(ms)
    }

    async fn block(&self, cx: &Context, ms: u64) -> Result<u64, Status> {
        let _running = Running::enter(&self.0, cx);
        let end = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < end {
            if cx.is_cancelled() {
                self.0.cancelled.lock().push(Instant::now());
                return Err(Status::new(Code::Cancelled, "stopped early"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(ms)
    }

    async fn meta(&self, cx: &Context) -> Result<String, Status> {
        let _running = Running::enter(&self.0, cx);
        let value = cx.metadata().get("k").unwrap_or_default().to_owned();
        cx.set_reply_metadata("echo-k", value.clone());
        Ok(value)
    }

    async fn drop(&self, _cx: &Context) -> Result<u32, Status> {
        Ok(2)
    }

    async fn self_cancel(&self, cx: &Context) -> Result<u32, Status> {
        // Pending once, so that a direct call is live on its connection.
        tokio::time::sleep(Duration::from_millis(1)).await;
        cx.cancel();
        assert!(cx.is_cancelled());
        // And awaits after it (waiting for what it stopped, say): the server
        // must not drop it for that.
        tokio::time::sleep(Duration::from_millis(5)).await;
        Ok(3)
    }

    async fn shadow(
        &self,
        context: &Context,
        cx: u32,
        body: String,
        serializer: u8,
        out: bool,
    ) -> Result<String, Status> {
        Ok(format!(
            "{} {cx} {body} {serializer} {out}",
            context.request_id() > 0
        ))
    }
}

/// Calls `Slow` on behalf of its own caller.
#[brisk::service]
pub trait Front {
    /// Calls `Slow.sleep(ms)` with this call's context.
    async fn relay(&self, cx: &Context, ms: u64) -> Result<u64, Status>;
}

struct FrontImpl(SlowClient);

impl Front for FrontImpl {
    async fn relay(&self, cx: &Context, ms: u64) -> Result<u64, Status> {
        Ok(self.0.with_context(cx).sleep(ms).await?)
    }
}

/// One test at a time: their bounds are in tens of milliseconds, and the
/// tests of this file would otherwise share two cores with each other.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs a test body with a hard upper bound so nothing can hang CI.
async fn bounded<F: std::future::Future<Output = ()>>(secs: u64, f: F) {
    let _alone = SERIAL.lock().await;
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .expect("test exceeded its time bound");
}

/// Polls `cond` every 2 ms until it holds or `within` passes.
async fn wait_until(within: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    cond()
}

async fn slow_server(dispatch: Dispatch, http: bool) -> (ServerHandle, Arc<Probe>) {
    let probe = Arc::new(Probe::default());
    let mut builder = Server::builder()
        .addr("127.0.0.1:0")
        .dispatch(dispatch)
        .service(SlowServer::new(SlowImpl(probe.clone())));
    if http {
        builder = builder.http_addr("127.0.0.1:0");
    }
    (builder.start().await.unwrap(), probe)
}

async fn client_of(server: &ServerHandle, timeout: Duration) -> Client {
    Client::builder()
        .addr(server.local_addr().to_string())
        .request_timeout(timeout)
        .build()
        .await
        .unwrap()
}

/// Sends `Slow.{method}(ms)` on a raw connection with `timeout_ms` in its
/// header (the caller here waits much longer) and returns the answer's code
/// and when it came.
async fn raw_call(
    server: &ServerHandle,
    method: &'static str,
    ms: u64,
    timeout_ms: u32,
) -> (Code, Duration) {
    let mut raw = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    let body =
        brisk::codec::BodyCodec::encode_body(brisk::SerializerKind::MsgPack, &(ms,)).unwrap();
    let mut frame = OutFrame::request(1, brisk::SerializerKind::MsgPack.id(), "Slow", method, body);
    frame.timeout_ms = timeout_ms;
    let mut out = BytesMut::new();
    frame.encode(&mut out, 1 << 20).unwrap();
    let sent = Instant::now();
    raw.write_all(&out).await.unwrap();
    let mut codec = FrameCodec::new(1 << 20);
    let mut buf = BytesMut::new();
    loop {
        if let Some(frame) = codec.decode(&mut buf).unwrap() {
            assert_eq!(frame.header.request_id, 1);
            return (frame.code(), sent.elapsed());
        }
        let n = tokio::time::timeout(Duration::from_secs(5), raw.read_buf(&mut buf))
            .await
            .expect("no answer within 5 s")
            .unwrap();
        assert!(n > 0, "the server closed the connection");
    }
}

const DEADLINE: Duration = Duration::from_millis(150);
/// What a loaded machine (CI runs the suites beside each other) may add to a
/// deadline or a cancellation before it is seen. Generous on purpose: the
/// handlers these tests stop sleep 3 s or more, so a bound of a second still
/// tells "stopped at the deadline" from "ran to its end"; speed is measured by
/// the benchmarks, not here.
const MARGIN: Duration = Duration::from_millis(1000);

async fn a_handler_past_its_deadline_is_answered_at_once(dispatch: Dispatch, method: &'static str) {
    let (server, probe) = slow_server(dispatch, false).await;
    let (code, after) = raw_call(&server, method, 3000, DEADLINE.as_millis() as u32).await;
    assert_eq!(code, Code::DeadlineExceeded, "{dispatch:?} {method}");
    assert!(
        after >= DEADLINE && after < DEADLINE + MARGIN,
        "{dispatch:?} {method}: answered after {after:?}"
    );
    assert!(
        wait_until(MARGIN, || probe.cancellations() == 1).await,
        "{dispatch:?} {method}: the handler saw its cancellation"
    );
    assert!(
        wait_until(MARGIN, || probe.running.load(Ordering::SeqCst) == 0).await,
        "{dispatch:?} {method}: the handler stopped"
    );
    assert_eq!(probe.started.load(Ordering::SeqCst), 1);
    if let Some(pool) = server.pool_stats() {
        assert!(
            wait_until(MARGIN, || server
                .pool_stats()
                .is_some_and(|p| p.active == 0))
            .await
        );
        assert_eq!(pool.queued, 0);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn direct_dispatch_answers_deadline_exceeded_and_drops_the_handler() {
    bounded(
        20,
        a_handler_past_its_deadline_is_answered_at_once(Dispatch::Direct, "sleep"),
    )
    .await;
}

#[tokio::test]
async fn pool_dispatch_answers_deadline_exceeded_and_drops_an_async_handler() {
    bounded(
        20,
        a_handler_past_its_deadline_is_answered_at_once(Dispatch::Pool, "sleep"),
    )
    .await;
}

#[tokio::test]
async fn pool_dispatch_answers_deadline_exceeded_while_a_blocking_handler_runs() {
    bounded(
        20,
        a_handler_past_its_deadline_is_answered_at_once(Dispatch::Pool, "block"),
    )
    .await;
}

#[tokio::test]
async fn a_call_whose_deadline_passed_in_the_queue_is_not_run() {
    bounded(20, async {
        let probe = Arc::new(Probe::default());
        // One worker, and no queue growth: the second call waits behind the first.
        let pool = brisk::PoolConfig {
            core_threads: 1,
            max_threads: 1,
            ..brisk::PoolConfig::default()
        };
        let server = Server::builder()
            .addr("127.0.0.1:0")
            .pool(pool)
            .service(SlowServer::new(SlowImpl(probe.clone())))
            .start()
            .await
            .unwrap();
        let first = tokio::spawn({
            let addr = server.local_addr();
            async move {
                let client = Client::builder()
                    .addr(addr.to_string())
                    .build()
                    .await
                    .unwrap();
                SlowClient::new(client).block(600).await
            }
        });
        assert!(
            wait_until(Duration::from_secs(2), || probe
                .started
                .load(Ordering::SeqCst)
                == 1)
            .await
        );
        let (code, _) = raw_call(&server, "block", 10, 100).await;
        assert_eq!(code, Code::DeadlineExceeded);
        assert_eq!(first.await.unwrap().unwrap(), 600);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            probe.started.load(Ordering::SeqCst),
            1,
            "the expired call never ran"
        );
        server.shutdown().await;
    })
    .await;
}

/// A blocking HTTP/1.1 request; returns the status line, the head and the body.
fn http_post(
    addr: std::net::SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_owned(), body.to_owned())
}

#[tokio::test]
async fn http_calls_get_the_deadline_and_the_metadata_through_the_context() {
    bounded(30, async {
        for (dispatch, method) in [
            (Dispatch::Direct, "sleep"),
            (Dispatch::Pool, "sleep"),
            (Dispatch::Pool, "block"),
        ] {
            let (server, probe) = slow_server(dispatch, true).await;
            let http = server.http_addr().unwrap();
            let path = format!("/Slow/{method}");
            let started = Instant::now();
            let (status, _, _) = tokio::task::spawn_blocking(move || {
                http_post(http, &path, &[("x-brisk-timeout-ms", "150")], "[3000]")
            })
            .await
            .unwrap();
            let after = started.elapsed();
            assert_eq!(status, 504, "{dispatch:?} {method}");
            assert!(
                after < DEADLINE + MARGIN,
                "{dispatch:?} {method}: 504 after {after:?}"
            );
            assert!(
                wait_until(MARGIN, || probe.cancellations() == 1).await,
                "{dispatch:?} {method}: the handler saw its cancellation"
            );
            assert!(wait_until(MARGIN, || probe.running.load(Ordering::SeqCst) == 0).await);
            let remaining = probe.seen.lock()[0].0.expect("a deadline");
            assert!(remaining <= DEADLINE, "{remaining:?}");

            let (status, head, body) = tokio::task::spawn_blocking(move || {
                http_post(http, "/Slow/meta", &[("x-brisk-meta-k", "from-http")], "[]")
            })
            .await
            .unwrap();
            assert_eq!(status, 200);
            assert_eq!(body, "\"from-http\"");
            assert!(
                head.to_ascii_lowercase()
                    .contains("x-brisk-meta-echo-k: from-http"),
                "answer metadata as a header: {head}"
            );
            server.shutdown().await;
        }
    })
    .await;
}

async fn a_dropped_call_is_cancelled_on_the_server(dispatch: Dispatch) {
    let (server, probe) = slow_server(dispatch, true).await;
    let client = client_of(&server, Duration::from_secs(10)).await;
    let slow = SlowClient::new(client.clone());
    let call = tokio::spawn(async move { slow.sleep(5000).await });
    assert!(
        wait_until(Duration::from_secs(2), || probe
            .started
            .load(Ordering::SeqCst)
            == 1)
        .await
    );
    let stats = client.endpoints();
    assert_eq!(stats.len(), 1);
    assert_eq!(stats[0].in_flight, 1, "the call in flight is counted");
    call.abort();
    let dropped = Instant::now();
    assert!(call.await.unwrap_err().is_cancelled());
    assert!(
        wait_until(Duration::from_secs(1), || probe.cancellations() == 1).await,
        "{dispatch:?}: the server never saw the cancellation"
    );
    let noticed = probe.cancelled.lock()[0].saturating_duration_since(dropped);
    assert!(noticed < MARGIN, "{dispatch:?}: noticed after {noticed:?}");
    assert!(wait_until(MARGIN, || probe.running.load(Ordering::SeqCst) == 0).await);
    assert!(
        server
            .metrics_text()
            .contains("brisk_calls_cancelled_total{service=\"Slow\",method=\"sleep\"} 1"),
        "{}",
        server.metrics_text()
    );
    assert!(client.endpoints().iter().all(|e| e.in_flight == 0));
    // The connection carries on.
    let slow = SlowClient::new(client);
    assert_eq!(slow.sleep(1).await.unwrap(), 1);
    server.shutdown().await;
}

#[tokio::test]
async fn a_dropped_call_is_cancelled_on_the_server_direct() {
    bounded(
        20,
        a_dropped_call_is_cancelled_on_the_server(Dispatch::Direct),
    )
    .await;
}

#[tokio::test]
async fn a_dropped_call_is_cancelled_on_the_server_pool() {
    bounded(
        20,
        a_dropped_call_is_cancelled_on_the_server(Dispatch::Pool),
    )
    .await;
}

#[tokio::test]
async fn a_blocking_pooled_handler_sees_its_callers_cancel() {
    bounded(20, async {
        let (server, probe) = slow_server(Dispatch::Pool, false).await;
        let client = client_of(&server, Duration::from_secs(10)).await;
        let slow = SlowClient::new(client.clone());
        let call = tokio::spawn(async move { slow.block(5000).await });
        assert!(
            wait_until(Duration::from_secs(2), || probe
                .started
                .load(Ordering::SeqCst)
                == 1)
            .await
        );
        call.abort();
        let dropped = Instant::now();
        let _ = call.await;
        assert!(wait_until(Duration::from_secs(1), || probe.cancellations() == 1).await);
        let noticed = probe.cancelled.lock()[0].saturating_duration_since(dropped);
        assert!(noticed < MARGIN, "noticed after {noticed:?}");
        assert!(
            wait_until(MARGIN, || server
                .pool_stats()
                .is_some_and(|p| p.active == 0))
            .await
        );
        // Its late answer was discarded; the connection carries on.
        assert_eq!(SlowClient::new(client).block(1).await.unwrap(), 1);
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_nested_call_inherits_the_deadline_and_trace_metadata_and_is_cancelled_with_its_parent() {
    bounded(30, async {
        for dispatch in [Dispatch::Direct, Dispatch::Pool] {
            let (back, probe) = slow_server(dispatch, false).await;
            let back_client = client_of(&back, Duration::from_secs(10)).await;
            let front = Server::builder()
                .addr("127.0.0.1:0")
                .dispatch(dispatch)
                .service(FrontServer::new(FrontImpl(SlowClient::new(
                    back_client.clone(),
                ))))
                .start()
                .await
                .unwrap();
            let client = client_of(&front, Duration::from_secs(10)).await;
            let options = CallOptions::timeout(Duration::from_millis(300))
                .with_metadata(
                    "traceparent",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                )
                .with_metadata("authorization", "Bearer not-for-downstream");

            // The parent's deadline reaches the nested call.
            let started = Instant::now();
            let err = FrontClient::new(client.clone())
                .with_options(options.clone())
                .relay(5000)
                .await
                .unwrap_err();
            assert!(err.code() == Code::DeadlineExceeded, "{dispatch:?}: {err}");
            assert!(started.elapsed() < Duration::from_millis(300) + MARGIN);
            let (remaining, metadata) = probe.seen.lock()[0].clone();
            let remaining = remaining.expect("the nested call has a deadline");
            assert!(
                remaining <= Duration::from_millis(300) && remaining > Duration::ZERO,
                "{dispatch:?}: nested remaining {remaining:?}"
            );
            assert_eq!(
                metadata.get("traceparent"),
                Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            );
            assert_eq!(
                metadata.get("authorization"),
                None,
                "credentials stay behind"
            );
            assert!(wait_until(MARGIN, || probe.cancellations() == 1).await);

            // Dropping the outer call cancels the nested one.
            let front_client = FrontClient::new(client.clone());
            let call = tokio::spawn(async move { front_client.relay(5000).await });
            assert!(
                wait_until(Duration::from_secs(2), || probe
                    .started
                    .load(Ordering::SeqCst)
                    == 2)
                .await
            );
            call.abort();
            let dropped = Instant::now();
            let _ = call.await;
            assert!(
                wait_until(Duration::from_secs(1), || probe.cancellations() == 2).await,
                "{dispatch:?}: the nested call was not cancelled"
            );
            let noticed = probe.cancelled.lock()[1].saturating_duration_since(dropped);
            assert!(noticed < MARGIN, "{dispatch:?}: after {noticed:?}");
            assert!(wait_until(MARGIN, || probe.running.load(Ordering::SeqCst) == 0).await);
            assert!(
                wait_until(MARGIN, || back_client
                    .endpoints()
                    .iter()
                    .all(|e| e.in_flight == 0))
                .await
            );
            assert!(client.endpoints().iter().all(|e| e.in_flight == 0));
            front.shutdown().await;
            back.shutdown().await;
        }
    })
    .await;
}

#[tokio::test]
async fn metadata_round_trips_through_the_context() {
    bounded(20, async {
        for dispatch in [Dispatch::Direct, Dispatch::Pool] {
            let (server, probe) = slow_server(dispatch, false).await;
            let client = client_of(&server, Duration::from_secs(5)).await;
            let typed = SlowClient::new(client.clone())
                .with_options(CallOptions::default().with_metadata("k", "v1"));
            assert_eq!(typed.meta().await.unwrap(), "v1");

            let no_args =
                brisk::codec::BodyCodec::encode_body(brisk::SerializerKind::MsgPack, &()).unwrap();
            let mut req = RpcRequest::new("Slow", "meta", brisk::SerializerKind::MsgPack, no_args);
            req.metadata_mut().insert("k", "v2");
            let answer = client.call_raw(req).await.unwrap();
            assert_eq!(answer.metadata.get("echo-k"), Some("v2"));
            assert_eq!(
                SlowClient::new(client.clone())
                    .shadow(7, "b".into(), 3, true)
                    .await
                    .unwrap(),
                "true 7 b 3 true",
                "argument names cannot shadow the generated code's"
            );
            assert_eq!(SlowClient::new(client.clone()).drop().await.unwrap(), 2);
            assert_eq!(
                SlowClient::new(client.clone()).self_cancel().await.unwrap(),
                3,
                "{dispatch:?}: a handler that cancels its own context is still answered"
            );
            assert_eq!(probe.seen.lock()[1].1.get("k"), Some("v2"));
            server.shutdown().await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_cancelled_parent_context_fails_the_call_cancelled() {
    bounded(20, async {
        let (server, probe) = slow_server(Dispatch::Direct, false).await;
        let client = client_of(&server, Duration::from_secs(10)).await;
        let parent = Context::new(1, brisk::SerializerKind::MsgPack);
        let slow = SlowClient::new(client.clone()).with_context(&parent);
        let call = tokio::spawn(async move { slow.sleep(5000).await });
        assert!(
            wait_until(Duration::from_secs(2), || probe
                .started
                .load(Ordering::SeqCst)
                == 1)
            .await
        );
        parent.cancel();
        let err = call.await.unwrap().unwrap_err();
        assert!(matches!(err, RpcError::Cancelled(_)), "{err}");
        assert!(wait_until(Duration::from_secs(1), || probe.cancellations() == 1).await);
        assert!(
            wait_until(MARGIN, || client
                .endpoints()
                .iter()
                .all(|e| e.in_flight == 0))
            .await
        );
        server.shutdown().await;
    })
    .await;
}
