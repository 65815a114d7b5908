//! The untyped call: what interceptors and handlers see of a request and its answer.
//!
//! By the time a call is an [`RpcRequest`] its arguments are already serialized
//! into `body`; interceptors (auth, metrics, logging) work on names, the
//! [`Context`] (metadata, deadline, peer) and sizes without paying for a
//! decode. Names are `Cow<'static, str>` so the typed client's static names
//! are never allocated.

use std::borrow::Cow;

use bytes::Bytes;

use crate::{Context, Metadata, SerializerKind};

/// A call on its way to a handler (server side) or to the wire (client side).
#[derive(Debug, Clone)]
pub struct RpcRequest {
    /// Service name, as registered on the server.
    pub service: Cow<'static, str>,
    /// Method name within the service.
    pub method: Cow<'static, str>,
    /// The serialized argument tuple, in `cx.serializer()`.
    pub body: Bytes,
    /// The call's context: metadata, deadline, peer, serializer, cancellation.
    pub cx: Context,
}

impl RpcRequest {
    /// A request with empty metadata, no deadline and no peer.
    pub fn new(
        service: impl Into<Cow<'static, str>>,
        method: impl Into<Cow<'static, str>>,
        serializer: SerializerKind,
        body: Bytes,
    ) -> Self {
        RpcRequest {
            service: service.into(),
            method: method.into(),
            body,
            cx: Context::new(0, serializer),
        }
    }

    /// The serializer of `body` (and of the expected response).
    pub fn serializer(&self) -> SerializerKind {
        self.cx.serializer()
    }

    /// The call's metadata.
    pub fn metadata(&self) -> &Metadata {
        self.cx.metadata()
    }

    /// The call's metadata, to change.
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        self.cx.metadata_mut()
    }
}

/// A successful answer: the serialized result and the metadata sent with it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RpcResponse {
    /// The serialized result, in the request's serializer.
    pub body: Bytes,
    /// Metadata the handler sent back ([`Context::set_reply_metadata`]).
    pub metadata: Metadata,
}

impl RpcResponse {
    /// Wraps a serialized result, without metadata.
    pub fn new(body: Bytes) -> Self {
        RpcResponse {
            body,
            metadata: Metadata::new(),
        }
    }
}
