//! A lone caller's answers are busy-polled for by its connection's reader:
//! against a server on a thread of its own (as in another process) that
//! answers at once, on a runtime with two workers, the poll reads answers
//! from the socket itself (the worker blocked in `epoll_wait` is not the one
//! polling); with the poll off, none; every call is answered either way.

use std::io::{Read, Write};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use rpc_codec::{FrameCodec, FrameKind, OutFrame};
use rpc_core::WriteMode;
use rpc_transport::{ClientTransport, SendSpec, Started};
use tokio::time::Instant;
use tokio_util::codec::Decoder;

/// A blocking server on its own thread: answers every request on the one
/// connection it accepts with its body, until the client goes.
fn echo_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream.set_nodelay(true).unwrap();
        let mut codec = FrameCodec::new(1 << 20);
        let mut buf = BytesMut::new();
        let mut chunk = [0u8; 4096];
        loop {
            while let Some(frame) = codec.decode(&mut buf).expect("a valid frame") {
                if frame.header.kind == FrameKind::Request {
                    let mut out = BytesMut::new();
                    OutFrame::response(frame.header.request_id, 1, frame.body.clone())
                        .encode(&mut out, 1 << 20)
                        .unwrap();
                    stream.write_all(&out).unwrap();
                }
            }
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    });
    addr
}

/// Makes `calls` calls one after another; returns the answers the reader's
/// poll read itself.
async fn lone_calls(busy_poll: Duration, calls: u64) -> u64 {
    let addr = echo_server();
    let transport = ClientTransport {
        busy_poll,
        ..ClientTransport::default()
    };
    let conn = rpc_transport::connect(&addr, &transport).await.unwrap();
    for i in 0..calls {
        let body = Bytes::from(i.to_le_bytes().to_vec());
        let mut frame = OutFrame::request(0, 1, "S", "m", body.clone());
        let spec = SendSpec {
            mode: WriteMode::Async,
            deadline: Instant::now() + Duration::from_secs(10),
            timeout: Duration::from_secs(10),
        };
        let call = match conn.start(&mut frame, spec).unwrap() {
            Started::Sent(call) => call,
            Started::Waiting(call, wait) => {
                wait.await.unwrap();
                call
            }
        };
        let answer = call.response().await.unwrap();
        assert_eq!(answer.body, body, "call {i}");
    }
    let polled = conn.busy_poll_reads();
    conn.close("done");
    polled
}

/// On one worker the yield polls the I/O driver itself, so the answers come
/// through the usual read; they all come, poll or not.
#[tokio::test]
async fn a_lone_callers_answers_all_come_with_the_poll_on_or_off() {
    lone_calls(Duration::from_millis(1), 500).await;
    assert_eq!(lone_calls(Duration::ZERO, 200).await, 0, "off: never");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_callers_answers_are_read_by_the_poll_on_two_workers() {
    // The longest poll allowed: a loaded test machine still answers within it.
    let polled = lone_calls(Duration::from_millis(1), 500).await;
    assert!(polled > 0, "the poll read answers from the socket itself");
    assert_eq!(lone_calls(Duration::ZERO, 200).await, 0, "off: never");
}
