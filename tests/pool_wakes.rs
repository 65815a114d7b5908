//! Several connections' batches of calls on pool dispatch while every
//! worker is parked: a batch's wake-up of a worker waits for the runtime
//! thread's other ready connections (`connection`, "Waking the pool"), and
//! one wake-up takes them all. What must hold on that path: every call
//! answered once, with its own result, on every connection; and the
//! deferral is taken (counted in `deferred_wakes`).

use std::collections::HashSet;
use std::time::Duration;

use brisk::codec::{BodyCodec, Code, FrameCodec, OutFrame};
use brisk::{Dispatch, QueueKind, SerializerKind};
use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::Decoder;

mod common;

/// Connections that send their runs at once.
const CONNECTIONS: u64 = 4;
/// Requests in each connection's run, written in one write.
const RUN: u64 = 16;
/// Rounds at most, until the deferral was seen (it is on the first round
/// unless a worker happens to be awake when the runs arrive).
const ROUNDS: u64 = 50;

/// `Calc.add(id, 1)` as request `id`, in msgpack.
fn add(id: u64) -> OutFrame {
    let serializer = SerializerKind::MsgPack;
    let body = serializer.encode_body(&(id as i64, 1i64)).unwrap();
    OutFrame::request(id, serializer.id(), "Calc", "add", body)
}

/// Reads answers from `stream` until every id in `waiting` has one, each
/// `Ok` and `id + 1`, none twice.
async fn answers(stream: &mut TcpStream, mut waiting: HashSet<u64>) {
    let mut codec = FrameCodec::new(1 << 20);
    let mut buf = BytesMut::new();
    loop {
        while let Some(frame) = codec.decode(&mut buf).unwrap() {
            let id = frame.header.request_id;
            assert!(waiting.remove(&id), "call {id} answered once, when sent");
            assert_eq!(frame.code(), Code::Ok, "call {id}");
            let sum: i64 = SerializerKind::MsgPack.decode(&frame.body).unwrap();
            assert_eq!(sum, id as i64 + 1, "call {id}'s own result");
        }
        if waiting.is_empty() {
            return;
        }
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read_buf(&mut buf))
            .await
            .expect("answers within 10 s")
            .unwrap();
        assert!(n > 0, "the server closed the connection");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_connections_batches_share_one_wake_up_and_every_call_is_answered_once() {
    common::bounded(60, async {
        let config = common::server_config(Dispatch::Pool, QueueKind::Transfer);
        let (server, imp) = common::start(config).await;
        let mut streams = Vec::new();
        for _ in 0..CONNECTIONS {
            streams.push(TcpStream::connect(server.local_addr()).await.unwrap());
        }
        let mut id = 1;
        let mut rounds = 0;
        while rounds < ROUNDS {
            rounds += 1;
            // Every connection's run, encoded first, then written at once.
            let mut runs = Vec::new();
            for _ in 0..CONNECTIONS {
                let mut run = BytesMut::new();
                let mut ids = HashSet::new();
                for _ in 0..RUN {
                    add(id).encode(&mut run, 1 << 20).unwrap();
                    ids.insert(id);
                    id += 1;
                }
                runs.push((run, ids));
            }
            let mut readers = Vec::new();
            for (stream, (run, ids)) in streams.iter_mut().zip(runs) {
                stream.write_all(&run).await.unwrap();
                readers.push(ids);
            }
            for (stream, ids) in streams.iter_mut().zip(readers) {
                answers(stream, ids).await;
            }
            if server.stats().deferred_wakes > 0 && rounds >= 3 {
                break;
            }
            // The workers park before the next round, and the pool's
            // monitor falls asleep (after ten quiet ticks of 1 ms): a
            // wake-up lost after a yield would leave the next round's calls
            // unanswered, with nothing to rescue them within the test's
            // bound.
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let stats = server.stats();
        assert!(
            stats.deferred_wakes > 0,
            "no batch waited for the others' in {rounds} rounds"
        );
        assert_eq!(stats.requests, id - 1, "every call counted once");
        assert_eq!(stats.errors, 0);
        assert_eq!(
            imp.calls.load(std::sync::atomic::Ordering::Relaxed),
            id - 1,
            "every call ran once"
        );
        server.shutdown().await;
    })
    .await;
}
