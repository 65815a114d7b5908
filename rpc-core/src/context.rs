//! [`Context`]: what a handler knows of the call it serves — and what a call
//! made from inside that handler inherits.
//!
//! One value instead of five arguments: the request's metadata (and the
//! metadata to send back with the answer), the peer, the request id, the
//! deadline, the serializer and the call's cancellation. The server builds it
//! from the request frame (or the HTTP request) once, interceptors see and
//! may change it on the [`RpcRequest`](crate::RpcRequest), and the handler
//! gets `&Context`.
//!
//! # Cancellation
//!
//! [`Context::cancelled`] completes when nobody waits for the answer any
//! more: the caller dropped the call (its `Cancel` frame arrived), the
//! deadline passed, the connection closed or the server was forced down. An
//! async handler's future is simply dropped then; `cancelled()` is for work
//! the handler spawned, and for a handler on a worker thread (which cannot
//! be pre-empted) to notice and stop early — its late answer is discarded.
//! It is a [`CancelSignal`] underneath, so a nested call can watch its
//! parent's: [`CallOptions::from(&cx)`] in rpc-client carries it, with the
//! remaining deadline and the trace metadata ([`Context::inherited_metadata`]).
//!
//! [`CallOptions::from(&cx)`]: ../rpc_client/struct.CallOptions.html
//!
//! # Cost
//!
//! A context is built per call: one allocation (the token) and no lock
//! unless the handler sets answer metadata.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::{CancelSignal, Metadata, SerializerKind};

/// Metadata keys a call made from a handler passes on: W3C trace context and
/// brisk's own request tracing.
pub const INHERITED_METADATA: [&str; 3] = ["traceparent", "tracestate", "x-request-id"];

/// The call a handler serves.
///
/// ```
/// use std::time::Duration;
/// use rpc_core::{Context, Metadata, SerializerKind};
///
/// let mut metadata = Metadata::new();
/// metadata.insert("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
/// let cx = Context::new(7, SerializerKind::MsgPack)
///     .with_metadata(metadata)
///     .with_timeout(Duration::from_millis(200));
/// assert_eq!(cx.request_id(), 7);
/// assert!(cx.remaining().unwrap() <= Duration::from_millis(200));
/// assert!(!cx.is_cancelled());
/// cx.set_reply_metadata("served-by", "node-1");
/// assert_eq!(cx.take_reply_metadata().get("served-by"), Some("node-1"));
/// ```
#[derive(Debug)]
pub struct Context {
    request_id: u64,
    peer: Option<SocketAddr>,
    deadline: Option<Instant>,
    serializer: SerializerKind,
    metadata: Metadata,
    cancel: CancelSignal,
    reply_metadata: Mutex<Metadata>,
}

impl Clone for Context {
    /// A copy sharing the call's cancellation (answer metadata set on the
    /// copy is the copy's own: set it on the handler's `&Context`).
    fn clone(&self) -> Self {
        Context {
            request_id: self.request_id,
            peer: self.peer,
            deadline: self.deadline,
            serializer: self.serializer,
            metadata: self.metadata.clone(),
            cancel: self.cancel.clone(),
            reply_metadata: Mutex::new(self.reply_metadata.lock().clone()),
        }
    }
}

impl Context {
    /// The context of call `request_id` in `serializer`: no metadata, no
    /// peer, no deadline, not cancelled.
    #[inline]
    pub fn new(request_id: u64, serializer: SerializerKind) -> Self {
        Context {
            request_id,
            peer: None,
            deadline: None,
            serializer,
            metadata: Metadata::new(),
            cancel: CancelSignal::new(),
            reply_metadata: Mutex::new(Metadata::new()),
        }
    }

    /// With the request's metadata.
    #[inline]
    pub fn with_metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = metadata;
        self
    }

    /// With the remote address.
    #[inline]
    pub fn with_peer(mut self, peer: SocketAddr) -> Self {
        self.peer = Some(peer);
        self
    }

    /// With a deadline.
    #[inline]
    pub fn with_deadline(mut self, deadline: Option<Instant>) -> Self {
        self.deadline = deadline;
        self
    }

    /// With a deadline `timeout` from now.
    #[inline]
    pub fn with_timeout(self, timeout: Duration) -> Self {
        self.with_deadline(Instant::now().checked_add(timeout))
    }

    /// Cancelled with `token` (a parent call's, say) instead of on its own.
    #[inline]
    pub fn with_cancellation(mut self, signal: CancelSignal) -> Self {
        self.cancel = signal;
        self
    }

    /// The call's id on its connection (0 on HTTP, which has none).
    #[inline]
    pub fn request_id(&self) -> u64 {
        self.request_id
    }

    /// The caller's address, when the server knows it.
    #[inline]
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// When the caller stops waiting, if it said.
    #[inline]
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Changes the deadline (an interceptor that caps it, say).
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    /// The time left until the deadline (zero once it passed), if there is one.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// True once the deadline has passed.
    pub fn is_expired(&self) -> bool {
        self.deadline.is_some_and(|d| d <= Instant::now())
    }

    /// The serializer of the arguments and of the answer.
    #[inline]
    pub fn serializer(&self) -> SerializerKind {
        self.serializer
    }

    /// The request's metadata.
    #[inline]
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The request's metadata, to change (interceptors).
    #[inline]
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// The entries of the request's metadata a call made from this handler
    /// carries on ([`INHERITED_METADATA`]).
    pub fn inherited_metadata(&self) -> Metadata {
        let mut inherited = Metadata::new();
        for (key, value) in self.metadata.iter() {
            if INHERITED_METADATA.contains(&key) {
                inherited.insert(key, value);
            }
        }
        inherited
    }

    /// Adds an entry to the metadata sent back with the answer.
    pub fn set_reply_metadata(&self, key: impl Into<String>, value: impl Into<String>) {
        self.reply_metadata.lock().insert(key, value);
    }

    /// Takes the answer's metadata (what the server sends back).
    pub fn take_reply_metadata(&self) -> Metadata {
        std::mem::take(&mut *self.reply_metadata.lock())
    }

    /// The answer's metadata, once the handler is done with its context
    /// (no lock: the context is the caller's now).
    #[inline]
    pub fn into_reply_metadata(self) -> Metadata {
        self.reply_metadata.into_inner()
    }

    /// Completes once the call is cancelled: the caller gave up, the deadline
    /// passed, the connection closed or the server was forced down.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// True once the call is cancelled (for a handler that cannot await, on
    /// a worker thread, to check between steps).
    #[inline]
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Cancels the call (the server does, at its caller's word or deadline).
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// The call's end (answered or cancelled): what a nested call watches.
    #[inline]
    pub fn cancellation(&self) -> &CancelSignal {
        &self.cancel
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inherited_metadata_keeps_only_trace_keys() {
        let mut m = Metadata::new();
        m.insert("traceparent", "00-a-b-01");
        m.insert("authorization", "Bearer secret");
        m.insert("x-request-id", "r1");
        let cx = Context::new(1, SerializerKind::Json).with_metadata(m);
        let inherited = cx.inherited_metadata();
        assert_eq!(inherited.get("traceparent"), Some("00-a-b-01"));
        assert_eq!(inherited.get("x-request-id"), Some("r1"));
        assert_eq!(
            inherited.get("authorization"),
            None,
            "credentials stay behind"
        );
    }

    #[tokio::test]
    async fn a_clone_shares_cancellation() {
        let cx = Context::new(1, SerializerKind::Json);
        let copy = cx.clone();
        let waiter = tokio::spawn(async move { copy.cancelled().await });
        cx.cancel();
        waiter.await.unwrap();
        assert!(cx.is_cancelled());
    }

    #[test]
    fn remaining_is_zero_after_the_deadline() {
        let cx = Context::new(1, SerializerKind::Json).with_deadline(Some(Instant::now()));
        assert_eq!(cx.remaining(), Some(Duration::ZERO));
        assert!(cx.is_expired());
        assert_eq!(Context::new(1, SerializerKind::Json).remaining(), None);
    }
}
