//! The status table: every outcome of a call as a [`Code`], and the [`Status`]
//! that carries a server's answer across the wire.
//!
//! One table decides, per code, the byte on the wire, the HTTP status of the
//! JSON gateway, whether the server cannot have run the call (so any call may
//! be retried) and whether the transport failed. Nothing else in brisk keeps
//! its own mapping: an [`RpcError`] names its code
//! ([`RpcError::code`]) and everything else follows from the code.
//!
//! A [`Status`] is what a server sends back instead of an answer: a code, a
//! message for people, and typed [`Detail`]s for programs (the frame limit
//! that was exceeded, the connection limit that was reached, the deadline
//! that passed). The codec (`rpc-codec`) writes it field by field, so nothing
//! is formatted into a string and parsed back on the other side.
//!
//! ```
//! use rpc_core::{Code, RpcError, Status};
//!
//! let err = RpcError::FrameTooLarge { size: 70_000_000, max: 16_777_216 };
//! assert_eq!(err.code(), Code::FrameTooLarge);
//! assert_eq!(err.code().http_status(), 413);
//! // What the server sends, and what the caller gets back.
//! let status = Status::from(&err);
//! assert_eq!(status.into_error("svc", "method"), err);
//! ```

use std::fmt;
use std::time::Duration;

use bytes::Bytes;

use crate::RpcError;

/// The outcome of a call. Codes below [`Code::Internal`] may travel on the
/// wire as the response header's status byte; the local-only codes name
/// failures a client sees without the server's word (they are never sent,
/// and a byte this version does not know reads as [`Code::Internal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
#[non_exhaustive]
pub enum Code {
    /// The call succeeded.
    Ok = 0,
    /// The handler ran and failed; the message is its own.
    Handler = 1,
    /// The worker pool's queue was full; the call did not run.
    ServerBusy = 2,
    /// No service of that name on the server.
    UnknownService = 3,
    /// The service has no method of that name.
    UnknownMethod = 4,
    /// The frame names a serializer the server does not implement.
    UnknownSerializer = 5,
    /// The arguments could not be decoded.
    BadRequest = 6,
    /// The call's deadline passed.
    DeadlineExceeded = 7,
    /// The server is shutting down; the call did not run.
    ShuttingDown = 8,
    /// An authentication interceptor rejected the call.
    Unauthenticated = 9,
    /// A frame over `max_frame_size`.
    FrameTooLarge = 10,
    /// A connection limit was reached; the call did not run.
    TooManyConnections = 11,
    /// The handler's own answer: what was asked for does not exist.
    NotFound = 12,
    /// The handler's own answer: an argument is not acceptable.
    InvalidArgument = 13,
    /// The handler's own answer: the caller may not do this.
    PermissionDenied = 14,
    /// The handler's own answer: what was to be created exists already.
    AlreadyExists = 15,
    /// The handler's own answer: the system is not in a state to do this.
    FailedPrecondition = 16,
    /// The handler's own answer: the service cannot serve now; try later.
    Unavailable = 17,
    /// The caller gave up on the call (it dropped it, or the call it was made
    /// from was cancelled); whatever the server did with it, nobody waits for it.
    Cancelled = 18,
    /// The server knows the method but not the way it was called (a
    /// streaming method called as a unary one, a client stream over HTTP).
    Unimplemented = 19,
    /// Local: no connection to the server could be made.
    ConnectFailed = 100,
    /// Local: the request never left this client.
    NotSent = 101,
    /// Local: the connection broke with the call in flight (it may have run).
    ConnectionLost = 102,
    /// Local: the client, or its pool, has been closed.
    Closed = 103,
    /// Local: a configuration value is invalid.
    InvalidConfig = 104,
    /// A failure inside brisk itself: bytes that are not a brisk frame, a value
    /// that cannot be encoded, an I/O error — or a status byte this version
    /// does not know.
    Internal = 255,
}

impl Code {
    /// Every code, for tables and tests.
    pub const ALL: [Code; 26] = [
        Code::Ok,
        Code::Handler,
        Code::ServerBusy,
        Code::UnknownService,
        Code::UnknownMethod,
        Code::UnknownSerializer,
        Code::BadRequest,
        Code::DeadlineExceeded,
        Code::ShuttingDown,
        Code::Unauthenticated,
        Code::FrameTooLarge,
        Code::TooManyConnections,
        Code::NotFound,
        Code::InvalidArgument,
        Code::PermissionDenied,
        Code::AlreadyExists,
        Code::FailedPrecondition,
        Code::Unavailable,
        Code::Cancelled,
        Code::Unimplemented,
        Code::ConnectFailed,
        Code::NotSent,
        Code::ConnectionLost,
        Code::Closed,
        Code::InvalidConfig,
        Code::Internal,
    ];

    /// The status byte of a response frame.
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// Reads a status byte; any byte this version does not know, and any
    /// local-only code (a server never sends one), is [`Code::Internal`]: a
    /// newer server's code still fails the call, and no byte from a peer can
    /// claim that the call was never sent.
    pub fn from_u8(byte: u8) -> Code {
        Code::ALL
            .iter()
            .copied()
            .find(|c| c.as_u8() == byte && c.is_wire())
            .unwrap_or(Code::Internal)
    }

    /// Whether a server may send this code (the local-only codes, from
    /// [`Code::ConnectFailed`] on, it may not).
    pub fn is_wire(self) -> bool {
        (self as u8) < Code::ConnectFailed as u8 || self == Code::Internal
    }

    /// The row of the table for this code.
    fn row(self) -> Row {
        use Code::*;
        //                                    http  did_not_run transport name
        let (http, did_not_run, transport, name) = match self {
            Ok => (200, false, false, "ok"),
            Handler => (500, false, false, "handler"),
            ServerBusy => (503, false, false, "server_busy"),
            UnknownService => (404, false, false, "unknown_service"),
            UnknownMethod => (404, false, false, "unknown_method"),
            UnknownSerializer => (415, false, false, "unknown_serializer"),
            BadRequest => (400, false, false, "bad_request"),
            DeadlineExceeded => (504, false, false, "deadline_exceeded"),
            ShuttingDown => (503, true, false, "shutting_down"),
            Unauthenticated => (401, false, false, "unauthenticated"),
            FrameTooLarge => (413, false, false, "frame_too_large"),
            TooManyConnections => (503, true, false, "too_many_connections"),
            NotFound => (404, false, false, "not_found"),
            InvalidArgument => (400, false, false, "invalid_argument"),
            PermissionDenied => (403, false, false, "permission_denied"),
            AlreadyExists => (409, false, false, "already_exists"),
            FailedPrecondition => (412, false, false, "failed_precondition"),
            Unavailable => (503, false, false, "unavailable"),
            Cancelled => (499, false, false, "cancelled"),
            Unimplemented => (501, false, false, "unimplemented"),
            ConnectFailed => (502, true, true, "connect_failed"),
            NotSent => (502, true, true, "not_sent"),
            ConnectionLost => (502, false, true, "connection_lost"),
            Closed => (503, false, false, "closed"),
            InvalidConfig => (500, false, false, "invalid_config"),
            Internal => (500, false, false, "internal"),
        };
        Row {
            http,
            did_not_run,
            transport,
            name,
        }
    }

    /// The HTTP status the JSON gateway answers with.
    pub fn http_status(self) -> u16 {
        self.row().http
    }

    /// True when the server cannot have run the call: no connection was
    /// made, the request never left the client, or the server said it did not
    /// run it (shutting down, too many connections). Any call may be retried
    /// after these; after other failures only an idempotent one. A busy
    /// answer also means "not run", but it is load shedding: it goes back to
    /// the caller rather than being retried.
    pub fn server_did_not_run(self) -> bool {
        self.row().did_not_run
    }

    /// True when the transport failed (the connect, the request's write or
    /// the connection): it says something about the server or the network,
    /// not about the call.
    pub fn is_transport(self) -> bool {
        self.row().transport
    }

    /// A stable snake_case name, for logs, metrics and JSON bodies.
    pub fn name(self) -> &'static str {
        self.row().name
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

struct Row {
    http: u16,
    did_not_run: bool,
    transport: bool,
    name: &'static str,
}

/// Typed facts a server attaches to a status, for the caller's program
/// rather than for people.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Detail {
    /// Nothing beyond the code and the message.
    #[default]
    None,
    /// [`Code::FrameTooLarge`]: the frame's size and the limit it exceeded.
    FrameSize {
        /// The frame's size in bytes.
        size: u64,
        /// The `max_frame_size` it exceeded.
        max: u64,
    },
    /// [`Code::TooManyConnections`]: which limit was reached.
    ConnectionLimit {
        /// The server setting: `max_connections` or `max_connections_per_ip`.
        limit: String,
        /// Its value on that server.
        max: u64,
        /// The connection was closed to make room (true) or refused (false).
        evicted: bool,
    },
    /// [`Code::DeadlineExceeded`]: the time the call had.
    Deadline {
        /// The call's timeout.
        timeout: Duration,
    },
    /// [`Code::UnknownSerializer`]: the serializer id the frame named.
    Serializer {
        /// The id.
        id: u8,
    },
}

/// A server's answer that is not a result: a code, a message and details.
///
/// Handlers return one (through [`RpcError::Status`], or any [`RpcError`],
/// which converts) to answer with a code of their own choosing:
///
/// ```
/// use rpc_core::{Code, RpcError, Status};
///
/// fn find(id: u64) -> Result<String, RpcError> {
///     Err(Status::new(Code::NotFound, format!("no message {id}")).into())
/// }
/// let err = find(7).unwrap_err();
/// assert_eq!(err.code(), Code::NotFound);
/// assert_eq!(err.code().http_status(), 404);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    code: Code,
    message: String,
    detail: Detail,
    details: Bytes,
}

impl Status {
    /// A status with a code and a message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Status {
            code,
            message: message.into(),
            detail: Detail::None,
            details: Bytes::new(),
        }
    }

    /// With typed details of the server's own.
    pub fn with_detail(mut self, detail: Detail) -> Self {
        self.detail = detail;
        self
    }

    /// A handler's failure with its own message ([`Code::Handler`]): what a
    /// handler answers when no more specific code fits.
    pub fn handler(message: impl Into<String>) -> Status {
        Status::new(Code::Handler, message)
    }

    /// With opaque details of the application's own (carried as they are).
    pub fn with_details(mut self, details: Bytes) -> Self {
        self.details = details;
        self
    }

    /// The code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The message, for people.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The server's typed details.
    pub fn detail(&self) -> &Detail {
        &self.detail
    }

    /// The application's opaque details.
    pub fn details(&self) -> &Bytes {
        &self.details
    }

    /// The caller's error for this status; `service` and `method` name the
    /// call it answers (a server names neither).
    pub fn into_error(self, service: &str, method: &str) -> RpcError {
        let Status {
            code,
            message,
            detail,
            details: _,
        } = self;
        match (code, detail) {
            (Code::Ok | Code::Handler, _) => RpcError::Handler(message),
            (Code::ServerBusy, _) => RpcError::ServerBusy(message),
            (Code::UnknownService, _) => RpcError::UnknownService(message),
            (Code::UnknownMethod, _) => RpcError::UnknownMethod {
                service: service.to_owned(),
                method: method.to_owned(),
            },
            (Code::UnknownSerializer, Detail::Serializer { id }) => RpcError::UnknownSerializer(id),
            (Code::BadRequest, _) => RpcError::Deserialize {
                serializer: "server",
                reason: message,
                source: None,
            },
            // The call's own deadline; another one (a server layer's
            // timeout, a stream's end) keeps its message, as a status.
            (Code::DeadlineExceeded, Detail::Deadline { timeout }) => RpcError::Timeout {
                service: service.to_owned(),
                method: method.to_owned(),
                timeout,
            },
            (Code::ShuttingDown, _) => RpcError::ShuttingDown,
            (Code::Cancelled, _) => RpcError::Cancelled(message),
            (Code::Unauthenticated, _) => RpcError::Unauthenticated(message),
            (Code::FrameTooLarge, Detail::FrameSize { size, max }) => {
                RpcError::FrameTooLarge { size, max }
            }
            (
                Code::TooManyConnections,
                Detail::ConnectionLimit {
                    limit,
                    max,
                    evicted,
                },
            ) => RpcError::TooManyConnections {
                limit,
                max,
                evicted,
            },
            (code, detail) => RpcError::Status(Status {
                code,
                message,
                detail,
                details: Bytes::new(),
            }),
        }
    }
}

impl From<&RpcError> for Status {
    /// The status a server sends for `err`. An error whose typed details
    /// say everything goes with an empty message: the caller rebuilds the
    /// same error (and its text) from the details, and the frame stays small
    /// enough for any frame limit. Errors that only a client can
    /// have (a failed connect, say) go as [`Code::Handler`] with their text:
    /// a gateway passing one on must not tell its own caller that this server
    /// failed to connect.
    fn from(err: &RpcError) -> Status {
        let text = |m: &str| Status::new(err.code(), m);
        match err {
            RpcError::Status(status) => status.clone(),
            RpcError::Handler(m)
            | RpcError::ServerBusy(m)
            | RpcError::Unauthenticated(m)
            | RpcError::Cancelled(m) => text(m),
            RpcError::UnknownService(s) => text(s),
            RpcError::UnknownMethod { .. } => text(&err.to_string()),
            RpcError::UnknownSerializer(id) => {
                Status::new(Code::UnknownSerializer, "").with_detail(Detail::Serializer { id: *id })
            }
            RpcError::Deserialize { reason, .. } => text(reason),
            RpcError::Compression { .. } => text(&err.to_string()),
            RpcError::Timeout { timeout, .. } => Status::new(Code::DeadlineExceeded, "")
                .with_detail(Detail::Deadline { timeout: *timeout }),
            RpcError::ShuttingDown => text(""),
            RpcError::FrameTooLarge { size, max } => Status::new(Code::FrameTooLarge, "")
                .with_detail(Detail::FrameSize {
                    size: *size,
                    max: *max,
                }),
            RpcError::TooManyConnections {
                limit,
                max,
                evicted,
            } => Status::new(Code::TooManyConnections, "").with_detail(Detail::ConnectionLimit {
                limit: limit.clone(),
                max: *max,
                evicted: *evicted,
            }),
            other => Status::new(Code::Handler, other.to_string()),
        }
    }
}

impl From<RpcError> for Status {
    /// A handler's `?` on a call of its own: the status that error sends.
    fn from(err: RpcError) -> Status {
        match err {
            RpcError::Status(status) => status,
            other => Status::from(&other),
        }
    }
}

impl From<Status> for RpcError {
    fn from(status: Status) -> RpcError {
        RpcError::Status(status)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_reads_back_from_its_byte() {
        for code in Code::ALL.into_iter().filter(|c| c.is_wire()) {
            assert_eq!(Code::from_u8(code.as_u8()), code);
        }
        assert_eq!(
            Code::from_u8(Code::NotSent.as_u8()),
            Code::Internal,
            "a peer cannot claim the call was not sent"
        );
        assert_eq!(Code::from_u8(99), Code::Internal, "an unknown byte");
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = Code::ALL.iter().map(|c| c.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Code::ALL.len());
    }

    #[test]
    fn server_errors_survive_the_round_trip_through_a_status() {
        let errors = [
            RpcError::Handler("boom".into()),
            RpcError::ServerBusy("pool full".into()),
            RpcError::UnknownService("nope".into()),
            RpcError::UnknownSerializer(9),
            RpcError::ShuttingDown,
            RpcError::Cancelled("the caller gave up".into()),
            RpcError::Unauthenticated("bad token".into()),
            RpcError::FrameTooLarge { size: 10, max: 5 },
            RpcError::TooManyConnections {
                limit: "max_connections_per_ip".into(),
                max: 4,
                evicted: true,
            },
            RpcError::Timeout {
                service: "s".into(),
                method: "m".into(),
                timeout: Duration::from_millis(250),
            },
            Status::new(Code::NotFound, "no message 7").into(),
        ];
        for err in errors {
            let back = Status::from(&err).into_error("s", "m");
            assert_eq!(back, err);
            assert_eq!(back.code(), err.code());
        }
    }

    #[test]
    fn a_local_failure_is_sent_as_a_handler_error() {
        let err = RpcError::NotSent {
            peer: "p".into(),
            reason: "closed".into(),
        };
        let status = Status::from(&err);
        assert_eq!(status.code(), Code::Handler);
        assert!(status.message().contains("not sent"));
    }
}
