//! The builder's settings combine the same whatever their order, and a
//! server serves on a listener its caller bound.

use std::net::SocketAddr;
use std::time::Duration;

use rpc_core::Dispatch;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// A base config as a file would give it: direct dispatch turned to a pool
/// of its own, and limits of its own.
fn from_file() -> ServerConfig {
    let mut config = ServerConfig {
        max_connections: 7,
        shutdown_grace: Duration::from_millis(123),
        ..ServerConfig::default()
    };
    if let Some(pool) = config.dispatch.pool_mut() {
        pool.queue_size = 55;
        pool.core_threads = 1;
        pool.max_threads = 3;
    }
    config
}

#[tokio::test]
async fn settings_beat_the_base_config_whether_given_before_or_after_it() {
    let before = Server::builder()
        .addr("127.0.0.1:0")
        .pool_queue_size(10)
        .pool_queue(QueueKind::Blocking)
        .max_in_flight_per_connection(9)
        .stream_window(16)
        .config(from_file())
        .start()
        .await
        .expect("starts");
    let after = Server::builder()
        .config(from_file())
        .addr("127.0.0.1:0")
        .pool_queue_size(10)
        .pool_queue(QueueKind::Blocking)
        .max_in_flight_per_connection(9)
        .stream_window(16)
        .start()
        .await
        .expect("starts");
    for server in [&before, &after] {
        let config = server.config();
        let pool = config.dispatch.pool().expect("pool dispatch");
        assert_eq!(pool.queue_size, 10, "the builder's queue size");
        assert_eq!(pool.queue, QueueKind::Blocking);
        assert_eq!(
            (pool.core_threads, pool.max_threads),
            (1, 3),
            "the file's sizes stay"
        );
        assert_eq!(config.max_in_flight_per_connection, 9);
        assert_eq!(config.streams.window, 16);
        assert_eq!(config.max_connections, 7, "the file's limit stays");
        assert_eq!(config.shutdown_grace, Duration::from_millis(123));
    }
    assert_eq!(before.config(), after.config());
}

#[tokio::test]
async fn the_dispatch_mode_is_applied_last() {
    let direct = Server::builder()
        .addr("127.0.0.1:0")
        .dispatch(Dispatch::Direct)
        .pool_threads(2, 4)
        .start()
        .await
        .expect("starts");
    assert_eq!(direct.config().dispatch, DispatchConfig::Direct);
    let pooled = Server::builder()
        .addr("127.0.0.1:0")
        .dispatch(Dispatch::Pool)
        .config(ServerConfig {
            dispatch: DispatchConfig::Direct,
            ..ServerConfig::default()
        })
        .pool_threads(2, 4)
        .start()
        .await
        .expect("starts");
    let pool = pooled.config().dispatch.pool().expect("pool dispatch");
    assert_eq!((pool.core_threads, pool.max_threads), (2, 4));
}

#[tokio::test]
async fn a_bad_setting_fails_the_start_with_the_setting_named() {
    let Err(err) = Server::builder()
        .addr("127.0.0.1:0")
        .pool_threads(4, 2)
        .start()
        .await
    else {
        panic!("max below core must not start");
    };
    let text = err.to_string();
    assert!(text.contains("max_threads"), "{text}");
}

#[tokio::test]
async fn a_server_serves_on_the_listener_its_caller_bound() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let bound: SocketAddr = listener.local_addr().expect("has an address");
    let server = Server::builder()
        .addr("127.0.0.1:1") // ignored: the listener is served
        .listener(listener)
        .start()
        .await
        .expect("starts");
    assert_eq!(server.local_addr(), bound);
    assert_eq!(server.config().addr, bound.to_string());
    // The listener accepts: a ping frame is answered (the connection is served).
    let mut socket = TcpStream::connect(bound).await.expect("connects");
    let ping = rpc_codec::OutFrame::control(rpc_codec::FrameKind::Ping, 1);
    let mut out = bytes::BytesMut::new();
    ping.encode(&mut out, 1 << 20).expect("encodes");
    socket.write_all(&out).await.expect("writes");
    let mut header = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(5), socket.read_exact(&mut header))
        .await
        .expect("answered in time")
        .expect("reads");
    assert_eq!(server.stats().accepted_connections, 1);
}

#[cfg(feature = "http")]
#[tokio::test]
async fn addresses_may_be_socket_addrs() {
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    let server = Server::builder()
        .addr(addr)
        .http_addr(addr)
        .start()
        .await
        .expect("starts");
    assert_eq!(server.local_addr().ip(), addr.ip());
    assert!(server.http_addr().is_some());
}

/// Without the `http` feature an HTTP address is a configuration error
/// naming the key and the feature, not silently ignored.
#[cfg(not(feature = "http"))]
#[tokio::test]
async fn an_http_addr_without_the_http_feature_fails_the_start() {
    let Err(err) = Server::builder()
        .addr("127.0.0.1:0")
        .http_addr("127.0.0.1:0")
        .start()
        .await
    else {
        panic!("an HTTP listener this build cannot serve must not start");
    };
    let text = err.to_string();
    assert!(
        text.contains("http_addr") && text.contains("`http` feature"),
        "{text}"
    );
}
