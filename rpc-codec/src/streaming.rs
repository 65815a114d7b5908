//! Typed streams: [`Streaming<T>`], the items of a flow decoded as they are
//! read, and [`StreamSender<T>`], items encoded as they are sent.
//!
//! Both wrap the untyped ends from `rpc_core::stream` with the call's
//! serializer; what bounds them (the credit window) and how they end is
//! described there. A `#[brisk::service]` handler receives a `Streaming`
//! for a client stream; a typed client returns one for a server stream.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;
use rpc_core::{RawStreaming, SerializerKind, Status, StreamSink};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::BodyCodec;

/// A flow of `T`s as they arrive: `Ok` items in order, then at most one
/// `Err` — the sender's error, the deadline, a broken connection. An item
/// that does not decode is an `Err` of its own (`BadRequest`); the items
/// after it still come.
///
/// Dropping it before the end tells the sender to stop (from a client:
/// the call is cancelled).
pub struct Streaming<T> {
    raw: RawStreaming,
    serializer: SerializerKind,
    _items: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Streaming<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streaming")
            .field("raw", &self.raw)
            .field("serializer", &self.serializer)
            .finish()
    }
}

impl<T: DeserializeOwned> Streaming<T> {
    /// Decodes `raw`'s items with `serializer`.
    pub fn new(raw: RawStreaming, serializer: SerializerKind) -> Self {
        Streaming {
            raw,
            serializer,
            _items: PhantomData,
        }
    }

    /// The next item; `Ok(None)` at the end.
    pub async fn message(&mut self) -> Result<Option<T>, Status> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx))
            .await
            .transpose()
    }

    /// Items that arrived and were not read yet (at most the window).
    pub fn queued(&self) -> usize {
        self.raw.queued()
    }

    /// The untyped stream underneath.
    pub fn into_raw(self) -> RawStreaming {
        self.raw
    }
}

impl<T: DeserializeOwned> Stream for Streaming<T> {
    type Item = Result<T, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let serializer = self.serializer;
        Pin::new(&mut self.raw).poll_next(cx).map(|item| {
            item.map(|item| {
                item.and_then(|body| serializer.decode_bytes(&body).map_err(|e| Status::from(&e)))
            })
        })
    }
}

/// The sending end of a flow of `T`s: each item waits for credit, then goes
/// out encoded. Dropped, it ends the flow cleanly (a client's); [`finish`]
/// says so explicitly, or ends it with an error.
///
/// [`finish`]: StreamSender::finish
pub struct StreamSender<T> {
    sink: StreamSink,
    serializer: SerializerKind,
    _items: PhantomData<fn(T)>,
}

impl<T> std::fmt::Debug for StreamSender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamSender")
            .field("sink", &self.sink)
            .finish()
    }
}

impl<T: Serialize> StreamSender<T> {
    /// Encodes items with `serializer` into `sink`.
    pub fn new(sink: StreamSink, serializer: SerializerKind) -> Self {
        StreamSender {
            sink,
            serializer,
            _items: PhantomData,
        }
    }

    /// Sends one item, waiting for credit first. Fails once the flow cannot
    /// go on (the receiver stopped reading, the call ended, the connection
    /// broke): its status says which.
    ///
    /// The item is encoded before anything waits: the future does not
    /// borrow it.
    pub fn send(&mut self, item: &T) -> impl Future<Output = Result<(), Status>> + Send + '_ {
        let body = self
            .serializer
            .encode_body(item)
            .map_err(|e| Status::from(&e));
        async move { self.sink.send(body?).await }
    }

    /// Completes once nothing more can be sent (the receiver stopped
    /// reading, the call ended, the connection closed).
    pub async fn closed(&self) {
        self.sink.closed().await
    }

    /// Ends the flow: cleanly, or with `Err`, which the receiver reads
    /// after every item sent before it.
    pub fn finish(self, end: Result<(), Status>) {
        self.sink.finish(end)
    }
}
