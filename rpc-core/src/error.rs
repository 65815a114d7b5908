//! The one error type of brisk.
//!
//! Every failure a caller or an operator can see is an [`RpcError`]: a transport
//! failure, a timeout, an answer the server sent back, a bad frame or a bad config.
//! Each message says what failed, where, and what to do about it, because an RPC
//! error is usually read by someone who did not write the code that produced it.
//!
//! `RpcError` is `Clone`: when a connection breaks, the same error is handed to every
//! call that was pending on it. A local failure keeps the error that caused it
//! (a [`Cause`], shared) as its [`source`](std::error::Error::source).
//!
//! Each variant has one [`Code`] ([`RpcError::code`]); what a code means for
//! retries and for HTTP lives in the status table (`status.rs`), not here.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::status::{Code, Status};

/// The error underneath a local failure (an `io::Error`, a serializer's
/// error), shared so that [`RpcError`] stays `Clone`.
///
/// Two causes compare equal when they read the same: errors of other crates
/// are rarely `PartialEq`, and what a test or a caller compares is the text.
#[derive(Clone)]
pub struct Cause(Arc<dyn std::error::Error + Send + Sync + 'static>);

impl Cause {
    /// Wraps an error.
    pub fn new(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Cause(Arc::new(err))
    }

    /// Wraps a boxed error (as `?` and `.into()` make them).
    pub fn from_boxed(err: Box<dyn std::error::Error + Send + Sync + 'static>) -> Self {
        Cause(Arc::from(err))
    }

    /// The error itself, to downcast (`cause.get().downcast_ref::<io::Error>()`).
    pub fn get(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.to_string() == other.to_string()
    }
}

impl Eq for Cause {}

/// Everything that can go wrong in a brisk call, on either side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RpcError {
    /// TCP connect failed (refused, unreachable...).
    #[error(
        "connect to {addr} failed: {reason} (is a brisk server listening there? check the address)"
    )]
    Connect {
        /// The address dialled.
        addr: String,
        /// What went wrong, in words.
        reason: String,
        /// The error underneath, when there is one (the `io::Error` of the connect).
        #[source]
        source: Option<Cause>,
    },

    /// TCP connect did not complete within `connect_timeout`.
    #[error("connect to {addr} timed out after {timeout:?} (raise connect_timeout or check the network)")]
    ConnectTimeout {
        /// The address dialled.
        addr: String,
        /// The time it had.
        timeout: Duration,
    },

    /// The connection broke (peer closed, reset, I/O error, idle timeout) while the call was pending.
    #[error("connection to {peer} closed: {reason}; the call was not answered")]
    ConnectionClosed {
        /// The server address.
        peer: String,
        /// What went wrong, in words.
        reason: String,
    },

    /// Writing the request frame to the socket failed. Frames written with it
    /// in the same batch may have reached the server, so the call may have run.
    #[error("write to {peer} failed: {reason}")]
    Write {
        /// The server address.
        peer: String,
        /// What went wrong, in words.
        reason: String,
    },

    /// The request never left this client: its connection closed, or its
    /// write failed, before the frame was handed to the socket. The server
    /// cannot have run it, so any call may be retried after this.
    #[error("request to {peer} was not sent: {reason}; the server did not run it")]
    NotSent {
        /// The server address.
        peer: String,
        /// What went wrong, in words.
        reason: String,
    },

    /// `WriteMode::Sync`: the frame was not flushed within the call's timeout.
    #[error("write to {peer} did not complete within {timeout:?} (the socket is backed up; the server may be stalled)")]
    WriteTimeout {
        /// The server address.
        peer: String,
        /// The time it had.
        timeout: Duration,
    },

    /// No response within the call's timeout. The pending entry has been freed.
    #[error("call {service}.{method} timed out after {timeout:?} (raise the timeout per call, per method or in the config)")]
    Timeout {
        /// The called service.
        service: String,
        /// The called method.
        method: String,
        /// The time it had.
        timeout: Duration,
    },

    /// The server's worker pool queue was full; the request was rejected without running.
    #[error("server busy: {0} (the worker pool queue is full; retry later, or raise queue_size / max_threads)")]
    ServerBusy(String),

    /// The server has no service with this name.
    #[error("unknown service `{0}` (check the service name and that the server registered it)")]
    UnknownService(String),

    /// The service exists but has no method with this name.
    #[error("unknown method `{method}` on service `{service}`")]
    UnknownMethod {
        /// The called service.
        service: String,
        /// The called method.
        method: String,
    },

    /// The frame names a serializer id that this side does not implement.
    #[error("unknown serializer id {0} (supported: 1 = msgpack, 2 = protobuf, 3 = json)")]
    UnknownSerializer(u8),

    /// A frame announced a size above `max_frame_size`; nothing was allocated for it.
    #[error("frame of {size} bytes exceeds max_frame_size {max} (raise max_frame_size on both sides if this is legitimate)")]
    FrameTooLarge {
        /// The frame's size in bytes.
        size: u64,
        /// The limit.
        max: u64,
    },

    /// Bytes on the wire that are not a valid brisk frame.
    #[error("protocol error: {0}")]
    Protocol(String),

    /// A value could not be encoded with the chosen serializer.
    #[error("serialize failed ({serializer}): {reason}")]
    Serialize {
        /// The serializer's name.
        serializer: &'static str,
        /// What went wrong, in words.
        reason: String,
        /// The serializer's own error.
        #[source]
        source: Option<Cause>,
    },

    /// Bytes could not be decoded into the expected type with the chosen serializer.
    #[error("deserialize failed ({serializer}): {reason} (do client and server agree on the method's types?)")]
    Deserialize {
        /// The serializer's name.
        serializer: &'static str,
        /// What went wrong, in words.
        reason: String,
        /// The serializer's own error (none when the server reported it).
        #[source]
        source: Option<Cause>,
    },

    /// A compressed body could not be opened: corrupt data, an algorithm
    /// this build does not have, or more than `max_frame_size` once
    /// decompressed. Only that call fails; its connection carries on.
    #[error("{algorithm} body: {reason}")]
    Compression {
        /// The algorithm's name (`gzip`, `zstd`) or the flags that named none.
        algorithm: &'static str,
        /// What went wrong, in words.
        reason: String,
        /// The decompressor's own error.
        #[source]
        source: Option<Cause>,
    },

    /// The handler ran and returned an error; its message is carried back verbatim.
    #[error("handler error: {0}")]
    Handler(String),

    /// The handler answered with a code of its own choosing (`NotFound`,
    /// `InvalidArgument`, …): see [`Status`].
    #[error("{0}")]
    Status(Status),

    /// The call was given up before its answer: the context it was made
    /// from was cancelled, or the server dropped it at its caller's word.
    #[error("cancelled: {0}")]
    Cancelled(String),

    /// The server rejected the call because it is shutting down.
    #[error("server is shutting down; retry against another server")]
    ShuttingDown,

    /// The server refused this connection, or closed it to make room, because a
    /// connection limit was reached. The server did not run any call the
    /// connection carried when it closed; another server (or this one, later)
    /// can take the call.
    #[error("{}", too_many_connections_message(.limit, *.max, *.evicted))]
    TooManyConnections {
        /// The server setting that was reached: `max_connections` or `max_connections_per_ip`.
        limit: String,
        /// Its value on that server.
        max: u64,
        /// True when the connection had been open and was closed to make room
        /// for a new one (it had gone longest without a call); false when it
        /// was refused on arrival.
        evicted: bool,
    },

    /// The call was rejected by an authentication interceptor.
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),

    /// The client (or its pool) has been closed.
    #[error("client closed: {0}")]
    Closed(String),

    /// A configuration value is invalid. `key` is the config key as written in the file.
    #[error("invalid config value for `{key}`: {reason}")]
    Config {
        /// The config key, as written in the file.
        key: String,
        /// What went wrong, in words.
        reason: String,
    },

    /// Any other I/O failure, with where it happened.
    #[error("i/o error {context}: {reason}")]
    Io {
        /// What was being done.
        context: String,
        /// What went wrong, in words.
        reason: String,
        /// The `io::Error` (or other error) underneath, when there is one.
        #[source]
        source: Option<Cause>,
    },
}

impl RpcError {
    /// The error's code in the status table.
    pub fn code(&self) -> Code {
        match self {
            RpcError::Connect { .. } | RpcError::ConnectTimeout { .. } => Code::ConnectFailed,
            RpcError::ConnectionClosed { .. } | RpcError::Write { .. } => Code::ConnectionLost,
            RpcError::NotSent { .. } => Code::NotSent,
            RpcError::WriteTimeout { .. } | RpcError::Timeout { .. } => Code::DeadlineExceeded,
            RpcError::ServerBusy(_) => Code::ServerBusy,
            RpcError::UnknownService(_) => Code::UnknownService,
            RpcError::UnknownMethod { .. } => Code::UnknownMethod,
            RpcError::UnknownSerializer(_) => Code::UnknownSerializer,
            RpcError::FrameTooLarge { .. } => Code::FrameTooLarge,
            RpcError::Deserialize { .. } | RpcError::Protocol(_) | RpcError::Compression { .. } => {
                Code::BadRequest
            }
            RpcError::Handler(_) => Code::Handler,
            RpcError::Status(status) => status.code(),
            RpcError::ShuttingDown => Code::ShuttingDown,
            RpcError::Cancelled(_) => Code::Cancelled,
            RpcError::TooManyConnections { .. } => Code::TooManyConnections,
            RpcError::Unauthenticated(_) => Code::Unauthenticated,
            RpcError::Closed(_) => Code::Closed,
            RpcError::Config { .. } => Code::InvalidConfig,
            RpcError::Serialize { .. } | RpcError::Io { .. } => Code::Internal,
        }
    }

    /// True when the transport failed: the connect, the connection or the
    /// write ([`Code::is_transport`]). It says something about the server or
    /// the network, not about the call (a client marks that server down for a
    /// while). Whether the call may have run is
    /// [`server_did_not_run`](Self::server_did_not_run).
    pub fn is_transport(&self) -> bool {
        self.code().is_transport()
    }

    /// True when the server cannot have run the call
    /// ([`Code::server_did_not_run`]): any call may be retried after these;
    /// after other transport failures only an idempotent one.
    pub fn server_did_not_run(&self) -> bool {
        self.code().server_did_not_run()
    }

    /// Shorthand for an [`RpcError::Config`].
    pub fn config(key: impl Into<String>, reason: impl Into<String>) -> Self {
        RpcError::Config {
            key: key.into(),
            reason: reason.into(),
        }
    }

    /// Shorthand for an [`RpcError::Io`] caused by `err`.
    pub fn io(context: impl Into<String>, err: std::io::Error) -> Self {
        RpcError::Io {
            context: context.into(),
            reason: err.to_string(),
            source: Some(Cause::new(err)),
        }
    }

    /// Shorthand for an [`RpcError::Io`] with no error underneath.
    pub fn io_msg(context: impl Into<String>, reason: impl Into<String>) -> Self {
        RpcError::Io {
            context: context.into(),
            reason: reason.into(),
            source: None,
        }
    }
}

/// The text of [`RpcError::TooManyConnections`]: which limit, its value, and
/// what the reader can do.
fn too_many_connections_message(limit: &str, max: u64, evicted: bool) -> String {
    let what = if evicted {
        "closed this connection to make room for a new one (it had gone longest without a call)"
    } else {
        "refused this connection"
    };
    format!(
        "too many connections: the server {what}: its {limit} = {max} is reached \
         (the server did not run the call; retry on another server or later, \
         use fewer connections per client, or raise {limit} on the server)"
    )
}

/// `Result` with [`RpcError`].
pub type Result<T, E = RpcError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transport_failures_are_retryable() {
        let closed = RpcError::ConnectionClosed {
            peer: "127.0.0.1:1".into(),
            reason: "reset".into(),
        };
        assert!(closed.is_transport());
        assert!(
            !closed.server_did_not_run(),
            "a closed connection may have run the call"
        );
        let not_sent = RpcError::NotSent {
            peer: "127.0.0.1:1".into(),
            reason: "connection closed".into(),
        };
        assert!(not_sent.is_transport() && not_sent.server_did_not_run());
        assert!(RpcError::ShuttingDown.server_did_not_run());
        assert!(!RpcError::ServerBusy("full".into()).server_did_not_run());
        assert!(!RpcError::Handler("boom".into()).is_transport());
        assert!(!RpcError::ServerBusy("full".into()).is_transport());
        assert!(!RpcError::Timeout {
            service: "s".into(),
            method: "m".into(),
            timeout: Duration::from_millis(1)
        }
        .is_transport());
    }

    #[test]
    fn too_many_connections_names_the_limit_and_did_not_run() {
        let e = RpcError::TooManyConnections {
            limit: "max_connections_per_ip".into(),
            max: 4,
            evicted: false,
        };
        let text = e.to_string();
        assert!(text.contains("max_connections_per_ip = 4"), "{text}");
        assert!(text.contains("refused"), "{text}");
        assert!(e.server_did_not_run());
        assert!(!e.is_transport());
        let evicted = RpcError::TooManyConnections {
            limit: "max_connections".into(),
            max: 64,
            evicted: true,
        };
        assert!(evicted.to_string().contains("max_connections = 64"));
        assert!(evicted.to_string().contains("without a call"));
        let closed = RpcError::ConnectionClosed {
            peer: "p".into(),
            reason: "reset".into(),
        };
        assert!(!closed.server_did_not_run(), "it may have run");
        assert!(RpcError::ShuttingDown.server_did_not_run());
    }

    #[test]
    fn messages_name_the_key_and_the_fix() {
        let e = RpcError::config("client.connections", "must be at least 1");
        assert_eq!(
            e.to_string(),
            "invalid config value for `client.connections`: must be at least 1"
        );
        let e = RpcError::FrameTooLarge { size: 10, max: 5 };
        assert!(e.to_string().contains("max_frame_size"));
    }

    #[test]
    fn a_local_failure_keeps_its_cause() {
        use std::error::Error as _;
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = RpcError::io("connecting", io);
        let source = e.source().expect("the io error is the source");
        let cause = source.downcast_ref::<Cause>().expect("a Cause");
        let io = cause
            .get()
            .downcast_ref::<std::io::Error>()
            .expect("an io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
        assert_eq!(e.clone(), e, "still Clone and Eq");
    }
}
