//! A blocking echo server on threads of its own (as in another process: the
//! test's runtime sees only its sockets) and a lone call against it, shared
//! by the busy-poll tests of `rpc-transport` and `rpc-client`.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use rpc_codec::{FrameCodec, FrameKind, OutFrame};
use rpc_core::WriteMode;
use rpc_transport::{Connection, SendSpec, Started};
use tokio::time::Instant;
use tokio_util::codec::Decoder;

/// Requests each accepted connection carried, in the order accepted.
pub type PerConnection = Arc<Vec<AtomicU64>>;

/// Answers every request on each of the first `connections` connections it
/// accepts with its body, at once, until the client goes; counts the
/// requests per connection.
pub fn echo_server(connections: usize) -> (String, PerConnection) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let counts: PerConnection = Arc::new((0..connections).map(|_| AtomicU64::new(0)).collect());
    let per_connection = counts.clone();
    std::thread::spawn(move || {
        for i in 0..connections {
            let (mut stream, _) = listener.accept().unwrap();
            stream.set_nodelay(true).unwrap();
            let counts = counts.clone();
            std::thread::spawn(move || {
                let mut codec = FrameCodec::new(1 << 20);
                let mut buf = BytesMut::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(frame) = codec.decode(&mut buf).expect("a valid frame") {
                        if frame.header.kind == FrameKind::Request {
                            counts[i].fetch_add(1, Ordering::Relaxed);
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
        }
    });
    (addr, per_connection)
}

/// Call number `i` on `conn`: sent, answered, and the answer is its echo.
pub async fn echo_call(conn: &Arc<Connection>, i: u64) {
    let body = Bytes::from(i.to_le_bytes().to_vec());
    let mut frame = OutFrame::request(0, 1, "S", "m", body.clone());
    let spec = SendSpec {
        mode: WriteMode::Async,
        deadline: Instant::now() + Duration::from_secs(10),
        timeout: Duration::from_secs(10),
    };
    let call = match Arc::clone(conn).start(&mut frame, spec).unwrap() {
        Started::Sent(call) => call,
        Started::Waiting(call, wait) => {
            wait.await.unwrap();
            call
        }
    };
    let answer = call.response().await.unwrap();
    assert_eq!(answer.body, body, "call {i}");
}
