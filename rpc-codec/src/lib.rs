//! # rpc-codec: brisk's wire format and serializers
//!
//! This crate owns the bytes: how a call is framed on a TCP stream and how its
//! arguments and results are serialized. It knows nothing about sockets, tasks,
//! pools or services — the transport feeds it a buffer and gets frames back.
//!
//! ## Frame layout (version 1, all integers big-endian)
//!
//! ```text
//!  offset size field
//!  0      2    magic        0xB5 0x1C
//!  2      1    version      1
//!  3      1    kind         1 request, 2 response, 3 ping, 4 pong, 5 cancel,
//!                           6 stream open, 7 stream data, 8 stream end,
//!                           9 stream error, 10 credit
//!  4      1    serializer   1 msgpack, 2 protobuf, 3 json
//!  5      1    flags        bits 0-1: the body's compression (0 none, 1 gzip,
//!                           2 zstd); bits 2-3 (requests): the compression the
//!                           caller takes its answer in; bits 4-7 reserved, 0
//!  6      1    status       0 ok; else the error's code (responses only, see `Code`)
//!  7      1    reserved     0
//!  8      8    request id   u64, unique per connection while the call is pending;
//!                           never 0 for a call: a response with id 0 and an error
//!                           status concerns the whole connection (then closed)
//!  16     4    timeout ms   u32, the caller's remaining budget (0 = none); the
//!                           server's deadline for the call is its arrival + this
//!  20     4    meta length  u32, bytes of the meta section below
//!  24     4    body length  u32, bytes of the body
//!  28     ..   meta         service (u8 len + UTF-8), method (u8 len + UTF-8),
//!                           metadata count (u16), then per entry key (u16 len + UTF-8)
//!                           and value (u16 len + UTF-8) — on requests and stream
//!                           opens. On a response that carries
//!                           metadata back, the same layout with empty names; empty
//!                           (length 0) on other responses, pings, pongs and cancels.
//!  ..     ..   body         serialized arguments (request) or result (response);
//!                           on an error status, the rest of the `Status` (message and
//!                           typed details, see `status_body`).
//! ```
//!
//! A `cancel` frame (no meta, no body) names a request the caller no longer
//! waits for (it dropped the call, or gave up at its deadline): the server
//! cancels that call's context and drops its future, or discards the answer
//! of a handler it cannot stop. No answer follows a cancel.
//!
//! ## Streams
//!
//! A streaming call is one request id with up to two flows of items, the
//! caller's and the handler's, on the same connection as the unary calls:
//!
//! ```text
//!  caller                                   server
//!  stream open (names, metadata, args) ──▶
//!  credit n (the caller takes n items) ──▶  (the handler's flow may start)
//!                                       ◀── credit n (client streams: the
//!                                           server takes n of the caller's)
//!  stream data (one item)              ──▶  … within the server's credit
//!                                       ◀── stream data … within the caller's
//!  stream end | stream error           ──▶  the caller's flow is over
//!                                       ◀── stream end | stream error: the
//!                                           call is over
//! ```
//!
//! - **Credit** (body: u32 big-endian) is the only way a sender earns room:
//!   every data frame spends one item, a receiver grants its window when
//!   the stream opens and gives back what its reader consumed. Data past the
//!   credit ends that stream with an error; nothing else on the connection
//!   is affected.
//! - **End / error**: `stream end` has no body; `stream error` carries a
//!   status like an error response (status byte + status body). The server's
//!   end or error finishes the call; the caller's only its own flow.
//! - **Cancel** from the caller abandons the call (the server drops the
//!   handler and sends nothing more); from the server, it tells the caller to
//!   stop sending its items (the handler stopped reading them).
//! - A deadline (`timeout ms` of the open) bounds the whole stream; the
//!   server ends it with `stream error` `DeadlineExceeded`.
//!
//! The decoder reads the 28-byte header first and checks `28 + meta + body`
//! against the configured `max_frame_size` (default 16 MiB) **before** reserving
//! any memory for the frame, so a hostile length prefix costs nothing. A valid
//! header announcing more than that names its request id, so the transport
//! answers that one request `FrameTooLarge` (status 10) and skips the frame's
//! bytes; the connection and the other calls on it carry on. The body is
//! handed out as a [`bytes::Bytes`] slice of the read buffer: no copy. An
//! [`OutFrame`] knows its exact encoded size up front, so the encoder reserves once
//! and the transport writes each frame (or a batch of them) in one go.
//!
//! ## Features
//!
//! * `protobuf` (default): the protobuf serializer, `serializer::protobuf`.
//!   Without it prost is not built, and a body in serializer id 2 is a
//!   serialize / deserialize error naming `protobuf`.
//! * `gzip`, `zstd`: compressed bodies in those algorithms ([`compression`]).
//!   Without one, a body compressed in it fails its call naming the feature,
//!   and a config that asks for it is refused.

#![warn(missing_docs)]

pub mod codec;
pub mod compression;
pub mod frame;
pub mod payload;
pub mod serializer;
pub mod status_body;
pub mod streaming;

pub use codec::{parse_header, read_header, FrameCodec, DEFAULT_MAX_FRAME_SIZE};
pub use frame::{
    Frame, FrameKind, Header, Meta, OutFrame, CONNECTION_REQUEST_ID, HEADER_LEN, MAGIC, VERSION,
};
pub use payload::Payload;
pub use rpc_core::{Code, Status};
pub use serializer::{BodyCodec, SerializerKind};
pub use streaming::{StreamSender, Streaming};
