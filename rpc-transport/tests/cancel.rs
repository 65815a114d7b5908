//! A call its caller gives up on tells the server: a `Cancel` frame with the
//! call's request id follows its request, whether the caller dropped the
//! call or it timed out.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use rpc_codec::{Frame, FrameCodec, FrameKind, OutFrame};
use rpc_core::WriteMode;
use rpc_transport::{ClientTransport, SendSpec, Started};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::codec::Decoder;

/// The next `n` frames the server side reads (bounded: 5 s).
async fn read_frames(stream: &mut tokio::net::TcpStream, n: usize) -> Vec<Frame> {
    let mut codec = FrameCodec::new(1 << 20);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), async {
        while frames.len() < n {
            while let Some(frame) = codec.decode(&mut buf).expect("a valid frame") {
                frames.push(frame);
            }
            if frames.len() >= n {
                break;
            }
            assert!(stream.read_buf(&mut buf).await.expect("read") > 0, "closed");
        }
    })
    .await
    .expect("frames within 5 s");
    frames
}

fn spec(wait: Duration, sent: Duration) -> SendSpec {
    SendSpec {
        mode: WriteMode::Async,
        deadline: Instant::now() + wait,
        timeout: sent,
    }
}

fn pending(started: Started) -> rpc_transport::PendingCall {
    match started {
        Started::Sent(call) => call,
        Started::Waiting(..) => panic!("the write queue has room"),
    }
}

#[tokio::test]
async fn a_dropped_call_and_a_timed_out_call_send_cancel() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let conn = rpc_transport::connect(&addr, &ClientTransport::default())
        .await
        .unwrap();
    let (mut server, _) = listener.accept().await.unwrap();

    let mut frame = OutFrame::request(0, 1, "S", "m", Bytes::from_static(b"\x90"));
    let dropped = pending(
        conn.clone()
            .start(
                &mut frame,
                spec(Duration::from_secs(5), Duration::from_secs(5)),
            )
            .unwrap(),
    );
    let dropped_id = dropped.request_id();
    drop(dropped);
    let frames = read_frames(&mut server, 2).await;
    assert_eq!(frames[0].header.kind, FrameKind::Request);
    assert_eq!(frames[1].header.kind, FrameKind::Cancel);
    assert_eq!(frames[1].header.request_id, dropped_id);
    assert_eq!(conn.pending_count(), 0);

    let mut frame = OutFrame::request(0, 1, "S", "m", Bytes::from_static(b"\x90"));
    let timing_out = pending(
        conn.clone()
            .start(
                &mut frame,
                spec(Duration::from_millis(30), Duration::from_millis(30)),
            )
            .unwrap(),
    );
    let id = timing_out.request_id();
    let err = timing_out.response().await.unwrap_err();
    assert!(matches!(err, rpc_core::RpcError::Timeout { .. }), "{err}");
    let frames = read_frames(&mut server, 2).await;
    assert_eq!(frames[0].header.request_id, id);
    assert_eq!(frames[1].header.kind, FrameKind::Cancel);
    assert_eq!(frames[1].header.request_id, id);
    assert_eq!(conn.pending_count(), 0);
    assert!(
        conn.is_open(),
        "giving up on calls leaves the connection open"
    );
}
