//! # rpc-core: the vocabulary every brisk crate shares
//!
//! This crate owns the types that cross crate boundaries and nothing that does
//! I/O: the one error enum [`RpcError`], call [`Metadata`], the
//! [`SerializerKind`] identity (the encoding itself lives in `rpc-codec`), the
//! untyped call [`RpcRequest`]/[`RpcResponse`] that interceptors and handlers
//! see, the [`Interceptor`] middleware abstraction, the [`ServiceHandler`] trait
//! `#[brisk::service]` implements, the ends of a stream and the credit that
//! bounds them ([`stream`]), the mode enums ([`ConnectType`],
//! [`WriteMode`], [`Dispatch`], [`Compression`]) and the config-file loader.
//!
//! It must not know about sockets, tasks or thread pools: those belong to
//! `rpc-transport`, `rpc-server` and `rpc-client`.

#![warn(missing_docs)]

pub mod auth;
pub mod call;
pub mod cancel;
pub mod compression;
pub mod config;
pub mod context;
pub mod error;
pub mod handler;
pub mod interceptor;
pub mod metadata;
pub mod modes;
pub mod named_enum;
pub mod serializer;
pub mod spares;
pub mod status;
pub mod stream;
pub mod trace;

pub use auth::{BearerToken, TokenAuth};
pub use call::{RpcRequest, RpcResponse};
pub use cancel::CancelSignal;
pub use compression::{Compression, CompressionConfig};
pub use context::Context;
pub use error::{Cause, Result, RpcError};
pub use handler::{HandlerFuture, MethodKind, ServiceHandler, StreamFuture, StreamIo};
pub use interceptor::{Endpoint, Interceptor, Next};
pub use metadata::Metadata;
pub use modes::{ConnectType, Dispatch, WriteMode};
pub use serializer::SerializerKind;
pub use status::{Code, Detail, Status};
pub use stream::{RawStreaming, StreamSink};

impl From<std::io::Error> for RpcError {
    fn from(e: std::io::Error) -> Self {
        RpcError::io("on socket", e)
    }
}
