//! The untyped call: what interceptors and handlers see of a request and its answer.
//!
//! By the time a call is an [`RpcRequest`] its arguments are already serialized
//! into `body`; interceptors (auth, metrics, logging) work on names, metadata and
//! sizes without paying for a decode. Names are `Cow<'static, str>` so the typed
//! client's static names are never allocated.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;

use crate::{Metadata, SerializerKind};

/// A call on its way to a handler (server side) or to the wire (client side).
#[derive(Debug, Clone)]
pub struct RpcRequest {
    /// Service name, as registered on the server.
    pub service: Cow<'static, str>,
    /// Method name within the service.
    pub method: Cow<'static, str>,
    /// Serializer of `body` (and of the expected response).
    pub serializer: SerializerKind,
    /// Call metadata.
    pub metadata: Metadata,
    /// The serialized argument tuple.
    pub body: Bytes,
    /// The time the caller still allows, if it said.
    pub timeout: Option<Duration>,
    /// The remote address (server side only).
    pub peer: Option<SocketAddr>,
}

impl RpcRequest {
    /// A request with empty metadata, no timeout and no peer.
    pub fn new(
        service: impl Into<Cow<'static, str>>,
        method: impl Into<Cow<'static, str>>,
        serializer: SerializerKind,
        body: Bytes,
    ) -> Self {
        RpcRequest {
            service: service.into(),
            method: method.into(),
            serializer,
            metadata: Metadata::new(),
            body,
            timeout: None,
            peer: None,
        }
    }
}

/// A successful answer: the serialized result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcResponse {
    /// The serialized result, in the request's serializer.
    pub body: Bytes,
}

impl RpcResponse {
    /// Wraps a serialized result.
    pub fn new(body: Bytes) -> Self {
        RpcResponse { body }
    }
}
