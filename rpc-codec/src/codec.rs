//! [`FrameCodec`]: the tokio-util `Decoder`/`Encoder` for brisk frames.
//!
//! Decoding is two-step so that nothing is allocated for a frame before its size
//! is known to be acceptable: [`parse_header`] validates the fixed header and the
//! announced total against `max_frame_size`; only then does the decoder wait for
//! (and the transport reserve room for) the rest. The decoded body is split off
//! the read buffer as `Bytes`, so large payloads are never copied.

use bytes::{Buf, BytesMut};
use rpc_core::RpcError;
use tokio_util::codec::{Decoder, Encoder};

use crate::frame::{Frame, FrameKind, Header, OutFrame, HEADER_LEN, MAGIC, VERSION};

/// Default upper bound on one frame, header included: 16 MiB.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 16 * 1024 * 1024;

/// Parses and validates the fixed header at the start of `buf`.
///
/// Returns `Ok(None)` when fewer than [`HEADER_LEN`] bytes are buffered. Fails on a
/// bad magic, an unsupported version, an unknown kind, or a frame larger than
/// `max_frame_size`.
pub fn parse_header(buf: &[u8], max_frame_size: usize) -> Result<Option<Header>, RpcError> {
    let Some(header) = read_header(buf)? else {
        return Ok(None);
    };
    let total = header.frame_len();
    if total > max_frame_size as u64 {
        return Err(RpcError::FrameTooLarge {
            size: total,
            max: max_frame_size as u64,
        });
    }
    Ok(Some(header))
}

/// Parses the fixed header at the start of `buf` without judging its size.
///
/// Returns `Ok(None)` when fewer than [`HEADER_LEN`] bytes are buffered. Fails on
/// a bad magic (as soon as two bytes are there), an unsupported version or an
/// unknown kind: bytes that are not a brisk frame, after which the stream cannot
/// be trusted. A valid header that announces too large a frame is *not* an error
/// here: its request id is good, so a transport can answer that one request and
/// skip the frame's bytes (see `rpc_transport::FrameReader`).
pub fn read_header(buf: &[u8]) -> Result<Option<Header>, RpcError> {
    if buf.len() < HEADER_LEN {
        // Reject garbage as early as the first two bytes allow.
        if buf.len() >= 2 && buf[..2] != MAGIC {
            return Err(bad_magic(buf));
        }
        return Ok(None);
    }
    if buf[..2] != MAGIC {
        return Err(bad_magic(buf));
    }
    if buf[2] != VERSION {
        return Err(RpcError::Protocol(format!(
            "unsupported wire version {} (this build speaks version {VERSION})",
            buf[2]
        )));
    }
    let kind = FrameKind::from_u8(buf[3])
        .ok_or_else(|| RpcError::Protocol(format!("unknown frame kind {}", buf[3])))?;
    let mut rest = &buf[8..HEADER_LEN];
    Ok(Some(Header {
        kind,
        serializer: buf[4],
        flags: buf[5],
        status: buf[6],
        request_id: rest.get_u64(),
        timeout_ms: rest.get_u32(),
        meta_len: rest.get_u32(),
        body_len: rest.get_u32(),
    }))
}

fn bad_magic(buf: &[u8]) -> RpcError {
    RpcError::Protocol(format!(
        "bad magic 0x{:02X}{:02X}, expected 0xB51C (is the peer speaking brisk's binary protocol?)",
        buf[0], buf[1]
    ))
}

/// Encoder and decoder of brisk frames with a configurable maximum frame size.
#[derive(Debug, Clone, Copy)]
pub struct FrameCodec {
    max_frame_size: usize,
}

impl Default for FrameCodec {
    fn default() -> Self {
        FrameCodec::new(DEFAULT_MAX_FRAME_SIZE)
    }
}

impl FrameCodec {
    /// A codec that rejects frames above `max_frame_size` bytes (header included).
    pub fn new(max_frame_size: usize) -> Self {
        FrameCodec {
            max_frame_size: max_frame_size.max(HEADER_LEN),
        }
    }

    /// The configured limit.
    pub fn max_frame_size(&self) -> usize {
        self.max_frame_size
    }

    /// How many bytes the frame at the start of `buf` needs in total, once its header
    /// is buffered (used by the transport to size its next read).
    pub fn pending_frame_len(&self, buf: &[u8]) -> Result<Option<usize>, RpcError> {
        Ok(parse_header(buf, self.max_frame_size)?.map(|h| h.frame_len() as usize))
    }
}

impl Decoder for FrameCodec {
    type Item = Frame;
    type Error = RpcError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, RpcError> {
        let Some(header) = parse_header(src, self.max_frame_size)? else {
            return Ok(None);
        };
        let total = header.frame_len() as usize;
        if src.len() < total {
            // Header already validated: reserving up to `max_frame_size` is safe.
            src.reserve(total - src.len());
            return Ok(None);
        }
        Frame::from_bytes(header, src.split_to(total).freeze()).map(Some)
    }
}

impl Encoder<&OutFrame> for FrameCodec {
    type Error = RpcError;

    fn encode(&mut self, item: &OutFrame, dst: &mut BytesMut) -> Result<(), RpcError> {
        item.encode(dst, self.max_frame_size)
    }
}

impl Encoder<OutFrame> for FrameCodec {
    type Error = RpcError;

    fn encode(&mut self, item: OutFrame, dst: &mut BytesMut) -> Result<(), RpcError> {
        item.encode(dst, self.max_frame_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use proptest::prelude::*;
    use rpc_core::Code;
    use rpc_core::{Metadata, Status};

    fn encode(f: &OutFrame) -> BytesMut {
        let mut b = BytesMut::new();
        f.encode(&mut b, DEFAULT_MAX_FRAME_SIZE).unwrap();
        assert_eq!(b.len(), f.encoded_len());
        b
    }

    #[test]
    fn a_response_carries_its_metadata_back() {
        let mut f = OutFrame::response(7, 1, Bytes::from_static(b"ok"));
        assert_eq!(f.meta_len(), 0, "no metadata, no meta section");
        f.metadata.insert("served-by", "node-1");
        let mut buf = encode(&f);
        let d = FrameCodec::default().decode(&mut buf).unwrap().unwrap();
        assert_eq!(d.header.kind, FrameKind::Response);
        assert_eq!(d.meta.service(), "");
        assert_eq!(d.meta.metadata.get("served-by"), Some("node-1"));
        assert_eq!(&d.body[..], b"ok");
    }

    #[test]
    fn request_round_trip_with_metadata() {
        let mut f = OutFrame::request(42, 1, "Hello", "greet", Bytes::from_static(b"abc"));
        f.timeout_ms = 1500;
        f.metadata.insert("token", "s3cret");
        let mut buf = encode(&f);
        let d = FrameCodec::default().decode(&mut buf).unwrap().unwrap();
        assert!(buf.is_empty());
        assert_eq!(d.header.kind, FrameKind::Request);
        assert_eq!(d.header.request_id, 42);
        assert_eq!(d.header.timeout_ms, 1500);
        assert_eq!(d.meta.service(), "Hello");
        assert_eq!(d.meta.method(), "greet");
        assert_eq!(d.meta.metadata.get("token"), Some("s3cret"));
        assert_eq!(&d.body[..], b"abc");
    }

    #[test]
    fn partial_input_waits_then_decodes() {
        let f = OutFrame::response(7, 3, Bytes::from(vec![9u8; 1000]));
        let full = encode(&f);
        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::new();
        for chunk in full.chunks(100) {
            assert!(buf.is_empty() || codec.decode(&mut buf).unwrap().is_none());
            buf.extend_from_slice(chunk);
        }
        let d = codec.decode(&mut buf).unwrap().unwrap();
        assert_eq!(d.body.len(), 1000);
        assert_eq!(d.code(), Code::Ok);
    }

    #[test]
    fn oversize_length_is_rejected_from_the_header_alone() {
        let mut f = OutFrame::response(1, 1, Bytes::new());
        f.body = Bytes::new();
        let mut buf = encode(&f);
        // Forge a 3 GiB body length.
        buf[24..28].copy_from_slice(&(3u32 << 30).to_be_bytes());
        let cap_before = buf.capacity();
        let err = FrameCodec::new(1024).decode(&mut buf).unwrap_err();
        assert!(matches!(err, RpcError::FrameTooLarge { max: 1024, .. }));
        assert_eq!(
            buf.capacity(),
            cap_before,
            "nothing reserved for a rejected frame"
        );
    }

    #[test]
    fn garbage_is_rejected_early() {
        let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\n"[..]);
        let err = FrameCodec::default().decode(&mut buf).unwrap_err();
        assert!(err.to_string().contains("bad magic"), "{err}");
    }

    #[test]
    fn encoder_refuses_frames_over_the_limit() {
        let f = OutFrame::response(1, 1, Bytes::from(vec![0u8; 2048]));
        let mut b = BytesMut::new();
        let err = f.encode(&mut b, 1024).unwrap_err();
        assert!(matches!(err, RpcError::FrameTooLarge { .. }));
        assert!(b.is_empty());
    }

    #[test]
    fn errors_cross_the_wire_as_the_same_variant() {
        let cases = vec![
            RpcError::Handler("boom".into()),
            RpcError::ServerBusy("queue full (100)".into()),
            RpcError::UnknownService("Nope".into()),
            RpcError::UnknownMethod {
                service: "S".into(),
                method: "m".into(),
            },
            RpcError::UnknownSerializer(9),
            RpcError::ShuttingDown,
            RpcError::Unauthenticated("no token".into()),
            RpcError::TooManyConnections {
                limit: "max_connections_per_ip".into(),
                max: 8,
                evicted: false,
            },
            RpcError::TooManyConnections {
                limit: "max_connections".into(),
                max: 64,
                evicted: true,
            },
        ];
        for e in cases {
            let f = OutFrame::error(5, 1, &e);
            let mut buf = encode(&f);
            let d = FrameCodec::default().decode(&mut buf).unwrap().unwrap();
            let status = d.error_status().expect("an error status");
            assert_eq!(status.into_error("S", "m"), e);
        }
    }

    fn arb_kind() -> impl Strategy<Value = FrameKind> {
        prop_oneof![
            Just(FrameKind::Request),
            Just(FrameKind::Response),
            Just(FrameKind::Ping),
            Just(FrameKind::Pong),
            Just(FrameKind::Cancel),
            Just(FrameKind::StreamOpen),
            Just(FrameKind::StreamData),
            Just(FrameKind::StreamEnd),
            Just(FrameKind::StreamError),
            Just(FrameKind::Credit),
        ]
    }

    /// One frame of a stream's life, as its constructors build it.
    fn arb_stream_frame() -> impl Strategy<Value = OutFrame> {
        let body = proptest::collection::vec(any::<u8>(), 0..2048).prop_map(Bytes::from);
        prop_oneof![
            ("[a-zA-Z]{1,20}", "[a-z_]{1,20}", body.clone())
                .prop_map(|(s, m, b)| { OutFrame::stream_open(1, s, m, b) }),
            (any::<u64>(), body).prop_map(|(id, b)| OutFrame::stream_data(id, 2, b)),
            any::<u64>().prop_map(|id| OutFrame::stream_end(id, 1, &Ok(()))),
            (any::<u64>(), 1u8..=18, ".{0,40}").prop_map(|(id, code, msg)| {
                OutFrame::stream_end(id, 1, &Err(Status::new(Code::from_u8(code), msg)))
            }),
            (any::<u64>(), any::<u32>()).prop_map(|(id, n)| OutFrame::credit(id, n)),
            any::<u64>().prop_map(|id| OutFrame::control(FrameKind::Cancel, id)),
        ]
    }

    proptest! {
        #[test]
        fn every_kind_round_trips(
            kind in arb_kind(),
            id in any::<u64>(),
            ser in 1u8..=3,
            timeout in any::<u32>(),
            service in "[a-zA-Z]{0,40}",
            method in "[a-z_]{0,40}",
            md in proptest::collection::vec(("[a-z]{1,8}", ".{0,16}"), 0..4),
            body in proptest::collection::vec(any::<u8>(), 0..4096),
        ) {
            let mut metadata = Metadata::new();
            for (k, v) in &md { metadata.insert(k.clone(), v.clone()); }
            let f = OutFrame {
                kind, serializer: ser, flags: 0, status: Code::Ok, request_id: id,
                timeout_ms: timeout, service: service.clone().into(), method: method.clone().into(),
                metadata: metadata.clone(), body: Bytes::from(body.clone()),
            };
            let mut buf = encode(&f);
            let d = FrameCodec::default().decode(&mut buf).unwrap().unwrap();
            prop_assert_eq!(d.header.kind, kind);
            prop_assert_eq!(d.header.request_id, id);
            prop_assert_eq!(d.header.timeout_ms, timeout);
            prop_assert_eq!(&d.body[..], &body[..]);
            if matches!(kind, FrameKind::Request | FrameKind::StreamOpen) {
                prop_assert_eq!(d.meta.service(), service.as_str());
                prop_assert_eq!(d.meta.method(), method.as_str());
                prop_assert_eq!(d.meta.metadata, metadata);
            } else if kind == FrameKind::Response {
                // An answer carries its metadata back (and no meta at all without).
                prop_assert_eq!(d.meta.metadata, metadata);
                prop_assert_eq!(d.header.meta_len == 0, md.is_empty());
            } else {
                prop_assert_eq!(d.header.meta_len, 0);
            }
        }

        /// A stream's frames, back to back in one buffer, decode to what was
        /// sent, in order: names, items, ends with their status, credit.
        #[test]
        fn stream_frames_round_trip_in_order(
            frames in proptest::collection::vec(arb_stream_frame(), 1..12),
        ) {
            let mut buf = BytesMut::new();
            for f in &frames {
                f.encode(&mut buf, DEFAULT_MAX_FRAME_SIZE).unwrap();
            }
            let mut codec = FrameCodec::default();
            for f in &frames {
                let d = codec.decode(&mut buf).unwrap().unwrap();
                prop_assert_eq!(d.header.kind, f.kind);
                prop_assert_eq!(d.header.request_id, f.request_id);
                match f.kind {
                    FrameKind::StreamOpen => {
                        prop_assert_eq!(d.meta.service(), &f.service[..]);
                        prop_assert_eq!(d.meta.method(), &f.method[..]);
                        prop_assert_eq!(&d.body, &f.body);
                    }
                    FrameKind::StreamData => prop_assert_eq!(&d.body, &f.body),
                    FrameKind::StreamEnd => prop_assert!(d.stream_end().is_ok()),
                    FrameKind::StreamError => {
                        let status = d.stream_end().unwrap_err();
                        prop_assert_eq!(status.code(), f.status);
                    }
                    FrameKind::Credit => {
                        let n = u32::from_be_bytes(f.body[..].try_into().unwrap());
                        prop_assert_eq!(d.credit().unwrap(), n);
                    }
                    _ => prop_assert_eq!(d.header.meta_len, 0),
                }
            }
            prop_assert!(buf.is_empty());
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut buf = BytesMut::from(&data[..]);
            let mut codec = FrameCodec::new(4096);
            for _ in 0..8 {
                match codec.decode(&mut buf) {
                    Ok(Some(_)) => continue,
                    _ => break,
                }
            }
        }

        #[test]
        fn valid_header_with_arbitrary_tail_never_panics(
            meta in proptest::collection::vec(any::<u8>(), 0..64),
            body in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut buf = BytesMut::new();
            buf.extend_from_slice(&MAGIC);
            buf.extend_from_slice(&[VERSION, 1, 1, 0, 0, 0]);
            buf.extend_from_slice(&1u64.to_be_bytes());
            buf.extend_from_slice(&0u32.to_be_bytes());
            buf.extend_from_slice(&(meta.len() as u32).to_be_bytes());
            buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
            buf.extend_from_slice(&meta);
            buf.extend_from_slice(&body);
            let _ = FrameCodec::default().decode(&mut buf);
        }
    }
}
