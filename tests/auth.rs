//! Token authentication: `TokenAuth` on the server rejects calls without a
//! valid token — over the binary protocol and over HTTP (401) — and
//! `BearerToken` on the client makes them pass.

mod common;

use std::sync::Arc;
use std::time::Duration;

use brisk::{BearerToken, Client, Dispatch, QueueKind, RpcError, Server, TokenAuth};
use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

async fn auth_server(dispatch: Dispatch, queue: QueueKind) -> brisk::ServerHandle {
    Server::builder()
        .config(server_config(dispatch, queue).with_http_addr("127.0.0.1:0"))
        .interceptor(TokenAuth::new(["s3cret", "other-token"]))
        .service(CalcServer::new(Arc::new(CalcImpl::default())))
        .start()
        .await
        .expect("server starts")
}

async fn client(addr: std::net::SocketAddr, token: Option<&str>) -> CalcClient {
    let mut builder = Client::builder()
        .addr(addr.to_string())
        .request_timeout(Duration::from_secs(5));
    if let Some(token) = token {
        builder = builder.interceptor(BearerToken::new(token));
    }
    CalcClient::new(builder.build().await.expect("client connects"))
}

fn assert_unauthenticated(r: Result<i64, RpcError>) {
    match r {
        Err(RpcError::Unauthenticated(m)) => assert!(
            m.contains("missing or invalid token in metadata `authorization`"),
            "{m}"
        ),
        other => panic!("expected Unauthenticated, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_calls_need_a_valid_token() {
    bounded(30, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let server = auth_server(dispatch, queue).await;
            let addr = server.local_addr();
            assert_unauthenticated(client(addr, None).await.add(1, 2).await);
            assert_unauthenticated(client(addr, Some("wrong")).await.add(1, 2).await);
            assert_unauthenticated(client(addr, Some("s3cre")).await.add(1, 2).await);
            assert_eq!(
                client(addr, Some("s3cret")).await.add(1, 2).await.unwrap(),
                3
            );
            assert_eq!(
                client(addr, Some("other-token"))
                    .await
                    .add(2, 2)
                    .await
                    .unwrap(),
                4
            );
            // The raw `token` key works too.
            let plain = client(addr, None).await;
            let got = plain
                .with_options(brisk::CallOptions::default().with_metadata("token", "s3cret"))
                .add(3, 4)
                .await
                .unwrap();
            assert_eq!(got, 7);
            eprintln!("ok: {name}");
        }
    })
    .await;
}

async fn http_post(addr: std::net::SocketAddr, headers: &[(&str, &str)]) -> (StatusCode, String) {
    let stream = TcpStream::connect(addr).await.expect("HTTP connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("HTTP handshake");
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method("POST")
        .uri("/Calc/add")
        .header("host", "localhost");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = sender
        .send_request(req.body(Full::new(Bytes::from_static(b"[1, 2]"))).unwrap())
        .await
        .expect("HTTP response");
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_calls_need_a_valid_token() {
    bounded(30, async {
        let server = auth_server(Dispatch::Direct, QueueKind::Transfer).await;
        let http = server.http_addr().expect("HTTP listener");
        let (status, body) = http_post(http, &[]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert!(body.contains("missing or invalid token"), "{body}");
        let (status, _) = http_post(http, &[("x-brisk-meta-authorization", "Bearer nope")]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let (status, body) =
            http_post(http, &[("x-brisk-meta-authorization", "Bearer s3cret")]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body.trim(), "3");
    })
    .await;
}
