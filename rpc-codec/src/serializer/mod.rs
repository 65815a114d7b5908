//! Serializers: how arguments and results become a frame body.
//!
//! Three are built in and chosen per call by the id in the frame header; the
//! server always answers in the serializer the request used, so one server
//! serves clients of all three at once.
//!
//! | id | name | crate | notes |
//! |----|------|-------|-------|
//! | 1 | `msgpack` | rmp-serde | the default: compact, fast, self-describing |
//! | 2 | `protobuf` | prost's wire primitives | real protobuf bytes for serde types; the `protobuf` module, behind the default `protobuf` feature |
//! | 3 | `json` | serde_json | readable, what the HTTP protocol speaks |
//!
//! Arguments are serialized as a tuple in declaration order; a method without
//! arguments sends `()`.
//!
//! Built without the `protobuf` feature, the crate still knows the protobuf id
//! (it lives in `rpc-core`), but encoding or decoding with it is a
//! [`RpcError::Serialize`] / [`RpcError::Deserialize`] naming `protobuf`, so a
//! peer that asks for it gets an error answer, not a dropped connection.

#[cfg(feature = "protobuf")]
pub mod protobuf;

use std::cell::RefCell;

use bytes::{BufMut, Bytes, BytesMut};
pub use rpc_core::SerializerKind;
use rpc_core::{Cause, RpcError};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Encoding and decoding with a [`SerializerKind`].
///
/// Implemented for `SerializerKind` (whose identity lives in `rpc-core`, so that
/// crates which only name a serializer need not depend on the encoders).
pub trait BodyCodec: Copy {
    /// Appends `value` encoded with this serializer to `out`.
    fn encode<T: Serialize + ?Sized>(self, value: &T, out: &mut BytesMut) -> Result<(), RpcError>;
    /// Decodes a `T` from `bytes` with this serializer.
    fn decode<T: DeserializeOwned>(self, bytes: &[u8]) -> Result<T, RpcError>;

    /// Decodes a `T` from a frame body; [`Payload`](crate::Payload) values in it
    /// become slices of `body` instead of copies where the serializer allows.
    fn decode_bytes<T: DeserializeOwned>(self, body: &bytes::Bytes) -> Result<T, RpcError> {
        crate::payload::with_body(body, || self.decode(body))
    }

    /// Encodes `value` into a frame body of its own, carved out of a
    /// thread-local arena instead of a fresh allocation (see [`encode_body`]).
    fn encode_body<T: Serialize + ?Sized>(self, value: &T) -> Result<Bytes, RpcError> {
        encode_body(value, |v, out| self.encode(v, out))
    }
}

/// How much room the arena takes at a time.
const ARENA_CHUNK: usize = 64 * 1024;

/// A thread's body arena and the size of the last body encoded in it.
struct Arena {
    buf: BytesMut,
    /// The previous chunk, while bodies split off it may still be in use.
    spare: BytesMut,
    last_len: usize,
}

/// The largest body whose allocation the arena keeps sharing (see [`encode_body`]).
pub const ARENA_KEEP: usize = 1 << 20;

thread_local! {
    /// Bodies are encoded here and split off; see [`encode_body`].
    static ARENA: RefCell<Arena> = RefCell::new(Arena {
        buf: BytesMut::new(),
        spare: BytesMut::new(),
        last_len: 0,
    });
}

/// Runs `encode` into this thread's body arena and splits the result off as a
/// `Bytes` that shares the arena's buffer.
///
/// A `BytesMut` of its own for every call's request (client) and answer
/// (server) body would cost a malloc and a free per call. A body lives only until
/// the writer has copied it into its batch, so the arena hands out slices of one
/// 64 KiB buffer, and once every slice has been dropped `reserve` takes the
/// buffer back in place: a busy thread encodes without allocating. A body that
/// someone keeps (an interceptor holding a request) only keeps its chunk alive;
/// the arena moves on to a new one.
///
/// Room is reserved up front for twice the last body encoded on this thread:
/// large bodies (100 KiB echoes) would otherwise outgrow the arena while being
/// written, reallocating and copying what was written so far, on every call.
///
/// A body larger than [`ARENA_KEEP`] takes the arena's buffer with it: it owns
/// its allocation alone and frees it when dropped. Otherwise every thread that
/// once encoded a 16 MiB answer would keep 16 MiB (twice, with the spare) for
/// as long as it lives — measured: 50 MiB held by three worker threads of an
/// idle server.
pub fn encode_body<T: ?Sized>(
    value: &T,
    encode: impl FnOnce(&T, &mut BytesMut) -> Result<(), RpcError>,
) -> Result<Bytes, RpcError> {
    ARENA.with(|arena| {
        // A `Serialize` impl that itself encodes a body (re-entry) gets a
        // buffer of its own instead of a borrow panic.
        let Ok(mut arena) = arena.try_borrow_mut() else {
            let mut out = BytesMut::new();
            encode(value, &mut out)?;
            return Ok(out.freeze());
        };
        let Arena {
            buf,
            spare,
            last_len,
        } = &mut *arena;
        // Capped: one huge body should not make the next small ones reserve huge chunks.
        let want = (*last_len).clamp(ARENA_CHUNK / 8, ARENA_KEEP);
        if buf.capacity() < want && !buf.try_reclaim(want) {
            // Bodies of this chunk are still in use (a call keeps its request
            // until answered): take the previous chunk back if its bodies are
            // gone, else a new one, keeping this one as the spare. Allocating
            // anew each time cost large bodies a page fault every few KiB
            // (glibc hands back memory it has just returned to the kernel).
            if spare.try_reclaim(want) {
                std::mem::swap(buf, spare);
            } else {
                let fresh = BytesMut::with_capacity(ARENA_CHUNK.max(2 * want));
                *spare = std::mem::replace(buf, fresh);
            }
        }
        match encode(value, buf) {
            Ok(()) => {
                *last_len = buf.len();
                if buf.len() > ARENA_KEEP {
                    return Ok(std::mem::take(buf).freeze());
                }
                Ok(buf.split().freeze())
            }
            Err(e) => {
                buf.clear();
                Err(e)
            }
        }
    })
}

/// The error reason for protobuf in a build without the `protobuf` feature.
#[cfg(not(feature = "protobuf"))]
const WITHOUT_PROTOBUF: &str = "rpc-codec was built without its `protobuf` feature";

impl BodyCodec for SerializerKind {
    fn encode<T: Serialize + ?Sized>(self, value: &T, out: &mut BytesMut) -> Result<(), RpcError> {
        let serializer = self.name();
        let ser_err = |e: Box<dyn std::error::Error + Send + Sync>| RpcError::Serialize {
            serializer,
            reason: e.to_string(),
            source: Some(Cause::from_boxed(e)),
        };
        match self {
            SerializerKind::MsgPack => {
                let mut w = out.writer();
                rmp_serde::encode::write_named(&mut w, value).map_err(|e| ser_err(e.into()))
            }
            #[cfg(feature = "protobuf")]
            SerializerKind::Protobuf => protobuf::encode(value, out).map_err(|e| ser_err(e.into())),
            #[cfg(not(feature = "protobuf"))]
            SerializerKind::Protobuf => Err(ser_err(WITHOUT_PROTOBUF.into())),
            SerializerKind::Json => {
                serde_json::to_writer(out.writer(), value).map_err(|e| ser_err(e.into()))
            }
        }
    }

    fn decode<T: DeserializeOwned>(self, bytes: &[u8]) -> Result<T, RpcError> {
        let serializer = self.name();
        let de_err = |e: Box<dyn std::error::Error + Send + Sync>| RpcError::Deserialize {
            serializer,
            reason: e.to_string(),
            source: Some(Cause::from_boxed(e)),
        };
        match self {
            SerializerKind::MsgPack => rmp_serde::from_slice(bytes).map_err(|e| de_err(e.into())),
            #[cfg(feature = "protobuf")]
            SerializerKind::Protobuf => protobuf::decode(bytes).map_err(|e| de_err(e.into())),
            #[cfg(not(feature = "protobuf"))]
            SerializerKind::Protobuf => Err(de_err(WITHOUT_PROTOBUF.into())),
            SerializerKind::Json => {
                // JSON has no representation for "nothing": accept an empty body as `null`.
                let bytes: &[u8] = if bytes.is_empty() { b"null" } else { bytes };
                serde_json::from_slice(bytes).map_err(|e| de_err(e.into()))
            }
        }
    }
}

/// The serializers this build encodes and decodes: all of them, less
/// protobuf without the `protobuf` feature.
#[cfg(test)]
pub(crate) fn built_in() -> impl Iterator<Item = SerializerKind> {
    SerializerKind::ALL
        .iter()
        .copied()
        .filter(|s| cfg!(feature = "protobuf") || *s != SerializerKind::Protobuf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Msg {
        id: u64,
        from_uid: u64,
        to_uid: u64,
        content: String,
    }

    #[test]
    fn a_large_body_takes_its_allocation_with_it() {
        let copy = |v: &Vec<u8>, out: &mut BytesMut| {
            out.extend_from_slice(v);
            Ok(())
        };
        std::thread::spawn(move || {
            let big = encode_body(&vec![1u8; 4 << 20], copy).unwrap();
            assert_eq!(big.len(), 4 << 20);
            ARENA.with(|a| {
                let a = a.borrow();
                assert!(
                    a.buf.capacity() + a.spare.capacity() <= 2 * ARENA_KEEP,
                    "the arena keeps nothing of the large body"
                );
            });
            // Small bodies still come from the arena.
            let small = encode_body(&vec![2u8; 100], copy).unwrap();
            assert_eq!(&small[..], &[2u8; 100][..]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_arena_takes_its_previous_chunk_back_once_its_bodies_are_dropped() {
        let body = vec![3u8; 100 << 10];
        let copy = |v: &Vec<u8>, out: &mut BytesMut| {
            out.extend_from_slice(v);
            Ok(())
        };
        // On a thread of its own: the arena is per thread.
        std::thread::spawn(move || {
            let _warm = encode_body(&body, copy).unwrap();
            let a = encode_body(&body, copy).unwrap();
            let b = encode_body(&body, copy).unwrap();
            let c = encode_body(&body, copy).unwrap();
            assert_eq!(&a[..], &body[..]);
            // Each body reserves room for two: `a` and `b` share a chunk,
            // `c` (with `a` and `b` alive) needed another.
            let (a_ptr, b_ptr) = (a.as_ptr() as usize, b.as_ptr() as usize);
            assert_eq!(b_ptr - a_ptr, body.len(), "a and b share a chunk");
            drop((a, b, c));
            // `d` fills what is left of `c`'s chunk; `e` finds no room there
            // (`d` lives) and takes the spare, `a` and `b`'s chunk, back.
            let d = encode_body(&body, copy).unwrap();
            let e = encode_body(&body, copy).unwrap();
            assert_eq!(e.as_ptr() as usize, a_ptr, "the spare chunk is reused");
            drop(d);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn every_serializer_round_trips_args_and_results() {
        let m = Msg {
            id: 3,
            from_uid: 1003,
            to_uid: 2003,
            content: "hi".into(),
        };
        for s in built_in() {
            let mut b = BytesMut::new();
            s.encode(&(7u64, "x".to_string()), &mut b).unwrap();
            let back: (u64, String) = s.decode(&b).unwrap();
            assert_eq!(back, (7, "x".to_string()), "{s}");

            let mut b = BytesMut::new();
            s.encode(&m, &mut b).unwrap();
            assert_eq!(s.decode::<Msg>(&b).unwrap(), m, "{s}");

            let mut b = BytesMut::new();
            s.encode(&(), &mut b).unwrap();
            s.decode::<()>(&b).unwrap();
        }
    }

    #[test]
    fn wrong_types_are_a_deserialize_error_naming_the_serializer() {
        for s in built_in() {
            let mut b = BytesMut::new();
            s.encode(&"not a message", &mut b).unwrap();
            match s.decode::<Msg>(&b) {
                Err(RpcError::Deserialize { serializer, .. }) => assert_eq!(serializer, s.name()),
                other => panic!("{s}: expected a deserialize error, got {other:?}"),
            }
        }
    }

    #[cfg(not(feature = "protobuf"))]
    #[test]
    fn without_its_feature_protobuf_is_an_error_naming_it() {
        let s = SerializerKind::Protobuf;
        match s.encode(&7u64, &mut BytesMut::new()) {
            Err(RpcError::Serialize { serializer, .. }) => assert_eq!(serializer, "protobuf"),
            other => panic!("expected a serialize error, got {other:?}"),
        }
        match s.decode::<u64>(&[0x08, 7]) {
            Err(RpcError::Deserialize { serializer, .. }) => assert_eq!(serializer, "protobuf"),
            other => panic!("expected a deserialize error, got {other:?}"),
        }
    }

    #[test]
    fn ids_and_names() {
        for &s in SerializerKind::ALL {
            assert_eq!(SerializerKind::from_id(s.id()).unwrap(), s);
            assert_eq!(s.name().parse::<SerializerKind>().unwrap(), s);
        }
        assert_eq!(
            SerializerKind::from_id(0),
            Err(RpcError::UnknownSerializer(0))
        );
        assert!("xml".parse::<SerializerKind>().is_err());
    }
}
