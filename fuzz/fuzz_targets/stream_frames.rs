//! Fuzzes what a peer's stream frames do to a stream's receiving state: any
//! bytes, decoded as frames, drive one flow's inbox (data, end, error) and
//! one sender's credit (credit, cancel) — never a panic, and never more
//! items held than the window, whatever the peer sends.
//!
//! Run: `cd fuzz && cargo fuzz run --sanitizer none stream_frames -- -max_total_time=60`
#![no_main]

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use libfuzzer_sys::fuzz_target;
use rpc_codec::{FrameCodec, FrameKind};
use rpc_core::stream::{Credit, Inbox, StreamPeer};
use rpc_core::{Code, RawStreaming, Status};
use tokio_util::codec::Decoder;

/// Where the reader's grants and cancels would go: nowhere.
struct Nowhere;

impl StreamPeer for Nowhere {
    fn send_item(&self, _: u64, _: u8, _: Bytes) -> Result<(), Status> {
        Ok(())
    }
    fn send_end(&self, _: u64, _: u8, _: Result<(), Status>) {}
    fn send_credit(&self, _: u64, _: u32) {}
    fn receiver_gone(&self, _: u64, _: bool) {}
}

const WINDOW: u32 = 4;

fuzz_target!(|data: &[u8]| {
    let inbox = Arc::new(Inbox::new(WINDOW));
    let credit = Credit::new();
    let mut items = RawStreaming::new(1, inbox.clone(), Arc::new(Nowhere));
    let mut cx = Context::from_waker(Waker::noop());
    let mut codec = FrameCodec::new(64 * 1024);
    let mut buf = BytesMut::from(data);
    let mut ended = false;
    loop {
        let frame = match codec.decode(&mut buf) {
            Ok(Some(frame)) => frame,
            _ => break,
        };
        match frame.header.kind {
            FrameKind::StreamData => {
                let _ = inbox.push(frame.body.clone());
            }
            FrameKind::StreamEnd | FrameKind::StreamError => inbox.finish(frame.stream_end()),
            FrameKind::Credit => {
                if let Ok(n) = frame.credit() {
                    credit.grant(n);
                }
            }
            FrameKind::Cancel => credit.stop(Status::new(Code::Cancelled, "cancelled")),
            _ => {}
        }
        assert!(items.queued() <= WINDOW as usize, "more than a window held");
        // The reader takes one item every other frame (its grants go nowhere,
        // so a peer that keeps sending overruns its credit).
        if frame.header.request_id % 2 == 0 && !ended {
            if let Poll::Ready(None) = Pin::new(&mut items).poll_next(&mut cx) {
                ended = true;
            }
        }
    }
});
