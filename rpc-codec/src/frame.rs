//! Frames: the unit brisk puts on the wire.
//!
//! A decoded [`Frame`] borrows nothing and copies nothing: its meta section and body
//! are `Bytes` slices of the connection's read buffer. An outgoing [`OutFrame`] owns
//! its pieces (static names cost no allocation) and knows its encoded length before
//! it is written, so the transport can size its write buffer exactly.
//!
//! Errors travel as a response frame whose status byte is the error's
//! [`Code`] and whose body is the rest of its [`Status`] (see
//! [`status_body`](crate::status_body)): [`OutFrame::error`] writes one and
//! [`Frame::error_status`] reads it back, so the caller sees the error the
//! server produced.

use std::borrow::Cow;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use rpc_core::{Code, Metadata, RpcError, Status};

/// First two bytes of every frame.
pub const MAGIC: [u8; 2] = [0xB5, 0x1C];
/// Wire version this crate speaks.
pub const VERSION: u8 = 1;
/// Size of the fixed header.
pub const HEADER_LEN: usize = 28;

/// The request id of a response about the whole connection, not one call (a
/// connection-level error the server sends just before it closes, such as
/// [`Code::TooManyConnections`]). Clients number their calls from 1.
pub const CONNECTION_REQUEST_ID: u64 = 0;

/// What a frame is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// A call: service, method, metadata and serialized arguments.
    Request = 1,
    /// The answer to the request with the same id.
    Response = 2,
    /// Heartbeat probe; the peer answers with `Pong` and the same id.
    Ping = 3,
    /// Heartbeat answer.
    Pong = 4,
    /// The caller gave up on the request with this id (it dropped the call or
    /// timed out): the server cancels the call and sends no answer. On a
    /// stream, from either side: its sender wants no more of the other
    /// side's items (from the caller, that ends the whole call).
    Cancel = 5,
    /// Opens a streaming call: like a request (service, method, metadata;
    /// the body holds the arguments beside the stream).
    StreamOpen = 6,
    /// One item of a stream, either way.
    StreamData = 7,
    /// The sender's flow of items ended cleanly (from the server: the call
    /// is over).
    StreamEnd = 8,
    /// The sender's flow ended with the error in its status byte and body.
    StreamError = 9,
    /// The sender of this frame takes `n` more items (body: `n`, a u32).
    Credit = 10,
}

impl FrameKind {
    /// Parses the kind byte.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => FrameKind::Request,
            2 => FrameKind::Response,
            3 => FrameKind::Ping,
            4 => FrameKind::Pong,
            5 => FrameKind::Cancel,
            6 => FrameKind::StreamOpen,
            7 => FrameKind::StreamData,
            8 => FrameKind::StreamEnd,
            9 => FrameKind::StreamError,
            10 => FrameKind::Credit,
            _ => return None,
        })
    }
}

/// The fixed 28-byte header, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// What the frame is for.
    pub kind: FrameKind,
    /// Raw serializer id: kept raw so that an unknown id can be answered with an error.
    pub serializer: u8,
    /// Flags: the body's compression and, on a request, the compression
    /// its caller takes the answer in (see [`compression`](crate::compression)).
    pub flags: u8,
    /// Raw status byte; see [`Code::from_u8`].
    pub status: u8,
    /// The call's id on its connection.
    pub request_id: u64,
    /// The caller's remaining budget in ms (0 = none).
    pub timeout_ms: u32,
    /// Bytes of the meta section.
    pub meta_len: u32,
    /// Bytes of the body.
    pub body_len: u32,
}

impl Header {
    /// Total encoded size of the frame this header announces.
    pub fn frame_len(&self) -> u64 {
        HEADER_LEN as u64 + self.meta_len as u64 + self.body_len as u64
    }
}

/// The meta section of a request: who is called, with which metadata.
///
/// The names stay where they arrived: `Meta` keeps the meta section (a slice of
/// the read buffer) and the positions of the two names in it, so parsing a
/// request's meta costs no allocation and one reference count, and the names
/// are validated as UTF-8 once, here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    raw: Bytes,
    service: (u32, u32),
    method: (u32, u32),
    /// Call metadata (string key/values); empty costs nothing.
    pub metadata: Metadata,
}

impl Meta {
    /// The service name.
    pub fn service(&self) -> &str {
        self.name(self.service)
    }

    /// The method name.
    pub fn method(&self) -> &str {
        self.name(self.method)
    }

    fn name(&self, (start, len): (u32, u32)) -> &str {
        let bytes = &self.raw[start as usize..(start + len) as usize];
        // SAFETY: `parse` checked that this range of `raw` is valid UTF-8, and
        // neither `raw` nor the ranges change afterwards (private fields). An
        // empty `Meta` has empty ranges.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    /// Parses a meta section. Empty input is an empty meta (responses, heartbeats).
    pub fn parse(raw: Bytes) -> Result<Meta, RpcError> {
        if raw.is_empty() {
            return Ok(Meta::default());
        }
        let mut at = 0usize;
        let service = take_str(&raw, &mut at, 1, "service")?;
        let method = take_str(&raw, &mut at, 1, "method")?;
        let count = take_len(&raw, &mut at, 2, "metadata count")?;
        let mut metadata = Metadata::new();
        for _ in 0..count {
            let (k, klen) = take_str(&raw, &mut at, 2, "metadata key")?;
            let (v, vlen) = take_str(&raw, &mut at, 2, "metadata value")?;
            let text = |start: u32, len: u32| {
                String::from_utf8_lossy(&raw[start as usize..(start + len) as usize]).into_owned()
            };
            metadata.insert(text(k, klen), text(v, vlen));
        }
        if at != raw.len() {
            return Err(RpcError::Protocol(format!(
                "{} trailing bytes after the meta section",
                raw.len() - at
            )));
        }
        Ok(Meta {
            raw,
            service,
            method,
            metadata,
        })
    }
}

/// Reads a big-endian length of `width` bytes (1 or 2) at `*at`.
fn take_len(raw: &[u8], at: &mut usize, width: usize, what: &str) -> Result<usize, RpcError> {
    let Some(field) = raw.get(*at..*at + width) else {
        return Err(RpcError::Protocol(format!(
            "meta section truncated in {what} length"
        )));
    };
    let len = if width == 1 {
        field[0] as usize
    } else {
        u16::from_be_bytes([field[0], field[1]]) as usize
    };
    *at += width;
    Ok(len)
}

/// Reads a length-prefixed UTF-8 string at `*at`; returns its (start, len).
fn take_str(raw: &[u8], at: &mut usize, width: usize, what: &str) -> Result<(u32, u32), RpcError> {
    let len = take_len(raw, at, width, what)?;
    let start = *at;
    let Some(s) = raw.get(start..start + len) else {
        return Err(RpcError::Protocol(format!(
            "meta section truncated in {what}: need {len} bytes, have {}",
            raw.len() - start
        )));
    };
    // Names are nearly always ASCII: one fast word-wise scan instead of the
    // full UTF-8 state machine.
    if !s.is_ascii() && std::str::from_utf8(s).is_err() {
        return Err(RpcError::Protocol(format!("{what} is not valid UTF-8")));
    }
    *at += len;
    // The meta section is at most a frame (u32 lengths).
    Ok((start as u32, len as u32))
}

/// A decoded frame: header, meta and body (a zero-copy slice of the read buffer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The fixed header.
    pub header: Header,
    /// Service, method and metadata (requests), the answer's metadata
    /// (responses that carry some); empty otherwise.
    pub meta: Meta,
    /// Arguments, result, or an error response's status body.
    pub body: Bytes,
}

impl Frame {
    /// The frame `header` announced, from its encoded bytes (`bytes` starts
    /// with the header and holds exactly `header.frame_len()` bytes). The meta
    /// section and the body are slices of `bytes`: nothing is copied, and
    /// whatever owns `bytes`' memory lives as long as any part of the frame.
    pub fn from_bytes(header: Header, mut bytes: Bytes) -> Result<Frame, RpcError> {
        if bytes.len() as u64 != header.frame_len() {
            return Err(RpcError::Protocol(format!(
                "frame of {} bytes where its header announced {}",
                bytes.len(),
                header.frame_len()
            )));
        }
        bytes.advance(HEADER_LEN);
        let meta = Meta::parse(bytes.split_to(header.meta_len as usize))?;
        Ok(Frame {
            header,
            meta,
            body: bytes,
        })
    }

    /// The response's code ([`Code::Ok`] for an answer).
    pub fn code(&self) -> Code {
        Code::from_u8(self.header.status)
    }

    /// The status an error response carries; `None` for an answer.
    pub fn error_status(&self) -> Option<Status> {
        let code = self.code();
        (code != Code::Ok).then(|| crate::status_body::decode(code, &self.body))
    }

    /// How a `StreamEnd` / `StreamError` frame ends its flow.
    pub fn stream_end(&self) -> Result<(), Status> {
        match self.header.kind {
            FrameKind::StreamError => Err(self.error_status().unwrap_or_else(|| {
                Status::new(Code::Internal, "a stream error frame with status 0")
            })),
            _ => Ok(()),
        }
    }

    /// The items a `Credit` frame grants.
    pub fn credit(&self) -> Result<u32, RpcError> {
        match <[u8; 4]>::try_from(&self.body[..]) {
            Ok(n) => Ok(u32::from_be_bytes(n)),
            Err(_) => Err(RpcError::Protocol(format!(
                "a credit frame's body is a u32, not {} bytes",
                self.body.len()
            ))),
        }
    }
}

/// A frame to be written. Names are `Cow<'static, str>` so a typed client's static
/// service and method names are never allocated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutFrame {
    /// What the frame is for.
    pub kind: FrameKind,
    /// Serializer id of the body.
    pub serializer: u8,
    /// Flags: the body's compression and, on a request, the compression
    /// its caller takes the answer in (see [`compression`](crate::compression)).
    pub flags: u8,
    /// The response's code: [`Code::Ok`], or the error's.
    pub status: Code,
    /// The call's id on its connection (set by the transport for requests).
    pub request_id: u64,
    /// The caller's remaining budget in ms (0 = none).
    pub timeout_ms: u32,
    /// The called service (requests only).
    pub service: Cow<'static, str>,
    /// The called method (requests only).
    pub method: Cow<'static, str>,
    /// Call metadata (requests), or the answer's metadata (responses; an
    /// answer without any has no meta section at all).
    pub metadata: Metadata,
    /// Serialized arguments or result, or an error's status body.
    pub body: Bytes,
}

impl OutFrame {
    /// A request frame.
    pub fn request(
        request_id: u64,
        serializer: u8,
        service: impl Into<Cow<'static, str>>,
        method: impl Into<Cow<'static, str>>,
        body: Bytes,
    ) -> Self {
        OutFrame {
            kind: FrameKind::Request,
            serializer,
            flags: 0,
            status: Code::Ok,
            request_id,
            timeout_ms: 0,
            service: service.into(),
            method: method.into(),
            metadata: Metadata::new(),
            body,
        }
    }

    /// A successful response to `request_id`.
    pub fn response(request_id: u64, serializer: u8, body: Bytes) -> Self {
        OutFrame {
            kind: FrameKind::Response,
            serializer,
            flags: 0,
            status: Code::Ok,
            request_id,
            timeout_ms: 0,
            service: Cow::Borrowed(""),
            method: Cow::Borrowed(""),
            metadata: Metadata::new(),
            body,
        }
    }

    /// An error response to `request_id` carrying `err`.
    pub fn error(request_id: u64, serializer: u8, err: &RpcError) -> Self {
        let status = Status::from(err);
        let mut f = OutFrame::response(request_id, serializer, crate::status_body::encode(&status));
        f.status = status.code();
        f
    }

    /// Opens a streaming call (its id is set by the transport, like a request's).
    pub fn stream_open(
        serializer: u8,
        service: impl Into<Cow<'static, str>>,
        method: impl Into<Cow<'static, str>>,
        body: Bytes,
    ) -> Self {
        let mut f = OutFrame::request(0, serializer, service, method, body);
        f.kind = FrameKind::StreamOpen;
        f
    }

    /// One item of stream `id`.
    pub fn stream_data(id: u64, serializer: u8, body: Bytes) -> Self {
        let mut f = OutFrame::response(id, serializer, body);
        f.kind = FrameKind::StreamData;
        f
    }

    /// The end of this side's flow of stream `id`: a `StreamEnd`, or a
    /// `StreamError` carrying the status.
    pub fn stream_end(id: u64, serializer: u8, end: &Result<(), Status>) -> Self {
        match end {
            Ok(()) => OutFrame::control(FrameKind::StreamEnd, id),
            Err(status) => {
                let mut f = OutFrame::response(id, serializer, crate::status_body::encode(status));
                f.kind = FrameKind::StreamError;
                f.status = status.code();
                f
            }
        }
    }

    /// Grants the other side `n` more items of stream `id`.
    pub fn credit(id: u64, n: u32) -> Self {
        let mut f = OutFrame::response(id, 0, Bytes::copy_from_slice(&n.to_be_bytes()));
        f.kind = FrameKind::Credit;
        f
    }

    /// A bodiless control frame (ping, pong, cancel).
    pub fn control(kind: FrameKind, request_id: u64) -> Self {
        let mut f = OutFrame::response(request_id, 0, Bytes::new());
        f.kind = kind;
        f
    }

    /// Length of the meta section this frame will encode.
    pub fn meta_len(&self) -> usize {
        if !self.has_meta() {
            return 0;
        }
        let mut n = 1 + self.service.len() + 1 + self.method.len() + 2;
        for (k, v) in self.metadata.iter() {
            n += 2 + k.len() + 2 + v.len();
        }
        n
    }

    /// Whether the frame has a meta section: every request, and a response
    /// that carries metadata back (its names are empty).
    fn has_meta(&self) -> bool {
        match self.kind {
            FrameKind::Request | FrameKind::StreamOpen => true,
            FrameKind::Response => !self.metadata.is_empty(),
            _ => false,
        }
    }

    /// Exact number of bytes [`OutFrame::encode`] appends.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.meta_len() + self.body.len()
    }

    /// Appends the encoded frame to `dst`, reserving exactly once.
    /// Fails (writing nothing) when a name or metadata entry is too long for its
    /// length field, or the frame would exceed `max_frame_size`.
    pub fn encode(&self, dst: &mut BytesMut, max_frame_size: usize) -> Result<(), RpcError> {
        let meta_len = self.meta_len();
        let total = HEADER_LEN + meta_len + self.body.len();
        if total > max_frame_size || self.body.len() > u32::MAX as usize {
            return Err(RpcError::FrameTooLarge {
                size: total as u64,
                max: max_frame_size as u64,
            });
        }
        if self.has_meta() {
            if self.service.len() > u8::MAX as usize || self.method.len() > u8::MAX as usize {
                return Err(RpcError::Protocol(
                    "service and method names must be at most 255 bytes".into(),
                ));
            }
            if self.metadata.len() > u16::MAX as usize
                || self
                    .metadata
                    .iter()
                    .any(|(k, v)| k.len() > u16::MAX as usize || v.len() > u16::MAX as usize)
            {
                return Err(RpcError::Protocol(
                    "metadata: at most 65535 entries of keys and values up to 65535 bytes".into(),
                ));
            }
        }
        dst.reserve(total);
        // The fixed header is assembled on the stack and appended in one copy:
        // a dozen `put_*` calls each re-checked the buffer's room.
        let mut header = [0u8; HEADER_LEN];
        header[..2].copy_from_slice(&MAGIC);
        header[2] = VERSION;
        header[3] = self.kind as u8;
        header[4] = self.serializer;
        header[5] = self.flags;
        header[6] = self.status as u8;
        header[8..16].copy_from_slice(&self.request_id.to_be_bytes());
        header[16..20].copy_from_slice(&self.timeout_ms.to_be_bytes());
        header[20..24].copy_from_slice(&(meta_len as u32).to_be_bytes());
        header[24..28].copy_from_slice(&(self.body.len() as u32).to_be_bytes());
        dst.put_slice(&header);
        if self.has_meta() {
            dst.put_u8(self.service.len() as u8);
            dst.put_slice(self.service.as_bytes());
            dst.put_u8(self.method.len() as u8);
            dst.put_slice(self.method.as_bytes());
            dst.put_u16(self.metadata.len() as u16);
            for (k, v) in self.metadata.iter() {
                dst.put_u16(k.len() as u16);
                dst.put_slice(k.as_bytes());
                dst.put_u16(v.len() as u16);
                dst.put_slice(v.as_bytes());
            }
        }
        dst.put_slice(&self.body);
        Ok(())
    }
}
