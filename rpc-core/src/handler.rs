//! [`ServiceHandler`]: a service as the server sees it — a name, its methods, and
//! one untyped entry point that decodes the arguments, runs the method and
//! encodes the result.
//!
//! `#[brisk::service]` implements it for every user service. The server
//! routes a call by service and method name once, to a method *index*, and
//! the handler dispatches on that index: no second string match.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

use crate::stream::{RawStreaming, StreamSink};
use crate::{Code, Context, RpcError, RpcResponse, Status};

/// A handler's call in progress.
pub type HandlerFuture<'a> =
    Pin<Box<dyn Future<Output = Result<RpcResponse, RpcError>> + Send + 'a>>;

/// A handler's streaming call in progress: it sends its items through its
/// [`StreamSink`] and resolves with how its flow ends.
pub type StreamFuture<'a> = Pin<Box<dyn Future<Output = Result<(), Status>> + Send + 'a>>;

/// Which ways a method's items flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MethodKind {
    /// One request, one answer.
    Unary,
    /// One request, a stream of answers.
    ServerStream,
    /// A stream of requests, one answer.
    ClientStream,
    /// Streams both ways.
    Bidi,
}

impl MethodKind {
    /// Whether the caller sends a stream of items.
    pub fn client_streams(self) -> bool {
        matches!(self, MethodKind::ClientStream | MethodKind::Bidi)
    }

    /// Whether the handler sends a stream of items (a client stream's one
    /// answer travels as a stream of one item too).
    pub fn is_stream(self) -> bool {
        self != MethodKind::Unary
    }
}

/// What a streaming handler gets beside its context and first arguments.
#[derive(Debug)]
pub struct StreamIo {
    /// The caller's items (client and bidirectional streams).
    pub incoming: Option<RawStreaming>,
    /// Where the handler's items go.
    pub out: StreamSink,
}

/// A served service.
pub trait ServiceHandler: Send + Sync + 'static {
    /// The service name clients call.
    fn service_name(&self) -> &'static str;

    /// The method names this service answers; a method's index here is what
    /// [`call`](Self::call) receives.
    fn method_names(&self) -> &'static [&'static str];

    /// Runs method number `method` with `body` as its arguments, encoded in
    /// `cx.serializer()`; returns the encoded result and the answer's
    /// metadata. An index out of range is [`RpcError::UnknownMethod`]; a body
    /// that does not decode is [`RpcError::Deserialize`]; the method's own
    /// error is its [`Status`].
    fn call(&self, method: usize, cx: Context, body: Bytes) -> HandlerFuture<'_>;

    /// How method number `method` is called. Every method is unary unless
    /// the service says otherwise.
    fn method_kind(&self, method: usize) -> MethodKind {
        let _ = method;
        MethodKind::Unary
    }

    /// Runs streaming method number `method`: `body` holds its arguments
    /// beside the stream (a tuple, possibly empty), `io` its flows. The
    /// server ends the stream with the future's outcome.
    fn stream(&self, method: usize, cx: Context, body: Bytes, io: StreamIo) -> StreamFuture<'_> {
        let _ = (cx, body, io);
        let name = self.method_names().get(method).copied().unwrap_or("?");
        let status = Status::new(
            Code::Unimplemented,
            format!("{}.{name} is not a streaming method", self.service_name()),
        );
        Box::pin(std::future::ready(Err(status)))
    }
}
