//! tower on both sides. The client: brisk's `Client` as a `tower::Service`
//! and tower's layers acting on it — a timeout fires, a concurrency limit
//! with load shedding rejects, calls within the limits pass. The server:
//! `ServerBuilder::layer` in every dispatch mode — the same layers around the
//! handlers answer `ServerBusy` and `DeadlineExceeded`, and the connection
//! carries on.
#![cfg(feature = "tower")]

mod common;

use std::time::Duration;

use brisk::codec::BodyCodec;
use brisk::{Client, Dispatch, QueueKind, RpcError, RpcRequest, SerializerKind};
use brisk::{Code, Server};
use common::{bounded, dispatch_variants, server_config, start, CalcClient, CalcImpl, CalcServer};
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

fn request(method: &'static str, args: &impl serde::Serialize) -> RpcRequest {
    let body = SerializerKind::MsgPack
        .encode_body(args)
        .expect("arguments encode");
    RpcRequest::new("Calc", method, SerializerKind::MsgPack, body)
}

fn decode<T: serde::de::DeserializeOwned>(body: &bytes::Bytes) -> T {
    SerializerKind::MsgPack
        .decode_bytes(body)
        .expect("the answer decodes")
}

async fn client_of(server: &brisk::ServerHandle) -> Client {
    Client::builder()
        .addr(server.local_addr())
        .build()
        .await
        .expect("client connects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_is_a_tower_service() {
    bounded(30, async {
        let (server, _) = start(server_config(Dispatch::Direct, QueueKind::Transfer)).await;
        let mut svc = client_of(&server).await;
        // `Service::call`: the client's own `call` is the typed one.
        let ready = svc.ready().await.expect("ready");
        let answer = Service::call(ready, request("add", &(2i64, 40i64)))
            .await
            .expect("the call succeeds");
        assert_eq!(decode::<i64>(&answer.body), 42);
        // An error stays brisk's own, typed.
        let err = Service::call(&mut svc, request("no_such_method", &()))
            .await
            .expect_err("unknown method");
        assert!(matches!(err, RpcError::UnknownMethod { .. }), "{err:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_layer_fires_on_a_slow_call() {
    bounded(30, async {
        let (server, _) = start(server_config(Dispatch::Direct, QueueKind::Transfer)).await;
        let mut svc = ServiceBuilder::new()
            .timeout(Duration::from_millis(100))
            .service(client_of(&server).await);
        let err: BoxError = svc
            .ready()
            .await
            .expect("ready")
            .call(request("sleep_ms", &(2_000u64,)))
            .await
            .expect_err("the layer's timeout fires first");
        assert!(
            err.is::<tower::timeout::error::Elapsed>(),
            "tower's timeout: {err}"
        );
        // A fast call under the same layer passes.
        let answer = svc
            .ready()
            .await
            .expect("ready")
            .call(request("add", &(1i64, 1i64)))
            .await
            .expect("within the timeout");
        assert_eq!(decode::<i64>(&answer.body), 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_limit_with_load_shedding_rejects_past_the_limit() {
    bounded(30, async {
        let (server, _) = start(server_config(Dispatch::Direct, QueueKind::Transfer)).await;
        let layered = ServiceBuilder::new()
            .load_shed()
            .concurrency_limit(1)
            .service(client_of(&server).await);
        // One slow call holds the only slot...
        let mut first = layered.clone();
        let slow = first
            .ready()
            .await
            .expect("ready")
            .call(request("sleep_ms", &(500u64,)));
        let slow = tokio::spawn(slow);
        tokio::time::sleep(Duration::from_millis(50)).await;
        // ...so a second one is shed at once, not queued.
        let mut second = layered.clone();
        let err: BoxError = second
            .ready()
            .await
            .expect("load shedding is always ready")
            .call(request("add", &(1i64, 2i64)))
            .await
            .expect_err("over the limit");
        assert!(
            err.is::<tower::load_shed::error::Overloaded>(),
            "shed: {err}"
        );
        let answer = slow
            .await
            .expect("the task ran")
            .expect("the slow call ends");
        assert_eq!(decode::<u64>(&answer.body), 500);
        // Its slot is free again.
        let answer = second
            .ready()
            .await
            .expect("ready")
            .call(request("add", &(1i64, 2i64)))
            .await
            .expect("within the limit again");
        assert_eq!(decode::<i64>(&answer.body), 3);
    })
    .await;
}

/// A server of `Calc` with `layer` around its handlers.
async fn layered_server<L>(dispatch: Dispatch, queue: QueueKind, layer: L) -> brisk::ServerHandle
where
    L: tower::Layer<brisk::server::layers::LayeredService> + Send + 'static,
    L::Service: Service<RpcRequest, Response = brisk::RpcResponse> + Clone + Send + Sync + 'static,
    <L::Service as Service<RpcRequest>>::Error: Into<BoxError>,
    <L::Service as Service<RpcRequest>>::Future: Send + 'static,
{
    Server::builder()
        .config(server_config(dispatch, queue))
        .service(CalcServer::new(std::sync::Arc::new(CalcImpl::default())))
        .layer(layer)
        .start()
        .await
        .expect("server starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_concurrency_limit_sheds_calls_past_it_in_every_dispatch_mode() {
    bounded(60, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let server = layered_server(
                dispatch,
                queue,
                ServiceBuilder::new().load_shed().concurrency_limit(1),
            )
            .await;
            let calc = CalcClient::new(client_of(&server).await);
            // One slow call holds the server's only slot...
            let slow = tokio::spawn({
                let calc = calc.clone();
                async move { calc.sleep_ms(400).await }
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
            // ...so the next is refused at once, not queued, and not run.
            let err = calc.add(1, 2).await.expect_err("over the limit");
            assert_eq!(err.code(), Code::ServerBusy, "{name}: {err}");
            assert!(
                err.to_string().contains("shed by a server layer"),
                "{name}: {err}"
            );
            assert_eq!(
                slow.await.expect("task").expect("the slow call"),
                400,
                "{name}"
            );
            // The slot is free again and the connection is healthy.
            assert_eq!(calc.add(1, 2).await.expect("within the limit"), 3, "{name}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_timeout_layer_answers_deadline_exceeded_in_every_dispatch_mode() {
    bounded(60, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let server = layered_server(
                dispatch,
                queue,
                tower::timeout::TimeoutLayer::new(Duration::from_millis(100)),
            )
            .await;
            let calc = CalcClient::new(client_of(&server).await);
            let started = std::time::Instant::now();
            let err = calc.sleep_ms(3_000).await.expect_err("the layer's timeout");
            assert_eq!(err.code(), Code::DeadlineExceeded, "{name}: {err}");
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{name}: answered early"
            );
            // A handler's own error passes the layer unchanged.
            let err = calc
                .fail("mine".into())
                .await
                .expect_err("the handler's error");
            assert_eq!(err.code(), Code::Handler, "{name}: {err}");
            assert!(err.to_string().contains("mine"), "{name}: {err}");
            assert_eq!(
                calc.add(2, 2).await.expect("a fast call passes"),
                4,
                "{name}"
            );
        }
    })
    .await;
}
