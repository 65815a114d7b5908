//! [`LocalFlow`]: a handler's flow read in the same process — how the
//! HTTP/JSON gateway serves a server stream as newline-delimited JSON.
//!
//! The handler sends into an [`Inbox`] as it would to a connection, and
//! the response body reads it through a `RawStreaming` whose credit goes
//! straight back to the handler's sink: hyper pulls the body as the socket
//! takes it, so a slow HTTP client holds the handler within the window, as
//! on the binary protocol. The body dropped early (the client went away)
//! gives the call up.

use std::sync::Arc;

use bytes::Bytes;
use rpc_core::stream::{Credit, Inbox, StreamPeer};
use rpc_core::{CancelSignal, Code, RawStreaming, Status, StreamSink};

/// The two ends of one in-process flow.
pub(crate) struct LocalFlow {
    inbox: Arc<Inbox>,
    credit: Arc<Credit>,
    cancel: CancelSignal,
}

impl LocalFlow {
    /// A flow of `window` items for the call `cancel` ends: the sink the
    /// handler sends into, and the stream that reads it.
    pub fn open(
        id: u64,
        serializer: u8,
        window: u32,
        cancel: CancelSignal,
    ) -> (StreamSink, RawStreaming, Arc<dyn StreamPeer>) {
        let inbox = Arc::new(Inbox::new(window));
        let credit = Credit::new();
        credit.grant(inbox.window());
        let peer: Arc<dyn StreamPeer> = Arc::new(LocalFlow {
            inbox: inbox.clone(),
            credit: credit.clone(),
            cancel,
        });
        let sink = StreamSink::new(id, serializer, credit, peer.clone());
        let items = RawStreaming::new(id, inbox, peer.clone());
        (sink, items, peer)
    }
}

impl StreamPeer for LocalFlow {
    fn send_item(&self, _id: u64, _serializer: u8, body: Bytes) -> Result<(), Status> {
        self.inbox.push(body)
    }

    fn send_end(&self, _id: u64, _serializer: u8, end: Result<(), Status>) {
        self.inbox.finish(end)
    }

    fn send_credit(&self, _id: u64, n: u32) {
        self.credit.grant(n)
    }

    fn receiver_gone(&self, _id: u64, early: bool) {
        if early {
            self.credit
                .stop(Status::new(Code::Cancelled, "the reader went away"));
            self.cancel.give_up();
        }
    }
}
