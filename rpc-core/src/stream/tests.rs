//! The flow-control pieces wired back to back in one process: a
//! [`StreamPeer`] that delivers straight into the other side's inbox.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;

use super::*;
use crate::Code;

/// Delivers items into `inbox` and credit into `credit`, like a connection would.
struct Loopback {
    inbox: Arc<Inbox>,
    credit: Arc<Credit>,
    gone: Mutex<Vec<(u64, bool)>>,
}

impl StreamPeer for Loopback {
    fn send_item(&self, _id: u64, _ser: u8, body: Bytes) -> Result<(), Status> {
        self.inbox.push(body)
    }
    fn send_end(&self, _id: u64, _ser: u8, end: Result<(), Status>) {
        self.inbox.finish(end)
    }
    fn send_credit(&self, _id: u64, n: u32) {
        self.credit.grant(n)
    }
    fn receiver_gone(&self, id: u64, early: bool) {
        self.gone.lock().push((id, early));
        if early {
            self.credit
                .stop(Status::new(Code::Cancelled, "the receiver went away"));
        }
    }
}

fn pair(window: u32) -> (StreamSink, RawStreaming, Arc<Loopback>) {
    let inbox = Arc::new(Inbox::new(window));
    let credit = Credit::new();
    credit.grant(inbox.window());
    let peer = Arc::new(Loopback {
        inbox: inbox.clone(),
        credit: credit.clone(),
        gone: Mutex::new(Vec::new()),
    });
    let sink = StreamSink::new(1, 1, credit, peer.clone());
    let recv = RawStreaming::new(1, inbox, peer.clone());
    (sink, recv, peer)
}

async fn next(recv: &mut RawStreaming) -> Option<Result<Bytes, Status>> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *recv).poll_next(cx)).await
}

use futures_core::Stream;

#[tokio::test]
async fn a_slow_reader_keeps_the_sender_within_the_window() {
    let (mut sink, mut recv, _peer) = pair(8);
    let sender = tokio::spawn(async move {
        for i in 0u32..200 {
            sink.send(Bytes::from(i.to_be_bytes().to_vec())).await?;
        }
        sink.finish(Ok(()));
        Ok::<_, Status>(())
    });
    let mut expect = 0u32;
    let mut peak = 0;
    while let Some(item) = next(&mut recv).await {
        peak = peak.max(recv.queued() + 1);
        let item = item.expect("no error");
        assert_eq!(u32::from_be_bytes(item[..].try_into().unwrap()), expect);
        expect += 1;
        if expect % 16 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    assert_eq!(expect, 200, "every item, in order");
    assert!(peak <= 8, "at most a window buffered, saw {peak}");
    sender.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_error_comes_after_the_items_sent_before_it_and_once() {
    let (mut sink, mut recv, _peer) = pair(4);
    sink.send(Bytes::from_static(b"a")).await.unwrap();
    sink.finish(Err(Status::new(Code::NotFound, "gone")));
    assert_eq!(next(&mut recv).await.unwrap().unwrap(), &b"a"[..]);
    let err = next(&mut recv).await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(next(&mut recv).await.is_none());
    assert!(recv.is_done());
}

#[tokio::test]
async fn dropping_the_reader_stops_the_sender() {
    let (mut sink, recv, peer) = pair(1);
    sink.send(Bytes::from_static(b"a")).await.unwrap();
    let waiting = tokio::spawn(async move { sink.send(Bytes::from_static(b"b")).await });
    tokio::task::yield_now().await;
    drop(recv);
    let err = waiting.await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::Cancelled);
    assert_eq!(*peer.gone.lock(), vec![(1, true)]);
}

#[test]
fn items_past_the_credit_end_the_flow() {
    let inbox = Inbox::new(2);
    inbox.push(Bytes::from_static(b"1")).unwrap();
    inbox.push(Bytes::from_static(b"2")).unwrap();
    let err = inbox.push(Bytes::from_static(b"3")).unwrap_err();
    assert_eq!(err.code(), Code::BadRequest);
    assert!(inbox.is_finished());
    assert_eq!(inbox.buffered(), 0, "an overrun flow keeps nothing");
}

#[tokio::test(start_paused = true)]
async fn the_deadline_ends_a_quiet_stream() {
    let (_sink, recv, peer) = pair(4);
    let mut recv = recv.with_deadline(Some(std::time::Instant::now() + Duration::from_millis(50)));
    let err = next(&mut recv).await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded);
    assert!(next(&mut recv).await.is_none());
    assert_eq!(*peer.gone.lock(), vec![(1, true)]);
}

#[tokio::test]
async fn credit_is_taken_at_once_until_it_runs_out_or_stops() {
    let credit = Credit::new();
    credit.grant(2);
    assert!(
        credit.take().await.is_ok(),
        "credit in hand is taken at once"
    );
    assert_eq!(credit.available(), 1);
    // Stopped with credit left: nothing more may go, and the reason is the stop's.
    credit.stop(Status::new(Code::DeadlineExceeded, "over"));
    let err = credit
        .take()
        .await
        .expect_err("a stopped flow sends nothing");
    assert_eq!(err.code(), Code::DeadlineExceeded);

    // A sender without credit waits, and a stop wakes it with the reason.
    let credit = Credit::new();
    let waiting = tokio::spawn({
        let credit = credit.clone();
        async move { credit.take().await }
    });
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished(), "no credit: the sender waits");
    credit.grant(1);
    assert!(
        waiting.await.expect("the task ran").is_ok(),
        "a grant wakes it"
    );
    let waiting = tokio::spawn({
        let credit = credit.clone();
        async move { credit.take().await }
    });
    tokio::task::yield_now().await;
    credit.stop(Status::new(Code::Cancelled, "gone"));
    let err = waiting.await.expect("the task ran").expect_err("stopped");
    assert_eq!(err.code(), Code::Cancelled);
}
